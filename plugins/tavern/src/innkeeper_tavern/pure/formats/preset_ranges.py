"""The ranges a preset edit may set a sampler to (`docs/resources.md#preset-editing`).

They are SillyTavern's Chat Completion slider ranges, so a value set here is one SillyTavern's
own panel can show. Only *edits* are checked: an imported preset keeps what it was written with
(import stays lenient, the export byte-compatible), and the admission decides what is sent.
"""

from __future__ import annotations

from typing import Final

#: Sampler (wire name) → inclusive ``(minimum, maximum)``; ``None`` is an open end.
SAMPLER_RANGES: Final[dict[str, tuple[float | None, float | None]]] = {
    "temperature": (0.0, 2.0),
    "topP": (0.0, 1.0),
    # 0 is SillyTavern's "off" (not sent); its slider ends at 500.
    "topK": (0.0, 500.0),
    "topA": (0.0, 1.0),
    "minP": (0.0, 1.0),
    "frequencyPenalty": (-2.0, 2.0),
    "presencePenalty": (-2.0, 2.0),
    # 1 is "off"; below 1 would reward repetition, which SillyTavern's slider does not offer.
    "repetitionPenalty": (1.0, 2.0),
    "maxTokens": (1, None),
    "maxContext": (1, None),
    # -1 is SillyTavern's "random" (not sent).
    "seed": (-1, None),
}

#: Deepest in-chat position a prompt may have (as the card's depth prompt).
MAX_INJECTION_DEPTH: Final = 9999


def range_problem(wire: str, value: float) -> str | None:
    """Why ``value`` is outside ``wire``'s range, or ``None`` when it fits (or has no range)."""
    low, high = SAMPLER_RANGES.get(wire, (None, None))
    if low is not None and value < low:
        return f"{wire} must be at least {_show(low)}"
    if high is not None and value > high:
        return f"{wire} must be at most {_show(high)}"
    return None


def _show(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else str(bound)
