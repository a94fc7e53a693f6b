"""The shared source registry: ``dshPromptSources`` protocol 1, alias ``tavernRequestSources``.

One object is provided under both keys: ``tavernRequestSources`` is another name for the same
registry (`docs/contract/loader.md#ownership`). A registration belongs to the plugin whose
``ctx`` registered it and is disposed when that plugin unloads; disposing removes exactly that
source (by identity), never a newer registration of the same id.
"""

from __future__ import annotations

from dataclasses import dataclass

from innkeeper_hostapi import PluginContext, Registration, RegistrationConflict
from innkeeper_hostapi.assembly import SOURCE_PROTOCOL, PromptSource, SourceInfo

__all__ = ["SourceRegistry"]

#: Source ids are namespaced and bounded (`Module.source` has the same bound).
MAX_SOURCE_ID_CHARS = 128


@dataclass(frozen=True, slots=True)
class _Entry:
    source: PromptSource
    owner: str


class SourceRegistry:
    """Implements :class:`~innkeeper_hostapi.assembly.PromptSourceRegistry`."""

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}

    @property
    def protocol(self) -> int:
        """The source protocol spoken here."""
        return SOURCE_PROTOCOL

    def register(self, ctx: PluginContext, source: PromptSource) -> Registration:
        """Register ``source`` for ``ctx``'s plugin (disposed with it)."""
        source_id = source.id
        if not 0 < len(source_id) <= MAX_SOURCE_ID_CHARS:
            raise ValueError(f"a source id is 1-{MAX_SOURCE_ID_CHARS} characters")
        existing = self._entries.get(source_id)
        if existing is not None:
            raise RegistrationConflict("prompt source", source_id, existing.owner, ctx.plugin_id)
        entry = _Entry(source, ctx.plugin_id)
        self._entries[source_id] = entry

        def remove() -> None:
            if self._entries.get(source_id) is entry:
                del self._entries[source_id]

        return ctx.on_dispose(remove)

    def get(self, source_id: str) -> PromptSource | None:
        """The source registered as ``source_id``."""
        entry = self._entries.get(source_id)
        return entry.source if entry is not None else None

    def sources(self) -> tuple[SourceInfo, ...]:
        """Every registered source, by id."""
        return tuple(
            SourceInfo(id=key, owner=entry.owner) for key, entry in sorted(self._entries.items())
        )

    def clear(self) -> None:
        """Forget every source (the Assembler unloads)."""
        self._entries.clear()
