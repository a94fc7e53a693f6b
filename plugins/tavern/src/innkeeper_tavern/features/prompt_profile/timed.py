"""Per-session timed-effect state (sticky / cooldown) of world-book activation, on disk.

`docs/worldbook.md#wi-timed-effects`: timed effects live with the chat and are clocked by its
length. The state is advanced only when the chat advances: for each session the file keeps the
clock of the last real assembly with the state that went *into* it and the state that came
*out*. An assembly at a later clock starts from ``after``; one at the same clock (a retried or
repeated request at the same point of the chat) recomputes from ``before`` instead of advancing
twice; an earlier clock (history rolled back) starts from nothing. ``/active`` previews never
write. A fork with no state of its own starts from its parent's entry by the same rule, so a
swipe (a fork just before the reply) recomputes the parent's last assembly instead of advancing
it.

The file, ``loader-timed-effects.json``, is written atomically (temp file, fsync, rename); it is
bounded (:data:`~.limits.TIMED_STATE_MAX_SESSIONS` sessions,
:data:`~.limits.TIMED_STATE_MAX_BYTES` bytes): the least recently advanced sessions are dropped
first, which only ends their running sticky/cooldown effects early.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Final

import msgspec

from innkeeper_tavern.pure.worldbook import TimedEffectsState
from innkeeper_tavern.state.resources.atomic import atomic_write, read_bounded
from innkeeper_tavern.state.resources.errors import ResourceError

from .limits import TIMED_STATE_MAX_BYTES, TIMED_STATE_MAX_SESSIONS

__all__ = ["TIMED_STATE_FILE", "TimedEffectsStore"]

TIMED_STATE_FILE: Final = "loader-timed-effects.json"
_SCHEMA: Final = 1


class _Entry(msgspec.Struct, kw_only=True, rename="camel"):
    clock: int
    before: TimedEffectsState
    after: TimedEffectsState
    updated_at: float = 0.0


class _File(msgspec.Struct, kw_only=True, rename="camel"):
    schema_version: int = _SCHEMA
    sessions: dict[str, _Entry] = msgspec.field(default_factory=dict)


_decoder: Final = msgspec.json.Decoder(_File)
_EMPTY: Final = TimedEffectsState()


def _idle(entry: _Entry) -> bool:
    return entry.before == entry.after == _EMPTY


class TimedEffectsStore:
    """Timed-effect state per session (see the module docstring)."""

    def __init__(self, root: Path, *, logger: logging.Logger | None = None) -> None:
        self.path = root / TIMED_STATE_FILE
        self._log = logger or logging.getLogger("innkeeper.plugin.tavern.loader")
        self._state = _File()
        self._lock = asyncio.Lock()

    async def open(self) -> None:
        """Load the file; an unreadable one is logged and replaced by an empty state."""
        try:
            data = await asyncio.to_thread(read_bounded, self.path, TIMED_STATE_MAX_BYTES)
            self._state = _decoder.decode(data) if data else _File()
        except (ResourceError, msgspec.DecodeError, msgspec.ValidationError) as exc:
            self._log.error(
                "timed-effect state unreadable (%s); starting empty", type(exc).__name__
            )
            self._state = _File()

    def has(self, session_id: str) -> bool:
        """Whether ``session_id`` has stored state."""
        return session_id in self._state.sessions

    def input_for(self, session_id: str, clock: int) -> TimedEffectsState:
        """The state an assembly of ``session_id`` at chat length ``clock`` starts from."""
        entry = self._state.sessions.get(session_id)
        if entry is None or clock < entry.clock:
            return _EMPTY
        return entry.after if clock > entry.clock else entry.before

    async def commit(
        self,
        session_id: str,
        clock: int,
        before: TimedEffectsState,
        after: TimedEffectsState,
        now: float,
    ) -> None:
        """Record a real assembly (atomic write; on failure memory and disk stay as they were)."""
        async with self._lock:
            current = self._state.sessions.get(session_id)
            if (
                current is not None
                and current.clock == clock
                and current.before == before
                and current.after == after
            ):
                return
            if current is not None and _idle(current) and before == after == _EMPTY:
                # Nothing running before or after: every later read gives the same empty state
                # from the stored entry, so the clock moves in memory and the file is not
                # rewritten (a turn without sticky or cooldown effects costs no write).
                current.clock, current.updated_at = clock, now
                return
            sessions = dict(self._state.sessions)
            sessions[session_id] = _Entry(clock=clock, before=before, after=after, updated_at=now)
            if len(sessions) > TIMED_STATE_MAX_SESSIONS:
                ordered = sorted(sessions, key=lambda k: sessions[k].updated_at)
                for key in ordered[: len(sessions) - TIMED_STATE_MAX_SESSIONS]:
                    del sessions[key]
            state = _File(sessions=sessions)
            data = msgspec.json.encode(state)
            while len(data) > TIMED_STATE_MAX_BYTES and len(state.sessions) > 1:
                oldest = min(state.sessions, key=lambda k: state.sessions[k].updated_at)
                del state.sessions[oldest]
                data = msgspec.json.encode(state)
            await asyncio.to_thread(atomic_write, self.path, data)
            self._state = state

    def forget(self, session_id: str) -> bool:
        """Drop a session from memory (the next commit writes the change)."""
        return self._state.sessions.pop(session_id, None) is not None
