"""The ``tavern.mvu/state`` request source (`spec/MVU.md`; issue: "explicitly selected, role
system, lifetime request").

A strategy that names this source in one of its modules gets the session's MVU variables
(``stat_data``, ``$``-keys removed) as block YAML, placed as system text for that request only.
Nothing is sent unless a strategy selects it. The read goes through ``resolvePromptDependency``
(a send reads its turn's pre-turn checkpoint, a branch its own state) and the lease is rechecked
before the text is handed over; a denied or missing state raises, which leaves the source out of
the request with a diagnostic — never a raw read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from innkeeper_hostapi import PluginContext, Registration
from innkeeper_hostapi.assembly import Contribution, InSystem, PromptSourceRegistry, SourceRequest
from innkeeper_hostapi.mvu import TAVERN_MVU

from .loader.mvu_macro import MvuDependencyUnavailable, strip_dollar_keys, to_yaml

__all__ = ["TAVERN_MVU_STATE_SOURCE", "MvuStateSource", "register_mvu_state_source"]

TAVERN_MVU_STATE_SOURCE: Final = "tavern.mvu/state"
#: The variables shown; a module may pick another top-level key with ``options.path``.
DEFAULT_PATH: Final = "stat_data"


class MvuStateSource:
    """Implements the Assembler's ``PromptSource`` protocol for MVU state."""

    def __init__(self, ctx: PluginContext) -> None:
        self.ctx = ctx

    @property
    def id(self) -> str:
        """``tavern.mvu/state``."""
        return TAVERN_MVU_STATE_SOURCE

    async def render(self, request: SourceRequest) -> Sequence[Contribution]:
        if not request.session_id:
            return []
        service = self.ctx.get_optional(TAVERN_MVU)
        if service is None:
            raise MvuDependencyUnavailable("the tavernMvu service is not available")
        event: dict[str, Any] = {"usage": "request-source", "consumer": TAVERN_MVU_STATE_SOURCE}
        if request.turn is not None:
            event["turn"] = request.turn.turn
        result = await service.resolve_prompt_dependency(
            scope={"sessionId": request.session_id}, event=event
        )
        if result is None:
            raise MvuDependencyUnavailable("the session's MVU state is denied or unavailable")
        content = result.get("content")
        path = str(request.options.get("path", DEFAULT_PATH))
        value = content.get(path) if isinstance(content, Mapping) else None
        if value is None:
            return []
        text = to_yaml(strip_dollar_keys(value))
        if not result["checkCurrent"]():
            raise MvuDependencyUnavailable("the MVU state changed while assembling")
        return [
            Contribution(
                key=f"mvu:{path}",
                text=text,
                placement=InSystem(),
                kind="tavern-mvu-state",
                provenance=(f"mvu:{result.get('id')}",),
            )
        ]


def register_mvu_state_source(ctx: PluginContext, registry: PromptSourceRegistry) -> Registration:
    """Register ``tavern.mvu/state`` for Tavern's ``ctx`` (disposed when Tavern unloads)."""
    return registry.register(ctx, MvuStateSource(ctx))
