"""``rp-state.json``: RP pending intents and unconsumed alerts, kept across restarts.

A change asked for during an open turn (a *pending intent*) and a risk alert nobody consumed yet
are user-visible promises: a restart must not drop them. Both live in one small file in the
plugin data directory::

    {"schemaVersion": 1,
     "pending": {"<session id>": true | false},
     "alerts": {"<session id>": {"id", "sessionId", "originSessionId", "turn", "tool",
                                 "reason", "createdAt"}}}

Every change builds a new state, encodes it, checks the bounds, writes it atomically (temp file,
fsync, rename) and only then publishes it, so a failed write changes neither memory nor disk.
A file that cannot be read at start is moved aside to ``rp-state.json.corrupt`` (logged) and the
state starts empty. Bounds: :data:`MAX_ENTRIES` sessions per map (a full pending map refuses a
new intent; a full alert map drops its oldest alert, logged) and :data:`MAX_FILE_BYTES`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path
from typing import Final

import msgspec

from innkeeper_tavern.state.resources.atomic import atomic_write
from innkeeper_tavern.state.session_bindings.files import (
    FileTooLarge,
    read_limited,
    remove_stale_temps,
)
from innkeeper_tavern.state.session_bindings.model import valid_session_id
from innkeeper_tavern.state.session_bindings.store import HARD_MAX_SESSIONS

__all__ = [
    "MAX_ENTRIES",
    "MAX_FILE_BYTES",
    "RP_STATE_FILE",
    "RP_STATE_LIMIT_REACHED",
    "RP_STATE_WRITE_FAILED",
    "RpAlert",
    "RpDurableState",
    "RpStateFull",
    "RpStateWriteFailed",
]

RP_STATE_FILE: Final = "rp-state.json"
SCHEMA_VERSION: Final = 1
#: One entry per session at most, as many sessions as the selection store can hold.
MAX_ENTRIES: Final = HARD_MAX_SESSIONS
#: 4,096 alerts of bounded fields stay far below this.
MAX_FILE_BYTES: Final = 4 << 20
RP_STATE_LIMIT_REACHED: Final = "RP_STATE_LIMIT_REACHED"
RP_STATE_WRITE_FAILED: Final = "RP_STATE_WRITE_FAILED"
#: Longest ``tool`` / ``reason`` kept in an alert (the guard's reasons are short).
MAX_ALERT_TEXT: Final = 1000


class RpAlert(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """One unconsumed risk alert (the wire shape of ``GET /rp-alert``)."""

    id: str
    #: The session the alert is kept on (the topmost RP session of the lineage).
    session_id: str
    #: The session whose call was blocked (the same, or a fork/sub-agent below it).
    origin_session_id: str
    turn: int
    tool: str
    reason: str
    #: Milliseconds since the epoch.
    created_at: int


class _File(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    schema_version: int
    pending: dict[str, bool] = msgspec.field(default_factory=dict)
    alerts: dict[str, RpAlert] = msgspec.field(default_factory=dict)


_encoder: Final = msgspec.json.Encoder()
_decoder: Final = msgspec.json.Decoder(_File)


class RpStateFull(Exception):
    """The pending map is full (``RP_STATE_LIMIT_REACHED``); nothing changed."""


class RpStateWriteFailed(Exception):
    """``rp-state.json`` could not be written (``RP_STATE_WRITE_FAILED``); nothing changed."""


class RpDurableState:
    """The pending intents and alerts of every session, mirrored in ``rp-state.json``."""

    def __init__(self, root: Path, *, logger: logging.Logger) -> None:
        self.path = root / RP_STATE_FILE
        self._log = logger
        self._lock = asyncio.Lock()
        self._pending: dict[str, bool] = {}
        self._alerts: dict[str, RpAlert] = {}

    async def open(self) -> None:
        """Load the file (off the event loop)."""
        self._pending, self._alerts = await asyncio.to_thread(self._load)

    def _load(self) -> tuple[dict[str, bool], dict[str, RpAlert]]:
        remove_stale_temps(self.path)
        try:
            data = read_limited(self.path, MAX_FILE_BYTES)
            if data is None:
                return {}, {}
            doc = _decoder.decode(data)
            if doc.schema_version != SCHEMA_VERSION:
                raise ValueError(f"schemaVersion {doc.schema_version}")
        except (FileTooLarge, msgspec.DecodeError, msgspec.ValidationError, ValueError) as exc:
            aside = self.path.with_name(self.path.name + ".corrupt")
            self._log.error("%s unreadable (%s); moved to %s", self.path.name, exc, aside.name)
            with contextlib.suppress(OSError):
                self.path.replace(aside)
            return {}, {}
        pending = {k: v for k, v in doc.pending.items() if valid_session_id(k)}
        alerts = {k: v for k, v in doc.alerts.items() if valid_session_id(k) and v.session_id == k}
        return dict(list(pending.items())[:MAX_ENTRIES]), dict(list(alerts.items())[:MAX_ENTRIES])

    # ------------------------------------------------------------------ reads

    def pending(self, session_id: str) -> bool | None:
        """The session's queued change (``True`` on, ``False`` off), if any."""
        return self._pending.get(session_id)

    def has_pending(self, session_id: str) -> bool:
        return session_id in self._pending

    def alert(self, session_id: str) -> RpAlert | None:
        """The session's unconsumed alert."""
        return self._alerts.get(session_id)

    # ----------------------------------------------------------------- writes

    async def _publish(self, pending: dict[str, bool], alerts: dict[str, RpAlert]) -> None:
        """Write the new state, then serve it (caller holds the lock)."""
        doc = _File(schema_version=SCHEMA_VERSION, pending=pending, alerts=alerts)
        data = msgspec.json.format(_encoder.encode(doc), indent=2) + b"\n"
        if len(data) > MAX_FILE_BYTES:
            raise RpStateFull(f"{RP_STATE_FILE} would be over {MAX_FILE_BYTES} bytes")
        _decoder.decode(data)  # the copy that is published decodes back
        try:
            await asyncio.to_thread(atomic_write, self.path, data)
        except OSError as exc:
            self._log.error("writing %s failed: %s", self.path.name, exc)
            raise RpStateWriteFailed(f"could not write {RP_STATE_FILE}; nothing changed") from None
        self._pending, self._alerts = pending, alerts

    async def set_pending(self, session_id: str, active: bool | None) -> None:
        """Queue ``active`` for the session (``None`` drops its queued change)."""
        async with self._lock:
            if self._pending.get(session_id) == active:
                return
            pending = dict(self._pending)
            if active is None:
                pending.pop(session_id, None)
            else:
                if session_id not in pending and len(pending) >= MAX_ENTRIES:
                    raise RpStateFull(f"{MAX_ENTRIES} sessions already have a queued RP change")
                pending[session_id] = active
            await self._publish(pending, self._alerts)

    async def add_alert(self, alert: RpAlert) -> bool:
        """Keep ``alert`` unless its session has one already (``False`` then)."""
        async with self._lock:
            if alert.session_id in self._alerts:
                return False
            alerts = dict(self._alerts)
            if len(alerts) >= MAX_ENTRIES:
                oldest = min(alerts.values(), key=lambda a: a.created_at)
                del alerts[oldest.session_id]
                self._log.warning(
                    "RP alerts full: dropped the oldest (session %s)", oldest.session_id
                )
            alerts[alert.session_id] = msgspec.structs.replace(
                alert, tool=alert.tool[:MAX_ALERT_TEXT], reason=alert.reason[:MAX_ALERT_TEXT]
            )
            await self._publish(self._pending, alerts)
            return True

    async def consume(self, session_id: str, alert_id: str | None) -> bool:
        """Consume the alert (only the one named, when ``alert_id`` is given)."""
        async with self._lock:
            current = self._alerts.get(session_id)
            if current is None or (alert_id is not None and current.id != alert_id):
                return False
            await self._publish(
                self._pending, {k: v for k, v in self._alerts.items() if k != session_id}
            )
            return True
