"""The ``tavernMvu`` service: MVU state per session, its files, turns and HTTP primitives.

:func:`install_mvu` is the one call the plugin's setup makes. It opens the service over
``ctx.data_dir`` (``mvu-instances.json``, ``mvu-facts.json``, legacy ``mvu-state.json``),
provides it as :data:`~innkeeper_hostapi.mvu.TAVERN_MVU`, and wires it into turns:

* ``agent/created`` — allocate (or seed, for a fork) the session's instance and apply any
  completed turn a restart left unapplied;
* a request hook — freeze the durable pre-turn checkpoint before the first request of a turn
  (docs/contract/mvu.md#forks-and-seeds);
* ``turn/ended`` — apply the turn's reply exactly once.

Everything is registered through ``ctx``, so unloading takes it back.
"""

from __future__ import annotations

from typing import Final

from innkeeper_hostapi import PluginContext
from innkeeper_hostapi.agents import (
    AGENT_CREATED,
    AGENTS,
    REQUEST_HOOKS,
    SESSION_EVENTS_COMMITTED,
    SESSIONS,
    TURN_ENDED,
    AgentCreated,
    CallConfigDraft,
    TurnContext,
    TurnEnded,
)
from innkeeper_hostapi.mvu import TAVERN_MVU, MvuServiceError
from innkeeper_tavern.face.routes.mvu import mvu_routes
from innkeeper_tavern.features.mvu_service.leases import HostSessionLeases
from innkeeper_tavern.features.mvu_service.service import MvuService
from innkeeper_tavern.features.mvu_service.templates import character_mvu_id, parse_explicit
from innkeeper_tavern.pure.api_paths import V1_PREFIX
from innkeeper_tavern.state.resources import TavernResources
from innkeeper_tavern.state.session_bindings import SessionSelectionStore

#: Order of the checkpoint request hook: before any hook that could depend on the state.
CHECKPOINT_HOOK_ORDER: Final = -1_000_000
#: The code of a broken template source: visible as ``sourceError``, never executed
#: (docs/contract/mvu.md#identity).
SOURCE_ERROR: Final = "MVU_SOURCE_ERROR"
#: ``[plugins.tavern] mvu = {resources = [...]}``: explicit host resources
#: (docs/contract/mvu.md#explicit-resources).
MVU_CONFIG_KEY: Final = "mvu"
#: v1 prefix (docs/contract/http-api.md#prefixes).


async def install_mvu(
    ctx: PluginContext, resources: TavernResources, selections: SessionSelectionStore
) -> MvuService:
    """Open the service, provide ``tavernMvu``, hook turns and register the v1 routes."""
    # captureSessionLease over the host's public session and agent services.
    leases = HostSessionLeases(lambda: ctx.get_optional(SESSIONS), lambda: ctx.get_optional(AGENTS))
    ctx.on(SESSION_EVENTS_COMMITTED, leases.on_events)
    ctx.on_dispose(leases.close)
    service = MvuService(
        ctx.data_dir,
        resources=resources,
        selections=selections,
        sessions=lambda: ctx.get_optional(SESSIONS),
        agents=lambda: ctx.get_optional(AGENTS),
        logger=ctx.logger,
        explicit=parse_explicit(ctx.config.get(MVU_CONFIG_KEY)),
        capture_session_lease=leases.capture,
    )
    await service.open()
    ctx.provide(TAVERN_MVU, lambda: service)
    ctx.on_dispose(service.close)

    async def on_agent_created(event: AgentCreated) -> None:
        if event.delegation_depth > 0:
            return
        try:
            await service.reconcile(event.session_id)
        except MvuServiceError as exc:
            # Agent creation is not refused here; the first request is (checkpoint hook).
            ctx.logger.warning("MVU state of a session is unavailable: %s", exc.code)

    async def on_turn_ended(event: TurnEnded) -> None:
        try:
            await service.reconcile(event.session_id)
        except MvuServiceError as exc:
            ctx.logger.warning("MVU update after a turn was not applied: %s", exc.code)
        except Exception:
            ctx.logger.exception("MVU update after a turn failed")
        try:
            await service.observe_requests(event.session_id, event.turn)
        except Exception:
            ctx.logger.exception("MVU request facts of a turn failed")

    async def checkpoint_hook(turn: TurnContext, draft: CallConfigDraft) -> None:
        if turn.delegation_depth > 0:
            return
        # A session whose MVU baseline is missing (a pending seed, a changed identity) refuses
        # the request rather than run without it. A card whose MVU source is broken only loses
        # MVU (its sourceError is listed); the conversation itself goes on.
        try:
            await service.checkpoint(turn.session_id, turn.turn, turn.claim_seq)
        except MvuServiceError as exc:
            if exc.code != SOURCE_ERROR:
                raise
            ctx.logger.warning("MVU source of a session's card is broken; no MVU this turn")

    ctx.on(AGENT_CREATED, on_agent_created)
    ctx.on(TURN_ENDED, on_turn_ended)
    hooks = ctx.get_optional(REQUEST_HOOKS)
    if hooks is not None:
        hooks.adjust(ctx, "tavern.mvu:checkpoint", CHECKPOINT_HOOK_ORDER, checkpoint_hook)
    for route in mvu_routes(lambda: service):
        ctx.add_route(
            route.method,
            V1_PREFIX + route.path,
            route.handler,
            name=route.name,
            max_body=route.max_body,
            accepts=route.accepts,
        )
    return service


__all__ = ["MvuService", "character_mvu_id", "install_mvu"]
