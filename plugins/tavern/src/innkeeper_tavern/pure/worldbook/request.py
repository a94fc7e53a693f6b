"""What one activation is asked: :class:`ActivationRequest` and the engine's bounds."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from innkeeper_tavern.pure.formats.worldbook import WorldBookEntry
from innkeeper_tavern.pure.worldbook.model import (
    ActivationSettings,
    BookInput,
    HostLimits,
    TimedEffectsState,
)
from innkeeper_tavern.pure.worldbook.scan import ActivationContext, ScanInput, ScanLimits

__all__ = [
    "CHARS_PER_TOKEN",
    "MAX_SCAN_DEPTH",
    "MAX_SCAN_LOOPS",
    "REGEX_KEY_TIMEOUT_SECONDS",
    "REGEX_REQUEST_BUDGET_SECONDS",
    "ActivationRequest",
    "CharacterIdentity",
    "estimate_tokens",
]

#: Wall-clock budget of one regex-key test; a pathological pattern is cut off and diagnosed.
#: Host bound (`docs/contract/world-info.md#profile-budget`: no unbounded match work).
REGEX_KEY_TIMEOUT_SECONDS: Final = 0.05
#: Total regex time for one activation; when spent, remaining regex keys are skipped.
REGEX_REQUEST_BUDGET_SECONDS: Final = 0.5
#: Scan loops per activation when ST's ``max_recursion_steps`` is 0 ("unlimited"). Each loop is
#: O(entries); this keeps a 10,000-entry chain from costing 10,000 passes.
MAX_SCAN_LOOPS: Final = 64
#: ST's ``MAX_SCAN_DEPTH`` (docs/worldbook.md#wi-scan-buffer).
MAX_SCAN_DEPTH: Final = 1_000
#: Characters per token of :func:`estimate_tokens` (a conservative English-ish average).
CHARS_PER_TOKEN: Final = 3.5


def estimate_tokens(text: str) -> int:
    """Default token estimator: ``ceil(len / 3.5)``; replace it with a real tokenizer."""
    return math.ceil(len(text) / CHARS_PER_TOKEN) if text else 0


_DEFAULT_SETTINGS: Final = ActivationSettings()
_NO_EFFECTS: Final = TimedEffectsState()
_DEFAULT_HOST_LIMITS: Final = HostLimits()
_DEFAULT_SCAN_LIMITS: Final = ScanLimits()


@dataclass(frozen=True, slots=True)
class CharacterIdentity:
    """The active character for ``characterFilter`` (name = avatar file name without extension)."""

    name: str
    tags: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ActivationRequest:
    """Everything one activation depends on. Books come in composition order.

    ``substitute`` runs macros over keys and content (identity when ``None``); ``count_tokens``
    is the one replaceable token estimator; ``forced`` lore ids are activated as if by an
    extension; ``dry_run`` computes decisions without starting new timed effects.
    ``postprocess`` runs on each activated entry's content before it is placed (ST applies its
    WORLD_INFO regex scripts there, docs/worldbook.md#wi-positions); an empty result drops the
    entry (``empty-content``).

    An entry met after the token budget overflowed, whose content has no macro, is rejected
    without being counted; ``substitute`` and ``count_tokens`` run on its content when its
    explanation is read (its ``tokens`` and ``detail``), possibly after :func:`activate`
    returned: for such text both must give what they would have given during the activation
    (a pure estimator does; a macro session returns macro-free text unchanged).
    """

    books: Sequence[BookInput]
    context: ActivationContext | None = None
    scan: ScanInput | None = None
    settings: ActivationSettings = _DEFAULT_SETTINGS
    seed: int = 0
    timed_state: TimedEffectsState = _NO_EFFECTS
    generation_type: str = "normal"
    character: CharacterIdentity | None = None
    forced: frozenset[str] = frozenset()
    substitute: Callable[[str], str] | None = None
    count_tokens: Callable[[str], int] = estimate_tokens
    host_limits: HostLimits = _DEFAULT_HOST_LIMITS
    scan_limits: ScanLimits = _DEFAULT_SCAN_LIMITS
    dry_run: bool = False
    regex_timeout: float = REGEX_KEY_TIMEOUT_SECONDS
    regex_budget: float = REGEX_REQUEST_BUDGET_SECONDS
    clock: Callable[[], float] = time.perf_counter
    postprocess: Callable[[str, WorldBookEntry], str] | None = None
