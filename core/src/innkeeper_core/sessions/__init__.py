"""Durable sessions: the SQLite event store, the controllers and derived messages."""

from __future__ import annotations

from .controller import StoreSessionController, StoreWorkspaceController
from .inbox import InboxProjection, InvalidSplice
from .messages import (
    chat_message,
    derive_messages,
    failed_turn,
    has_open_turn,
    stopped_request,
)
from .store import (
    STORE_FILE_NAME,
    EventStore,
    StoreClosed,
    event_store_resource,
    iso_ms,
    system_clock,
    uuid_ids,
)

__all__ = [
    "STORE_FILE_NAME",
    "EventStore",
    "InboxProjection",
    "InvalidSplice",
    "StoreClosed",
    "StoreSessionController",
    "StoreWorkspaceController",
    "chat_message",
    "derive_messages",
    "event_store_resource",
    "failed_turn",
    "has_open_turn",
    "iso_ms",
    "stopped_request",
    "system_clock",
    "uuid_ids",
]
