"""Sessionless compiles: what a session's first request would carry, before the session exists.

An opening draft (`docs/contract/openings.md#opening-drafts`) has a selection and opening
variables but no host session. :func:`sessionless` scopes a :class:`Sessionless` to the current
task, and :meth:`~.profile.TavernProfileLoader.compile` with no session and no turn — called
directly or through the Assembler's ``tavern.profile`` source in a preview — then resolves that
selection instead of the defaults, reads MVU macros from the given variables and scans the
greeting for lore as turn 1 does under the default strategy. Nothing is written: a compile
without a turn never records an audit, a snapshot or timed effects.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from innkeeper_tavern.state.session_bindings.model import Selection

__all__ = ["Sessionless", "current_sessionless", "sessionless"]


@dataclass(frozen=True, slots=True)
class Sessionless:
    """The inputs of a sessionless compile.

    ``selection`` is what the session would be bound to; ``variables`` the MVU variables
    (``{stat_data, ...}``) its first request reads, ``None`` without MVU data;
    ``strategy_applied`` whether an Assembler strategy would be applied to the new session
    (the greeting then joins the lore scan, as on turn 1)."""

    selection: Selection
    variables: Mapping[str, Any] | None
    strategy_applied: bool


_CURRENT: ContextVar[Sessionless | None] = ContextVar("tavern_sessionless", default=None)


def current_sessionless() -> Sessionless | None:
    """The scope set by :func:`sessionless` in this task, if any."""
    return _CURRENT.get()


@contextlib.contextmanager
def sessionless(scope: Sessionless) -> Iterator[None]:
    """Compiles without a session in this task (and the threads it starts) use ``scope``."""
    token = _CURRENT.set(scope)
    try:
        yield
    finally:
        _CURRENT.reset(token)
