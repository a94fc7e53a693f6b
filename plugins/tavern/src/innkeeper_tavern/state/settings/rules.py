"""Shared field rules of the settings documents: scales on a 0.05 grid, exact key sets."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, Final

from .store import SettingsInvalid

__all__ = ["SCALE_MAX", "SCALE_MIN", "SCALE_STEP", "check_keys", "check_scale", "require_object"]

#: `docs/contract/resources.md#conversation-settings` and `docs/resources.md#original-data`
#: (``ui-settings.json``): scales are finite numbers from 0.75 to 1.5 in steps of 0.05.
SCALE_MIN: Final = 0.75
SCALE_MAX: Final = 1.5
SCALE_STEP: Final = 0.05
#: Steps per unit (1 / SCALE_STEP), so the grid check is done on integers.
_STEPS_PER_UNIT: Final = 20
#: Tolerance for binary floating point (0.85 is not exactly representable).
_GRID_EPSILON: Final = 1e-9


def require_object(value: Any, code: str, what: str) -> dict[str, Any]:
    """``value`` as a JSON object, else :class:`SettingsInvalid`."""
    if not isinstance(value, dict):
        raise SettingsInvalid(code, f"{what} must be a JSON object")
    return value


def check_keys(
    value: dict[str, Any], code: str, what: str, *, required: Iterable[str], optional: Iterable[str]
) -> None:
    """Refuse unknown and missing fields (full replace: nothing is merged)."""
    required = set(required)
    allowed = required | set(optional)
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise SettingsInvalid(code, f"{what} has unknown field(s): {', '.join(unknown)}")
    missing = sorted(required - set(value))
    if missing:
        raise SettingsInvalid(code, f"{what} is missing field(s): {', '.join(missing)}")


def check_scale(value: Any, code: str, field: str) -> float:
    """A scale on the 0.75–1.5 grid of 0.05, normalized to the nearest grid value."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise SettingsInvalid(code, f"{field} must be a finite number")
    if not SCALE_MIN - _GRID_EPSILON <= value <= SCALE_MAX + _GRID_EPSILON:
        raise SettingsInvalid(code, f"{field} must be between {SCALE_MIN} and {SCALE_MAX}")
    steps = value * _STEPS_PER_UNIT
    if abs(steps - round(steps)) > _GRID_EPSILON * _STEPS_PER_UNIT:
        raise SettingsInvalid(code, f"{field} must be a multiple of {SCALE_STEP}")
    return round(steps) / _STEPS_PER_UNIT
