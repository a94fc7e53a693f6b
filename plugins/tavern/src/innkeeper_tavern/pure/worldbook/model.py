"""Inputs, settings and results of world-book activation (pure values, msgspec Structs)."""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum, IntEnum
from typing import Final, Literal

import msgspec

from innkeeper_tavern.pure.formats.worldbook import Position, Role, WorldBook

__all__ = [
    "DEFAULT_MAX_PROFILE_BYTES",
    "HARD_MAX_PROFILE_BYTES",
    "MAX_LORE_CANDIDATES",
    "MAX_RUNTIME_ENTRIES",
    "ActivatedEntry",
    "ActivationResult",
    "ActivationSettings",
    "BookInput",
    "BookSource",
    "BudgetReport",
    "CharacterStrategy",
    "DepthGroup",
    "EntryDecision",
    "HostLimits",
    "PositionedText",
    "Positions",
    "Reason",
    "WorldBookRuntimeDiagnostic",
]

#: `docs/contract/world-info.md#profile-budget`: entries per request across all books.
MAX_RUNTIME_ENTRIES: Final = 10_000
#: Same section: at most the top-ranked 4,096 lore candidates are considered.
MAX_LORE_CANDIDATES: Final = 4_096
#: Same section: default cap of the combined profile text (UTF-8 bytes).
DEFAULT_MAX_PROFILE_BYTES: Final = 512 * 1024
#: Same section: implementation hard cap of ``maxProfileBytes``.
HARD_MAX_PROFILE_BYTES: Final = 2 * 1024 * 1024
#: Same section: raw lore bodies are limited to twice the profile budget.
LORE_BYTES_FACTOR: Final = 2


class BookSource(Enum):
    """Where a book was bound; also its composition order
    (`docs/contract/world-info.md#composition-order`)."""

    SESSION = "session"
    USER = "user"
    PRESET = "preset"
    CHARACTER = "character"
    EMBEDDED = "embedded"


class CharacterStrategy(IntEnum):
    """``world_info_character_strategy`` (`docs/worldbook.md#wi-book-order`)."""

    EVENLY = 0
    CHARACTER_FIRST = 1
    GLOBAL_FIRST = 2


class ActivationSettings(msgspec.Struct, frozen=True, kw_only=True):
    """ST's global world-info settings; defaults are ST's fresh-install ``settings.json``.

    docs/worldbook.md#wi-settings.
    """

    scan_depth: int = 2
    min_activations: int = 0
    min_activations_depth_max: int = 0
    budget_percent: float = 25
    budget_cap: int = 0
    include_names: bool = True
    recursive: bool = True
    max_recursion_steps: int = 0
    case_sensitive: bool = False
    match_whole_words: bool = True
    use_group_scoring: bool = False
    character_strategy: CharacterStrategy = CharacterStrategy.CHARACTER_FIRST
    #: Tokens the budget percentage applies to (ST: max context minus response length).
    max_context_tokens: int = 8192


class HostLimits(msgspec.Struct, frozen=True, kw_only=True):
    """Host hard caps (`docs/contract/world-info.md#profile-budget`); books never loosen them."""

    max_runtime_entries: int = MAX_RUNTIME_ENTRIES
    max_lore_candidates: int = MAX_LORE_CANDIDATES
    max_profile_bytes: int = DEFAULT_MAX_PROFILE_BYTES

    def clamped(self) -> HostLimits:
        """The same limits with every value inside its hard cap."""
        return HostLimits(
            max_runtime_entries=max(0, min(self.max_runtime_entries, MAX_RUNTIME_ENTRIES)),
            max_lore_candidates=max(0, min(self.max_lore_candidates, MAX_LORE_CANDIDATES)),
            max_profile_bytes=max(0, min(self.max_profile_bytes, HARD_MAX_PROFILE_BYTES)),
        )

    @property
    def max_lore_bytes(self) -> int:
        """UTF-8 bytes of raw lore bodies allowed in one activation."""
        return LORE_BYTES_FACTOR * self.max_profile_bytes


class BookInput(msgspec.Struct, frozen=True, kw_only=True):
    """One book in composition order. ``revision`` keys the compiled-matcher cache."""

    resource_id: str
    book: WorldBook
    source: BookSource = BookSource.SESSION
    revision: str | int | None = None
    #: The display name (a library book's name; the book's own ``name`` is often absent).
    name: str | None = None


class Reason(Enum):
    """Why an entry was activated or rejected (what ``/active`` and the audit show)."""

    # activated
    CONSTANT = "constant"
    KEY_MATCH = "key-match"
    STICKY = "sticky"
    DECORATOR_ACTIVATE = "decorator-activate"
    FORCED = "forced"
    # rejected before matching
    DISABLED = "disabled"
    TRIGGER = "trigger-mismatch"
    CHARACTER_FILTER = "character-filter"
    DELAY = "delay"
    COOLDOWN = "cooldown"
    DELAY_UNTIL_RECURSION = "delay-until-recursion"
    EXCLUDE_RECURSION = "exclude-recursion"
    DECORATOR_DONT_ACTIVATE = "decorator-dont-activate"
    NO_KEYS = "no-keys"
    NO_KEY_MATCH = "no-key-match"
    SECONDARY_LOGIC = "secondary-logic"
    # rejected by selection
    GROUP_LOST = "group-lost"
    GROUP_SCORE = "group-score"
    GROUP_ALREADY_ACTIVATED = "group-already-activated"
    GROUP_TIMED = "group-timed-effect"
    PROBABILITY = "probability"
    BUDGET = "budget"
    BOOK_BUDGET = "book-budget"
    EMPTY_CONTENT = "empty-content"
    OUTLET_UNNAMED = "outlet-unnamed"
    # host caps
    HOST_ENTRY_CAP = "host-entry-cap"
    HOST_CANDIDATE_CAP = "host-candidate-cap"
    HOST_BYTES_CAP = "host-bytes-cap"


class EntryDecision(msgspec.Struct, frozen=True, kw_only=True):
    """The explanation of one entry's fate in one activation."""

    lore_id: str
    resource_id: str
    uid: int | str
    comment: str
    activated: bool
    reason: Reason
    detail: str = ""
    matched_primary: tuple[str, ...] = ()
    matched_secondary: tuple[str, ...] = ()
    group: str = ""
    #: Lore id of the entry that won the group this entry lost.
    group_winner: str | None = None
    #: The probability roll in [0, 100) when one was drawn.
    roll: float | None = None
    probability: float | None = None
    tokens: int | None = None
    requested_position: Position = Position.BEFORE_CHAR
    applied_position: Position | None = None
    #: Scan loop (1 = initial) in which the decision was made; 0 before any loop.
    loop: int = 0


class ActivatedEntry(msgspec.Struct, frozen=True, kw_only=True):
    """An activated entry with its macro-substituted content, in rank order."""

    lore_id: str
    resource_id: str
    uid: int | str
    comment: str
    content: str
    position: Position
    order: int
    depth: int
    role: Role
    outlet_name: str
    tokens: int
    loop: int


class PositionedText(msgspec.Struct, frozen=True, kw_only=True):
    """One entry inside a position bucket (ascending ``order``)."""

    lore_id: str
    content: str


class DepthGroup(msgspec.Struct, frozen=True, kw_only=True):
    """@depth entries of one (depth, role), ST's ``customDepthWI-<depth>-<role>``."""

    depth: int
    role: Role
    entries: tuple[PositionedText, ...]

    @property
    def text(self) -> str:
        """The entries joined with newlines, as ST registers the extension prompt."""
        return "\n".join(e.content for e in self.entries)


class Positions(msgspec.Struct, frozen=True, kw_only=True):
    """Activated lore grouped by position, in a fixed order (`docs/worldbook.md#wi-positions`)."""

    before: tuple[PositionedText, ...] = ()
    after: tuple[PositionedText, ...] = ()
    an_top: tuple[PositionedText, ...] = ()
    an_bottom: tuple[PositionedText, ...] = ()
    em_top: tuple[PositionedText, ...] = ()
    em_bottom: tuple[PositionedText, ...] = ()
    at_depth: tuple[DepthGroup, ...] = ()
    outlets: dict[str, tuple[PositionedText, ...]] = msgspec.field(default_factory=dict)

    @property
    def before_text(self) -> str:
        """``worldInfoBefore``."""
        return "\n".join(e.content for e in self.before)

    @property
    def after_text(self) -> str:
        """``worldInfoAfter``."""
        return "\n".join(e.content for e in self.after)

    def outlet_text(self, name: str) -> str:
        """What ``{{outlet::name}}`` expands to (case-sensitive name; "" when nothing fired)."""
        return "\n".join(e.content for e in self.outlets.get(name, ()))


class BudgetReport(msgspec.Struct, frozen=True, kw_only=True):
    """The ST token budget of this activation."""

    limit: int
    used: int
    overflowed: bool


class WorldBookRuntimeDiagnostic(msgspec.Struct, frozen=True, kw_only=True):
    """A problem found while activating (bad regex key, skipped book, truncated input...)."""

    code: str
    message: str
    resource_id: str = ""
    uid: int | str | None = None
    severity: Literal["info", "warning"] = "warning"


class ScanSummary(msgspec.Struct, frozen=True, kw_only=True):
    """Counts of the bounded scan input (metadata only, never message bodies)."""

    scanned_messages: int = 0
    total_messages: int = 0
    scanned_chars: int = 0
    truncated: bool = False
    chat_length: int = 0


class ActivationResult(msgspec.Struct, frozen=True, kw_only=True):
    """Everything one activation decided; ``timed_state`` is what the caller persists."""

    activated: tuple[ActivatedEntry, ...]
    positions: Positions
    #: one per entry of every book, book then entry order (a lazy
    #: :class:`~innkeeper_tavern.pure.worldbook.decisions.DecisionList` when made by ``activate``)
    decisions: Sequence[EntryDecision]
    budget: BudgetReport
    diagnostics: tuple[WorldBookRuntimeDiagnostic, ...]
    timed_state: TimedEffectsState
    loops: int
    seed: int
    scan: ScanSummary = ScanSummary()

    def materialized(self) -> ActivationResult:
        """A copy whose ``decisions`` is a plain tuple (what ``msgspec`` can encode)."""
        return msgspec.structs.replace(self, decisions=tuple(self.decisions))


class TimedEffect(msgspec.Struct, frozen=True, kw_only=True):
    """One sticky or cooldown effect, ST's ``{hash, start, end, protected}``.

    docs/worldbook.md#wi-timed-effects.
    """

    hash: str
    start: int
    end: int
    protected: bool = False


class TimedEffectsState(msgspec.Struct, frozen=True, kw_only=True):
    """Per-chat timed effects keyed by lore id; persisted by the caller between requests."""

    sticky: dict[str, TimedEffect] = msgspec.field(default_factory=dict)
    cooldown: dict[str, TimedEffect] = msgspec.field(default_factory=dict)


__all__ += ["ScanSummary", "TimedEffect", "TimedEffectsState"]
