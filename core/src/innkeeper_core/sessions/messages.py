"""Messages derived from a session log: the pure projection lives in ``innkeeper_hostapi`` so
plugins that page history themselves derive exactly what the host derives."""

from __future__ import annotations

from innkeeper_hostapi.messages import (
    complete_message,
    derive_message,
    derive_messages,
    failed_turn,
    has_open_turn,
    stopped_request,
)

__all__ = [
    "complete_message",
    "derive_message",
    "derive_messages",
    "failed_turn",
    "has_open_turn",
    "stopped_request",
]
