"""World-book activation engine (pure layer: no I/O, no host import).

The profile loader builds an :class:`ActivationRequest` (books in composition order, the bounded
activation context, ST settings, a seed and the persisted timed-effect state) and calls
:func:`activate` with a long-lived :class:`MatcherCache`. The :class:`ActivationResult` carries
the activated entries in rank order, the position buckets, one :class:`EntryDecision` per entry,
diagnostics and the new timed-effect state to persist.
"""

from innkeeper_tavern.pure.worldbook.audit import audit_books, decision_record
from innkeeper_tavern.pure.worldbook.cache import MatcherCache
from innkeeper_tavern.pure.worldbook.compiler import compile_book
from innkeeper_tavern.pure.worldbook.decisions import DecisionList
from innkeeper_tavern.pure.worldbook.engine import (
    ActivationRequest,
    CharacterIdentity,
    activate,
    estimate_tokens,
)
from innkeeper_tavern.pure.worldbook.model import (
    ActivatedEntry,
    ActivationResult,
    ActivationSettings,
    BookInput,
    BookSource,
    BudgetReport,
    CharacterStrategy,
    DepthGroup,
    EntryDecision,
    HostLimits,
    PositionedText,
    Positions,
    Reason,
    ScanSummary,
    TimedEffect,
    TimedEffectsState,
    WorldBookRuntimeDiagnostic,
)
from innkeeper_tavern.pure.worldbook.scan import (
    ActivationContext,
    ActivationMessage,
    ActivationSources,
    ScanInput,
    ScanLimits,
    build_scan_input,
)

__all__ = [
    "ActivatedEntry",
    "ActivationContext",
    "ActivationMessage",
    "ActivationRequest",
    "ActivationResult",
    "ActivationSettings",
    "ActivationSources",
    "BookInput",
    "BookSource",
    "BudgetReport",
    "CharacterIdentity",
    "CharacterStrategy",
    "DecisionList",
    "DepthGroup",
    "EntryDecision",
    "HostLimits",
    "MatcherCache",
    "PositionedText",
    "Positions",
    "Reason",
    "ScanInput",
    "ScanLimits",
    "ScanSummary",
    "TimedEffect",
    "TimedEffectsState",
    "WorldBookRuntimeDiagnostic",
    "activate",
    "audit_books",
    "build_scan_input",
    "compile_book",
    "decision_record",
    "estimate_tokens",
]
