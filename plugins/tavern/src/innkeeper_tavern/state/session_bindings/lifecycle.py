"""When a session's selection freezes: the ``agent/created`` boundary.

`docs/contract/loader.md#when-bindings-freeze`:

- a fresh ordinary session freezes the then-current default the first time an agent uses it;
- an ordinary fork copies its parent's selection; a delegated sub-agent session
  (``delegationDepth > 0``) freezes the parent's selection too, ``rp`` included (the projection
  of "New chat with current settings"). After that parent and child are not linked: later
  changes to either never reach the other;
- resumed agents (a cold session, a restart) pass the same boundary; a session that already has
  a selection keeps it, and so does one that was bound explicitly before its agent first ran.

Both forks and delegated sessions carry their parent in the session header, and the host's
``AgentCreated`` event names it, so one rule covers both. A parent that has no selection of its
own yet is resolved the same way (its parent, and so on up the chain), which is exactly what
that parent would freeze if its own agent ran now.

A failure here (a full store, a failed write) propagates: the host then refuses to create the
agent ("Initialization failure propagates to registration; it is not downgraded to a warning").
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Final

from innkeeper_hostapi import HttpProblem
from innkeeper_hostapi.agents import AgentCreated
from innkeeper_hostapi.sessions import SessionController, SessionNotFound

from .model import Selection, SelectionInvalid, check_session_id, valid_session_id
from .store import SessionSelectionStore

#: Longest chain of unbound ancestors walked to find an inherited selection; the host bounds
#: fork chains itself, this only keeps a corrupt header loop from spinning.
MAX_ANCESTOR_WALK: Final = 64

SessionsLookup = Callable[[], SessionController | None]


async def _parent_of(sessions: SessionController | None, session_id: str) -> str | None:
    if sessions is None:
        return None
    try:
        inspection = await sessions.inspect(session_id)
    except SessionNotFound:
        return None
    parent = inspection.header.parent
    return parent.session_id if parent is not None else None


async def inherited_selection(
    store: SessionSelectionStore,
    parent_session_id: str | None,
    sessions: SessionController | None = None,
) -> Selection:
    """What a session whose parent is ``parent_session_id`` (``None``: no parent) freezes.

    The nearest ancestor with a stored selection gives it; with none (or no parent), the
    store's :meth:`~SessionSelectionStore.defaults`. Reads only; nothing is stored.
    """
    current = parent_session_id
    for _ in range(MAX_ANCESTOR_WALK):
        if current is None or not valid_session_id(current):
            break
        stored = store.stored(current)
        if stored is not None:
            return stored
        current = await _parent_of(sessions, current)
    return store.defaults()


async def session_known(
    store: SessionSelectionStore, session_id: str, sessions: SessionController | None
) -> bool:
    """Whether the host (or, without a host session service, the store) knows ``session_id``.
    A session with a stored selection counts as known without asking the host."""
    if sessions is None or store.has(session_id):
        return True
    try:
        await sessions.inspect(session_id)
    except SessionNotFound:
        return False
    return True


async def require_session(
    store: SessionSelectionStore, session_id: str, sessions: SessionController | None
) -> None:
    """For a route: 400 with the id rule's code for a malformed id, 404 ``SESSION_NOT_FOUND``
    for a session nobody knows."""
    try:
        check_session_id(session_id)
    except SelectionInvalid as exc:
        raise HttpProblem(400, exc.code, exc.message) from None
    if not await session_known(store, session_id, sessions):
        raise HttpProblem(404, "SESSION_NOT_FOUND", f"session {session_id} does not exist")


async def pending_selection(
    store: SessionSelectionStore, session_id: str, sessions: SessionController | None
) -> Selection:
    """The selection ``session_id`` has, or would freeze if its agent ran now (no write)."""
    stored = store.stored(session_id)
    if stored is not None:
        return stored
    return await inherited_selection(store, await _parent_of(sessions, session_id), sessions)


async def freeze_for_agent(
    store: SessionSelectionStore,
    event: AgentCreated,
    sessions: SessionController | None = None,
) -> tuple[Selection, bool]:
    """Freeze the selection of the session whose agent was just created.

    Returns ``(selection, frozen_now)``; an existing selection is returned unchanged.
    """
    if store.has(event.session_id):
        stored = store.stored(event.session_id)
        assert stored is not None
        return stored, False
    initial = await inherited_selection(store, event.parent_session_id, sessions)
    return await store.ensure(event.session_id, initial)


def agent_created_listener(
    store: SessionSelectionStore,
    sessions: SessionsLookup,
    logger: logging.Logger | None = None,
) -> Callable[[AgentCreated], Awaitable[None]]:
    """An ``AGENT_CREATED`` listener that freezes selections (``sessions`` resolves the host's
    session controller at call time, for ancestors without a selection)."""
    log = logger or logging.getLogger("innkeeper.plugin.tavern.selection")

    async def on_agent_created(event: AgentCreated) -> None:
        if not valid_session_id(event.session_id):
            # The store cannot key it; the agent still runs with the defaults (never stored).
            log.warning("session id %r cannot hold a selection", event.session_id[:60])
            return
        _, frozen = await freeze_for_agent(store, event, sessions())
        if frozen:
            log.info(
                "session %s: selection frozen (%s)",
                event.session_id,
                "inherited from " + event.parent_session_id
                if event.parent_session_id
                else "current default",
            )

    return on_agent_created


__all__ = [
    "MAX_ANCESTOR_WALK",
    "agent_created_listener",
    "freeze_for_agent",
    "inherited_selection",
    "pending_selection",
    "require_session",
    "session_known",
]
