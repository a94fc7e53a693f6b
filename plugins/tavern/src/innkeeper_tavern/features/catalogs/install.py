"""Provide ``tavernScopeCatalog`` and ``tavernMemorySources`` through the plugin context."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Final

from innkeeper_hostapi import HttpProblem, PluginContext
from innkeeper_hostapi.agents import AGENT_CREATED, SESSIONS, AgentCreated
from innkeeper_hostapi.catalogs import TAVERN_MEMORY_SOURCES, TAVERN_SCOPE_CATALOG
from innkeeper_hostapi.mvu import TAVERN_MVU
from innkeeper_tavern.features.mvu_service.service import MvuService
from innkeeper_tavern.state.resources import TavernResources
from innkeeper_tavern.state.session_bindings.store import SessionSelectionStore
from innkeeper_tavern.state.session_templates import SESSION_CONFIGURATIONS

from .memory import WORLD_BOOK_ADAPTER, MemorySources
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


#: ``resolvePromptDependency`` consumers (docs/mvu.md "Prompt reads") → the memory-source
#: adapter whose bound items they must be among.
CONSUMER_ADAPTERS: Final[Mapping[str, str]] = {
    "tavern.world-books": WORLD_BOOK_ADAPTER,
    "tavern.prompt-templates": TEMPLATE_ADAPTER,
}


def bound_consumer_check(sources: MemorySources) -> Callable[[str, str, str], Awaitable[bool]]:
    """``(session_id, consumer adapter id, consumer id) → bound?`` for the MVU service: the
    consumer must be a world book / the template ``tavernMemorySources.listBound`` lists for
    that session (its embedded, selected, linked and opening books; the template its current
    configuration was applied from)."""

    async def check(session_id: str, adapter_id: str, resource_id: str) -> bool:
        adapter = CONSUMER_ADAPTERS.get(adapter_id)
        if adapter is None:
            return False
        try:
            bound = await sources.list_bound(
                scope={"sessionId": session_id, "authority": "local"}, adapter_id=adapter
            )
        except HttpProblem:
            return False  # an unknown session, or the adapter is absent: nothing is bound
        return any(item["id"] == resource_id for item in bound["items"])

    return check
