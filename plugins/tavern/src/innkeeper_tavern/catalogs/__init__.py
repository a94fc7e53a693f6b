"""Catalog services of the Tavern plugin: ``tavernScopeCatalog`` (see :mod:`.scope`)."""

from __future__ import annotations

from innkeeper_hostapi import PluginContext, ServiceKey
from innkeeper_tavern.resources import TavernResources

from .scope import (
    SCOPE_CATALOG_CURSOR_INVALID,
    SCOPE_CATALOG_CURSOR_STALE,
    SCOPE_CATALOG_INVALID,
    ScopeCatalogError,
    ScopePage,
    TavernScopeCatalog,
)

__all__ = [
    "SCOPE_CATALOG",
    "SCOPE_CATALOG_CURSOR_INVALID",
    "SCOPE_CATALOG_CURSOR_STALE",
    "SCOPE_CATALOG_INVALID",
    "ScopeCatalogError",
    "ScopePage",
    "TavernScopeCatalog",
    "install_catalogs",
]

#: `spec/API.md` "Optional Host scope catalog": the service other plugins resolve at call time.
SCOPE_CATALOG: ServiceKey[TavernScopeCatalog] = ServiceKey("tavernScopeCatalog", TavernScopeCatalog)


def install_catalogs(ctx: PluginContext, resources: TavernResources) -> TavernScopeCatalog:
    """Provide ``tavernScopeCatalog`` (taken back on unload)."""
    catalog = TavernScopeCatalog(resources)
    ctx.provide(SCOPE_CATALOG, lambda: catalog)
    return catalog
