"""Session selections: which preset, character card, user and world books each session uses.

- :mod:`.model` — the ``Selection`` struct, strict checks and lenient (migration) reading;
- :mod:`.store` — ``SessionSelectionStore`` over ``session-selections.json`` (schema 2);
- :mod:`.preset_default` — the global default preset (``state.json``);
- :mod:`.lifecycle` — freeze-on-first-use, fork and delegation inheritance at ``agent/created``.

:func:`setup_session_selections` is what the plugin's setup calls: it opens the store, provides
it as :data:`SESSION_SELECTIONS` and registers the ``agent/created`` listener, all through
``ctx`` so unloading takes everything back.
"""

from __future__ import annotations

from typing import Final

from innkeeper_hostapi import PluginContext, ServiceKey
from innkeeper_hostapi.agents import AGENT_CREATED, SESSIONS

from .errors import SelectionStoreError
from .lifecycle import agent_created_listener, freeze_for_agent, inherited_selection
from .model import ResourceKind, Selection, SelectionInvalid
from .store import DEFAULT_MAX_SESSIONS, HARD_MAX_SESSIONS, SessionSelectionStore

#: The store, for the profile loader, templates and other Tavern parts (resolve at call time).
SESSION_SELECTIONS: ServiceKey[SessionSelectionStore] = ServiceKey(
    "tavern.session_selections", SessionSelectionStore
)
#: ``[plugins.tavern]`` option: the session cap (default 2,048, at most 4,096).
MAX_SESSIONS_OPTION: Final = "max_session_selections"


async def setup_session_selections(ctx: PluginContext) -> SessionSelectionStore:
    """Open ``session-selections.json`` in ``ctx.data_dir``, provide the store and freeze
    selections at ``agent/created``. Raises if the file cannot be loaded (the plugin then
    reports the reason instead of starting with selections missing)."""
    limit = ctx.config.get(MAX_SESSIONS_OPTION, DEFAULT_MAX_SESSIONS)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 0 < limit <= HARD_MAX_SESSIONS:
        raise ValueError(f"{MAX_SESSIONS_OPTION} must be an integer from 1 to {HARD_MAX_SESSIONS}")
    store = SessionSelectionStore(ctx.data_dir, max_sessions=limit, logger=ctx.logger)
    await store.open()
    ctx.provide(SESSION_SELECTIONS, lambda: store)
    ctx.on(
        AGENT_CREATED,
        agent_created_listener(store, lambda: ctx.get_optional(SESSIONS), ctx.logger),
    )
    return store


__all__ = [
    "MAX_SESSIONS_OPTION",
    "SESSION_SELECTIONS",
    "ResourceKind",
    "Selection",
    "SelectionInvalid",
    "SelectionStoreError",
    "SessionSelectionStore",
    "freeze_for_agent",
    "inherited_selection",
    "setup_session_selections",
]
