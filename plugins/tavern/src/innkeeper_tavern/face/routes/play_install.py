"""Wiring of the v2 play workspace into the plugin: :func:`install_play` opens the play
stores, provides ``tavern.play`` and ``tavern.chrome`` and registers the v2 play routes, the
import-context section and the cleanup tool (everything through ``ctx``, disposed with the
plugin)."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import TypeVar

from innkeeper_hostapi import PluginContext
from innkeeper_hostapi.agents import AGENTS, SESSIONS, SYSTEM_PROMPT, TURN_ENDED, WORKSPACES
from innkeeper_hostapi.mvu import TAVERN_MVU
from innkeeper_tavern.face.routes.play import method_not_allowed, register, workspace_routes
from innkeeper_tavern.face.routes.play_chrome import TAVERN_CHROME, ChromeService, chrome_routes
from innkeeper_tavern.face.routes.play_cleanup import cleanup_routes, register_cleanup_tool
from innkeeper_tavern.face.routes.play_oplog import oplog_routes
from innkeeper_tavern.face.routes.play_playthroughs import import_context_routes, playthrough_routes
from innkeeper_tavern.face.routes.play_previous import previous_routes
from innkeeper_tavern.features.play import TAVERN_PLAY, Play, utc_now_ms
from innkeeper_tavern.features.play.cleanup import Cleanup
from innkeeper_tavern.features.play.import_context import ImportContexts
from innkeeper_tavern.features.play.import_source import register_import_context_source
from innkeeper_tavern.features.play.oplog import Journal, OperationLog
from innkeeper_tavern.features.play.playthroughs import Playthroughs
from innkeeper_tavern.features.play.sessions import PlaySessions
from innkeeper_tavern.features.play.workspace import PlayWorkspace
from innkeeper_tavern.features.prompt_sources.state import strategy_applied
from innkeeper_tavern.state.resources import TavernResources
from innkeeper_tavern.state.session_bindings.store import SessionSelectionStore

__all__ = [
    "DEFAULT_WORKSPACE_DIR",
    "IMPORT_CONTEXT_ORDER",
    "IMPORT_CONTEXT_SECTION",
    "install_play",
]

T = TypeVar("T")

#: The folder bound on first need when no play workspace is (inside the Tavern data directory;
#: the SillyTavern folder import binds the same one).
DEFAULT_WORKSPACE_DIR = "play-workspace"

#: The system-prompt section that carries a claimed import context.
IMPORT_CONTEXT_SECTION = "pmp-dsh-tavern:import-context"
#: After the profile (order 10) and after an applied Assembler strategy's system text (order 11),
#: before the chat: the system prompt precedes history either way.
IMPORT_CONTEXT_ORDER = 12


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
