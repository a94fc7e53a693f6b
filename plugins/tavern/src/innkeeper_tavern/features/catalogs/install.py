"""Provide ``tavernScopeCatalog`` and ``tavernMemorySources`` through the plugin context."""

from __future__ import annotations

from innkeeper_hostapi import PluginContext
from innkeeper_hostapi.agents import AGENT_CREATED, SESSIONS, AgentCreated
from innkeeper_hostapi.catalogs import TAVERN_MEMORY_SOURCES, TAVERN_SCOPE_CATALOG
from innkeeper_hostapi.mvu import TAVERN_MVU
from innkeeper_tavern.features.mvu_service.service import MvuService
from innkeeper_tavern.state.resources import TavernResources
from innkeeper_tavern.state.session_bindings.store import SessionSelectionStore
from innkeeper_tavern.state.session_templates import SESSION_CONFIGURATIONS

from .memory import MemorySources
from .scope import ScopeCatalog
from .template_source import TEMPLATE_ADAPTER, TemplateSource


def install_catalogs(
    ctx: PluginContext, resources: TavernResources, selections: SessionSelectionStore
) -> tuple[ScopeCatalog, MemorySources]:
    """Provide both services; unloading closes them (their leases are revoked). The MVU part
    of ``tavernMemorySources`` follows whichever ``tavernMvu`` is provided at call time."""
    catalog = ScopeCatalog(resources, selections, lambda: ctx.get_optional(SESSIONS))
    ctx.provide(TAVERN_SCOPE_CATALOG, lambda: catalog)
    ctx.on_dispose(catalog.close)

    def mvu() -> MvuService | None:
        service = ctx.get_optional(TAVERN_MVU)
        return service if isinstance(service, MvuService) else None

    sources = MemorySources(
        resources, selections, lambda: ctx.get_optional(SESSIONS), mvu, catalog.instance_token
    )
    sources.extra_adapters[TEMPLATE_ADAPTER] = TemplateSource(
        lambda: ctx.get_optional(SESSION_CONFIGURATIONS)
    )
    ctx.provide(TAVERN_MEMORY_SOURCES, lambda: sources)
    ctx.on_dispose(sources.close)

    async def on_agent_created(event: AgentCreated) -> None:
        catalog.agent_created(event.session_id)

    ctx.on(AGENT_CREATED, on_agent_created)
    return catalog, sources
