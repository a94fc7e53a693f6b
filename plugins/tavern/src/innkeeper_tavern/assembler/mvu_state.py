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

from collections.abc import Callable, Sequence
from typing import Final

from innkeeper_hostapi import PluginContext, Registration
from innkeeper_hostapi.assembly import Contribution, InSystem, PromptSourceRegistry, SourceRequest
from innkeeper_tavern.loader.mvu_macro import (
    MvuDependencyUnavailable,
    read_prompt_variables,
    strip_dollar_keys,
    to_yaml,
)

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
        leases: list[Callable[[], bool]] = []
        content = await read_prompt_variables(
            self.ctx,
            request.session_id,
            request.turn.turn if request.turn else None,
            "request-source",
            TAVERN_MVU_STATE_SOURCE,
            leases,
        )
        if content is None:
            if not request.session_id:
                return []
            raise MvuDependencyUnavailable("the session's MVU state is denied or unavailable")
        path = str(request.options.get("path", DEFAULT_PATH))
        value = content.get(path)
        if value is None:
            return []
        text = to_yaml(strip_dollar_keys(value))
        if not all(check() for check in leases):
            raise MvuDependencyUnavailable("the MVU state changed while assembling")
        return [
            Contribution(
                key=f"mvu:{path}",
                text=text,
                placement=InSystem(),
                kind="tavern-mvu-state",
                provenance=(f"mvu:{path}",),
            )
        ]


def register_mvu_state_source(ctx: PluginContext, registry: PromptSourceRegistry) -> Registration:
    """Register ``tavern.mvu/state`` for Tavern's ``ctx`` (disposed when Tavern unloads)."""
    return registry.register(ctx, MvuStateSource(ctx))
