"""Provide ``tavernScopeCatalog`` and ``tavernMemorySources`` through the plugin context."""

from __future__ import annotations

from innkeeper_hostapi import PluginContext
from innkeeper_hostapi.agents import AGENT_CREATED, SESSIONS, AgentCreated
from innkeeper_hostapi.catalogs import TAVERN_SCOPE_CATALOG
from innkeeper_tavern.resources import TavernResources
from innkeeper_tavern.selection.store import SessionSelectionStore

from .scope import ScopeCatalog


def install_catalogs(
    ctx: PluginContext, resources: TavernResources, selections: SessionSelectionStore
) -> ScopeCatalog:
    """Provide the scope catalog; unloading closes it (its leases are revoked)."""
    catalog = ScopeCatalog(resources, selections, lambda: ctx.get_optional(SESSIONS))
    ctx.provide(TAVERN_SCOPE_CATALOG, lambda: catalog)
    ctx.on_dispose(catalog.close)

    async def on_agent_created(event: AgentCreated) -> None:
        catalog.agent_created(event.session_id)

    ctx.on(AGENT_CREATED, on_agent_created)
    return catalog
