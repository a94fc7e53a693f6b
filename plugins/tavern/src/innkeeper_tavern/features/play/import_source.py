"""The import context as an Assembler source (`docs/contract/play.md#import-context`; with an
applied strategy it is a Tavern source the strategy places).

Without an applied strategy the import context is the host system-prompt section
``pmp-dsh-tavern:import-context``; with one, that section is silent and a strategy module that
names ``tavern.import-context`` places the same escaped, untrusted block (the claim rules are the
same: the first real assembly of a claimed turn claims it). A preview shows the block a pending or
claimed binding would send without claiming anything.
"""

from __future__ import annotations

from collections.abc import Sequence

from innkeeper_hostapi import PluginContext
from innkeeper_hostapi.assembly import (
    PROMPT_SOURCES,
    SOURCE_PROTOCOL,
    SOURCES_READY,
    Contribution,
    InSystem,
    PromptSourceRegistry,
    SourceRequest,
)
from innkeeper_tavern.features.prompt_sources.state import TAVERN_IMPORT_CONTEXT_SOURCE

from .import_context import ImportContexts

__all__ = ["TAVERN_IMPORT_CONTEXT_SOURCE", "ImportContextSource", "register_import_context_source"]


class ImportContextSource:
    """Implements the Assembler's ``PromptSource`` protocol for the import context."""

    def __init__(self, contexts: ImportContexts) -> None:
        self.contexts = contexts

    @property
    def id(self) -> str:
        return TAVERN_IMPORT_CONTEXT_SOURCE

    async def render(self, request: SourceRequest) -> Sequence[Contribution]:
        if request.session_id is None:
            return []
        if request.turn is None:
            text = await self.contexts.preview(request.session_id)
        else:
            text = await self.contexts.claim_and_render(request.turn)
        if not text:
            return []
        return [Contribution(key="import-context", text=text, placement=InSystem(), kind="context")]


def register_import_context_source(ctx: PluginContext, contexts: ImportContexts) -> None:
    """Register the source now (if an Assembler runs) and into every later Assembler generation."""
    source = ImportContextSource(contexts)

    def register(registry: PromptSourceRegistry) -> None:
        if registry.protocol == SOURCE_PROTOCOL and registry.get(source.id) is None:
            registry.register(ctx, source)

    async def on_ready(registry: PromptSourceRegistry) -> None:
        register(registry)

    ctx.on(SOURCES_READY, on_ready)
    registry = ctx.get_optional(PROMPT_SOURCES)
    if registry is not None:
        register(registry)
