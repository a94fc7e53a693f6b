"""Whether a session is served by an applied Assembler strategy (no Tavern imports, so the
loader can ask without an import cycle)."""

from __future__ import annotations

from innkeeper_hostapi import PluginContext
from innkeeper_hostapi.assembly import PROMPT_ASSEMBLER

__all__ = ["TAVERN_IMPORT_CONTEXT_SOURCE", "strategy_applied"]

#: The play workspace's import-context source (``innkeeper_tavern.features.play.import_source``);
#: named here so the default strategy can list it without importing the play package.
TAVERN_IMPORT_CONTEXT_SOURCE = "tavern.import-context"


def strategy_applied(ctx: PluginContext, session_id: str | None) -> bool:
    """Whether the session has an applied Assembler strategy (the loader then leaves its
    compatibility profile out: the Assembler places Tavern's sources instead)."""
    if not session_id:
        return False
    assembler = ctx.get_optional(PROMPT_ASSEMBLER)
    return assembler is not None and assembler.applied(session_id) is not None
