"""The Assembler's only contact with the host: ``innkeeper_plugin_setup(ctx)``.

Provides one :class:`~.registry.SourceRegistry` as ``dshPromptSources`` and its alias
``tavernRequestSources``, the :class:`~.service.Assembler` as ``dshPromptAssembler``, the system
section ``dsh-assembler:system``, the ``REQUEST_PROJECTOR`` slot, a ``turn/ended`` listener that
forgets the turn's plans, an ``agent/created`` listener (forks inherit the parent's snapshot)
and the routes; then emits ``dshPromptSources/ready`` so plugins loaded
before this generation (re)register their sources. All through ``ctx``: unloading takes
everything back, the projector slot included.
"""

from __future__ import annotations

from innkeeper_hostapi import PluginContext, hookimpl
from innkeeper_hostapi.agents import (
    AGENT_CREATED,
    REQUEST_PROJECTOR,
    SYSTEM_PROMPT,
    TURN_ENDED,
    TurnEnded,
)
from innkeeper_hostapi.assembly import (
    PROMPT_ASSEMBLER,
    PROMPT_SOURCES,
    SOURCES_READY,
    TAVERN_REQUEST_SOURCES,
)

from .http import install_routes
from .registry import SourceRegistry
from .service import SECTION_NAME, SECTION_ORDER, Assembler, AssemblerProjector
from .store import StrategyStore


@hookimpl
async def innkeeper_plugin_setup(ctx: PluginContext) -> None:
    """Open the strategy store and register the registry, service, section and projector."""
    store = StrategyStore(ctx.data_dir)
    await store.open()
    registry = SourceRegistry()
    assembler = Assembler(ctx, store, registry)
    ctx.on_dispose(registry.clear)
    ctx.on_dispose(assembler.clear)
    ctx.provide(PROMPT_SOURCES, lambda: registry)
    ctx.provide(TAVERN_REQUEST_SOURCES, lambda: registry)
    ctx.provide(PROMPT_ASSEMBLER, lambda: assembler)
    ctx.get(SYSTEM_PROMPT).section(ctx, SECTION_NAME, SECTION_ORDER, assembler.render_section)
    ctx.claim_slot(REQUEST_PROJECTOR, AssemblerProjector(assembler))

    async def on_turn_ended(event: TurnEnded) -> None:
        assembler.drop_turn(event.session_id, event.turn)

    ctx.on(TURN_ENDED, on_turn_ended)
    ctx.on(AGENT_CREATED, assembler.on_agent_created)
    install_routes(ctx, assembler)
    # Plugins that registered into an earlier generation's registry register again.
    try:
        await ctx.emit(SOURCES_READY, registry)
    except Exception as exc:
        ctx.logger.warning("a %s listener failed (%s)", SOURCES_READY.name, type(exc).__name__)
