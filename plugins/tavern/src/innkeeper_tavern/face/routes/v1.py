"""Every v1 route of the Tavern resource libraries, with its body limit and media types."""

from __future__ import annotations

from collections.abc import Iterable

from innkeeper_tavern.state.resources import TavernResources

from . import characters, presets, thumbnails, users, world_book_entries, world_books
from .common import Route

#: `docs/contract/http-api.md#prefixes`: prefix of every v1 route.


def v1_routes(res: TavernResources) -> list[Route]:
    """The preset, character, world-book and user routes of the v1 table."""
    groups: Iterable[list[Route]] = (
        presets.routes(res),
        characters.routes(res),
        thumbnails.routes(res),
        users.routes(res),
        world_books.routes(res),
        world_book_entries.routes(res),
    )
    return [route for group in groups for route in group]
