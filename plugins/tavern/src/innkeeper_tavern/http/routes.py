"""Every v1 route of the Tavern resource libraries, with its body limit and media types."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from innkeeper_tavern.resources import TavernResources

from . import characters, presets, users, world_books
from .common import Handler

#: `spec/API.md` "v1 bundled UI contract": prefix of every v1 route.
V1_PREFIX: Final = "/pmp-dsh-tavern/api/v1"


@dataclass(frozen=True, slots=True)
class Route:
    """One route to register: ``ctx.add_route(method, V1_PREFIX + path, handler, ...)``."""

    method: str
    path: str
    handler: Handler
    name: str
    max_body: int | None = None
    accepts: tuple[str, ...] | None = None


def v1_routes(res: TavernResources) -> list[Route]:
    """The preset, character, world-book and user routes of the v1 table."""
    groups: Iterable[list[Route]] = (
        presets.routes(res, Route),
        characters.routes(res, Route),
        users.routes(res, Route),
        world_books.routes(res, Route),
    )
    return [route for group in groups for route in group]
