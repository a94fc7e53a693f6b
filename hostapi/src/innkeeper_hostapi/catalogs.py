"""The Tavern plugin's directory services as other plugins see them: keys and protocols.

- ``tavernScopeCatalog`` (`docs/contract/catalogs.md#scope-catalog`, protocol 1): page the
  current character / preset / user identities (``{id, name}`` only) with source-signed cursors,
  and resolve a session's scope with a synchronous ``checkCurrent`` lease.
- ``tavernMemorySources`` (`docs/contract/catalogs.md#bound-resources`): global
  ``list``/``read`` for management and ``listBound`` for a session's bound resources.

Both are optional: resolve them at call time with ``ctx.get_optional(KEY)``; a missing service
is "unavailable", never a reason to fall back to a full resource listing. Errors are
:class:`~innkeeper_hostapi.errors.HttpProblem` with the stable codes the Tavern docs list
(``docs/catalogs.md``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final, Protocol

from .keys import ServiceKey

#: `docs/contract/catalogs.md#scope-catalog`: ``protocolVersion:1``.
SCOPE_CATALOG_PROTOCOL: Final = 1
#: Protocol version of ``tavernMemorySources``.
MEMORY_SOURCES_PROTOCOL: Final = 1

#: ``checkCurrent``: a synchronous, Host-only lease (``True`` while what it was read from holds).
CheckCurrent = Callable[[], bool]


def frozen_json(value: Any) -> Any:
    """A deeply immutable copy of JSON-like data (mappings → read-only views, lists → tuples),
    the form ``listBound`` results take."""
    if isinstance(value, Mapping):
        return MappingProxyType({str(k): frozen_json(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(frozen_json(v) for v in value)
    return value


class ScopeCatalogService(Protocol):
    """``tavernScopeCatalog``: current resource identities, no bodies, avatars or paths."""

    @property
    def protocol_version(self) -> int:
        """Always :data:`SCOPE_CATALOG_PROTOCOL`."""
        ...

    @property
    def authority(self) -> str:
        """Always ``"local"``."""
        ...

    async def search_scopes(
        self,
        *,
        field: str,
        query: str | None = None,
        cursor: str | None = None,
        limit: int | None = None,
        scope: Mapping[str, Any] | None = None,
    ) -> Mapping[str, Any]:
        """``{items:[{id,name}], nextCursor}`` of ``field`` (``characterId`` / ``presetId`` /
        ``userId``) in stable id order; ``query`` ≤ 200 characters is a substring of id or name,
        ``limit`` 1–50 (default 50). A cursor is valid only for the same field, query, session
        boundary, catalog generation and visibility revision."""
        ...

    async def resolve_scope_context(self, *, session_id: str) -> Mapping[str, Any]:
        """``{scope:{sessionId,characterId,presetId,userId}, revision, checkCurrent}``."""
        ...


class MemorySourcesService(Protocol):
    """``tavernMemorySources``: persistent memory resources (world books, templates, MVU)."""

    @property
    def protocol_version(self) -> int:
        """Always :data:`MEMORY_SOURCES_PROTOCOL`."""
        ...

    def adapters(self) -> Sequence[str]:
        """The adapter ids (``world-book``, ``template``, ``mvu``) this host offers now."""
        ...

    async def list(self, *, adapter_id: str) -> Sequence[Mapping[str, Any]]:
        """Every global resource of one adapter (management; metadata only)."""
        ...

    async def read(
        self, *, adapter_id: str, id: str, scope: Mapping[str, Any] | None = None
    ) -> Mapping[str, Any]:
        """One resource with its content: a global one (management), or with
        ``scope={sessionId, authority:'local'}`` also one bound only in that session."""
        ...

    async def list_bound(
        self, *, scope: Mapping[str, Any], adapter_id: str | None = None
    ) -> Mapping[str, Any]:
        """``{items, revision, checkCurrent}`` (deeply immutable) of the resources bound to
        ``scope={sessionId, authority:'local'}``: no content, no other card's resources;
        ``adapter_id`` narrows the items to one adapter's (the same shape and lease)."""
        ...


#: The key consumers resolve optionally (`docs/contract/catalogs.md#optional-services`).
TAVERN_SCOPE_CATALOG: ServiceKey[ScopeCatalogService] = ServiceKey(
    "tavernScopeCatalog", ScopeCatalogService
)
#: ``tavernMemorySources`` (`docs/contract/catalogs.md#bound-resources`).
TAVERN_MEMORY_SOURCES: ServiceKey[MemorySourcesService] = ServiceKey(
    "tavernMemorySources", MemorySourcesService
)

__all__ = [
    "MEMORY_SOURCES_PROTOCOL",
    "SCOPE_CATALOG_PROTOCOL",
    "TAVERN_MEMORY_SOURCES",
    "TAVERN_SCOPE_CATALOG",
    "CheckCurrent",
    "MemorySourcesService",
    "ScopeCatalogService",
    "frozen_json",
]
