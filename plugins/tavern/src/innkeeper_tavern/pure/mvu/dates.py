"""The deterministic subset of MVU's date mode for ``add`` (docs/mvu.md#commands).

MVU adds milliseconds to any string JavaScript's ``Date`` can parse, which depends on V8's
leniency and on the host time zone (``"Day 1"`` is the year 2001). Here only ISO 8601 calendar
dates and date-times with an explicit zone are dates: the result never depends on the host.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Final

_ISO: Final = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})"
    r"(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(Z|[+-]\d{2}:\d{2}))?\Z"
)
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


def parse_iso_ms(text: str) -> float | None:
    """Milliseconds since the epoch for an ISO date/date-time with zone, else ``None``."""
    match = _ISO.match(text)
    if match is None:
        return None
    year, month, day, hour, minute, second, fraction, zone = match.groups()
    try:
        moment = datetime(
            int(year),
            int(month),
            int(day),
            int(hour or 0),
            int(minute or 0),
            int(second or 0),
            tzinfo=UTC,
        )
    except ValueError:
        return None
    ms = (moment - _EPOCH) // timedelta(milliseconds=1)
    if fraction:
        ms += int(fraction[:3].ljust(3, "0"))
    if zone and zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        ms -= sign * (int(zone[1:3]) * 60 + int(zone[4:6])) * 60_000
    return float(ms)


def format_iso_ms(ms: float) -> str | None:
    """``Date.prototype.toISOString`` for years 0–9999, else ``None``."""
    try:
        moment = _EPOCH + timedelta(milliseconds=ms)
    except OverflowError:
        return None
    if not 0 <= moment.year <= 9999:
        return None
    millis = round(ms) % 1000
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + f".{millis:03d}Z"
