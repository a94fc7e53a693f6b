"""The v2 play workspace (`spec/API.md` "v2 Tavern-owned interfaces"): a bound root with its
files and managed documents, play sessions over the host's sessions, playthroughs, import
context, operation logs and the chrome mode.

:func:`install_play` wires it into the plugin through ``ctx`` (everything it registers is
disposed with the plugin).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

from innkeeper_hostapi import PluginContext, ServiceKey
from innkeeper_hostapi.agents import AGENTS, SESSIONS, SYSTEM_PROMPT, TURN_ENDED, WORKSPACES
from innkeeper_hostapi.mvu import TAVERN_MVU
from innkeeper_tavern.assembler.state import strategy_applied
from innkeeper_tavern.resources import TavernResources
from innkeeper_tavern.selection.store import SessionSelectionStore

from .chrome import TAVERN_CHROME, ChromeService, chrome_routes
from .cleanup import Cleanup
from .cleanup_routes import cleanup_routes, register_cleanup_tool
from .errors import PlayError
from .import_context import ImportContexts
from .import_source import register_import_context_source
from .leases import MANAGED_KEY
from .oplog import Journal, OperationLog
from .oplog_routes import oplog_routes
from .playthrough_routes import import_context_routes, playthrough_routes
from .playthroughs import Playthroughs
from .previous import previous_routes
from .routes import V2_PREFIX, method_not_allowed, register, workspace_routes
from .sessions import PlaySessions
from .workspace import PlayWorkspace

T = TypeVar("T")

#: The folder bound on first need when no play workspace is (inside the Tavern data directory;
#: the SillyTavern folder import binds the same one).
DEFAULT_WORKSPACE_DIR = "play-workspace"

#: How many sessions :attr:`Play.seen` remembers before it starts over.
MAX_SEEN_SESSIONS = 10_000

#: The system-prompt section that carries a claimed import context.
IMPORT_CONTEXT_SECTION = "pmp-dsh-tavern:import-context"
#: After the profile (order 10) and after an applied Assembler strategy's system text (order 11),
#: before the chat: the system prompt precedes history either way.
IMPORT_CONTEXT_ORDER = 12

__all__ = ["TAVERN_CHROME", "TAVERN_PLAY", "V2_PREFIX", "Play", "install_play"]


def utc_now_ms() -> str:
    """An ISO-8601 UTC timestamp with milliseconds (``YYYY-MM-DDTHH:mm:ss.sssZ``)."""
    now = datetime.now(UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


@dataclass(slots=True)
class Play:
    """The play services, for other Tavern parts (MVU leases, v1 selection checks)."""

    workspace: PlayWorkspace
    sessions: PlaySessions
    playthroughs: Playthroughs
    oplog: OperationLog
    #: Session id → the host workspace it belongs to, as seen by :meth:`context_lease`
    #: (a session never moves; bounded by :data:`MAX_SEEN_SESSIONS`).
    seen: dict[str, str | None] = field(default_factory=dict)

    async def context_lease(self, session_id: str) -> Callable[[], bool] | None:
        """For a play session (one in the bound workspace): a synchronous check that turns
        false on any catalog or timeline write and on a workspace identity change (spec/MVU.md
        "Prompt Template dependency reads"); ``None`` for any other session."""
        binding = self.workspace.binding
        leases = self.workspace.leases
        lease = leases.capture_read_lease([MANAGED_KEY])
        if binding is None:
            return None
        try:
            inspection = await self.sessions.inspect(session_id)
        except PlayError:
            return None
        if len(self.seen) >= MAX_SEEN_SESSIONS:
            self.seen.clear()
        self.seen[session_id] = inspection.header.workspace_id
        if inspection.header.workspace_id != binding.workspace_id:
            return None
        return lambda: leases.valid(lease)

    def context_lease_now(self, session_id: str) -> Callable[[], bool] | None:
        """The synchronous form (``getManagementDefaults``): ``None`` without a bound workspace
        or for a session already seen outside it; otherwise — a play session, or one not seen
        yet, conservatively — the same catalog/timeline/workspace check."""
        binding = self.workspace.binding
        known = self.seen.get(session_id, binding.workspace_id if binding else None)
        if binding is None or known != binding.workspace_id:
            return None
        leases = self.workspace.leases
        lease = leases.capture_read_lease([MANAGED_KEY])
        return lambda: leases.valid(lease)


#: The play services (resolve at call time).
TAVERN_PLAY: ServiceKey[Play] = ServiceKey("tavern.play", Play)


def _hook(ctx: PluginContext, hooks: list[T], hook: T) -> None:
    """Append ``hook`` to a Tavern hook list, removed again when the plugin unloads."""
    hooks.append(hook)
    ctx.on_dispose(lambda: hooks.remove(hook))


async def install_play(
    ctx: PluginContext, resources: TavernResources, selections: SessionSelectionStore
) -> Play:
    """Open the play stores and register the v2 play routes."""
    workspace = PlayWorkspace(
        ctx.data_dir,
        lambda: ctx.get_optional(WORKSPACES),
        clock=utc_now_ms,
        logger=ctx.logger,
        # Absolute like every bound root (a relative --data-dir is taken from the cwd).
        default_root=Path(os.path.abspath(ctx.data_dir / DEFAULT_WORKSPACE_DIR)),  # noqa: ASYNC240 (one getcwd at set-up)
    )
    await workspace.open()
    journal = Journal(ctx.data_dir, logger=ctx.logger, clock_ms=lambda: int(time.time() * 1000))
    await asyncio.to_thread(journal.open)
    ctx.on_dispose(journal.close)
    oplog = OperationLog(journal, ctx.logger)
    sessions = PlaySessions(
        workspace=workspace,
        selections=selections,
        resources=resources,
        sessions=lambda: ctx.get_optional(SESSIONS),
        agents=lambda: ctx.get_optional(AGENTS),
        mvu=lambda: ctx.get_optional(TAVERN_MVU),
        logger=ctx.logger,
        data_dir=ctx.data_dir,
    )
    playthroughs = Playthroughs(sessions, logger=ctx.logger)
    play = Play(workspace, sessions, playthroughs, oplog)
    ctx.provide(TAVERN_PLAY, lambda: play)
    _hook(ctx, selections.character_guards, playthroughs.selection_conflicts)
    _hook(ctx, resources.relinkers, playthroughs.relink_missing)
    ctx.add_middleware(method_not_allowed)
    register(ctx, workspace_routes(workspace, sessions, oplog))
    register(ctx, previous_routes(workspace))
    register(ctx, playthrough_routes(playthroughs, oplog))
    register(ctx, oplog_routes(oplog))
    contexts = ImportContexts(
        ctx.data_dir, sessions, selections=selections, resources=resources, logger=ctx.logger
    )
    await contexts.open()
    contexts.strategy_applied = lambda session_id: strategy_applied(ctx, session_id)
    register_import_context_source(ctx, contexts)
    _hook(ctx, sessions.branch_copiers, contexts.copy_lineage)
    _hook(ctx, sessions.branch_undoers, contexts.drop_lineage)
    ctx.on(TURN_ENDED, contexts.on_turn_ended)
    ctx.get(SYSTEM_PROMPT).section(
        ctx, IMPORT_CONTEXT_SECTION, IMPORT_CONTEXT_ORDER, contexts.render
    )
    register(ctx, import_context_routes(contexts, oplog))
    cleanup = Cleanup(playthroughs, contexts)
    register(ctx, cleanup_routes(cleanup, oplog))
    if ctx.config.get("maintenanceTools") is True:
        register_cleanup_tool(ctx, cleanup, oplog)
    chrome = ChromeService(ctx.data_dir, logger=ctx.logger)
    await chrome.open()
    ctx.provide(TAVERN_CHROME, lambda: chrome)
    ctx.on_dispose(chrome.close)
    register(ctx, chrome_routes(chrome))
    return play
