"""Stored strategies and per-session applied snapshots.

Two files in the plugin's data directory: ``strategies.json`` (what can be applied) and
``applied-strategies.json`` (what each session uses). Applying copies the strategy into the
session's snapshot, so editing or deleting the strategy, or applying another strategy to another
session, never changes a session that already has one (`docs/contract/loader.md#ownership`: the
Assembler owns strategies and the snapshot applied to each session).

Every change builds new state, encodes it, decodes a copy of those exact bytes to validate it,
writes a temp file in the same folder, fsyncs and renames, and only then publishes it in memory:
a failed write changes nothing (docs/contract/conventions.md#atomic-writes).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import msgspec

from innkeeper_hostapi.assembly import HARD_MAX_PROFILE_BYTES, AppliedStrategy, Strategy

from .limits import (
    APPLIED_FILE_MAX_BYTES,
    MAX_APPLIED_SESSIONS,
    MAX_MODULES,
    MAX_STRATEGIES,
    STRATEGY_FILE_MAX_BYTES,
)

__all__ = ["StoreError", "StrategyStore"]

SCHEMA_VERSION: Final = 1
STRATEGIES_FILE: Final = "strategies.json"
APPLIED_FILE: Final = "applied-strategies.json"


class StoreError(Exception):
    """A refused store operation with a stable ``code`` and an HTTP ``status``."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


class _StrategiesFile(msgspec.Struct, forbid_unknown_fields=True, rename="camel"):
    schema_version: int
    strategies: list[Strategy] = []


class _AppliedFile(msgspec.Struct, forbid_unknown_fields=True, rename="camel"):
    schema_version: int
    sessions: dict[str, AppliedStrategy] = {}


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _read(path: Path, limit: int, code: str) -> bytes | None:
    if not path.exists():
        return None
    if path.stat().st_size > limit:
        raise StoreError(500, code, f"{path.name} is over {limit} bytes and is not read")
    return path.read_bytes()


def validate_strategy(strategy: Strategy) -> None:
    """Limits msgspec cannot express on the struct itself."""
    if len(strategy.modules) > MAX_MODULES:
        raise StoreError(400, "STRATEGY_INVALID", f"a strategy has at most {MAX_MODULES} modules")
    if strategy.max_profile_bytes > HARD_MAX_PROFILE_BYTES:
        raise StoreError(
            400,
            "STRATEGY_INVALID",
            f"maxProfileBytes is at most {HARD_MAX_PROFILE_BYTES} (the hard profile cap)",
        )


class StrategyStore:
    """Strategies by id and the applied snapshot of each session."""

    def __init__(
        self, root: Path, *, now: Callable[[], datetime] = lambda: datetime.now(UTC)
    ) -> None:
        self.root = root
        self.now = now
        self._strategies: dict[str, Strategy] = {}
        self._applied: dict[str, AppliedStrategy] = {}
        self._lock = asyncio.Lock()

    async def open(self) -> None:
        """Read both files (off the event loop)."""
        await asyncio.to_thread(self._open)

    def _open(self) -> None:
        raw = _read(self.root / STRATEGIES_FILE, STRATEGY_FILE_MAX_BYTES, "STRATEGY_FILE_TOO_LARGE")
        if raw is not None:
            state = msgspec.json.decode(raw, type=_StrategiesFile)
            self._check_schema(state.schema_version, STRATEGIES_FILE)
            self._strategies = {s.id: s for s in state.strategies}
        raw = _read(self.root / APPLIED_FILE, APPLIED_FILE_MAX_BYTES, "APPLIED_FILE_TOO_LARGE")
        if raw is not None:
            applied = msgspec.json.decode(raw, type=_AppliedFile)
            self._check_schema(applied.schema_version, APPLIED_FILE)
            self._applied = dict(applied.sessions)

    @staticmethod
    def _check_schema(version: int, name: str) -> None:
        if version != SCHEMA_VERSION:
            raise StoreError(
                500, "STRATEGY_SCHEMA_UNSUPPORTED", f"{name} has schema {version}; not read"
            )

    # ------------------------------------------------------------------ reads

    def strategies(self) -> tuple[Strategy, ...]:
        """Every stored strategy, by id."""
        return tuple(self._strategies[k] for k in sorted(self._strategies))

    def strategy(self, strategy_id: str) -> Strategy | None:
        """One stored strategy."""
        return self._strategies.get(strategy_id)

    def applied(self, session_id: str) -> AppliedStrategy | None:
        """The session's snapshot."""
        return self._applied.get(session_id)

    # ------------------------------------------------------------------ writes

    async def put(self, strategy: Strategy) -> Strategy:
        """Create or replace; the stored revision is one above the previous one."""
        validate_strategy(strategy)
        async with self._lock:
            previous = self._strategies.get(strategy.id)
            if previous is None and len(self._strategies) >= MAX_STRATEGIES:
                raise StoreError(409, "STRATEGY_LIMIT_REACHED", f"at most {MAX_STRATEGIES}")
            revision = previous.revision + 1 if previous is not None else 1
            stored = msgspec.structs.replace(strategy, revision=revision)
            state = {**self._strategies, stored.id: stored}
            await self._write_strategies(state)
            self._strategies = state
            return stored

    async def delete(self, strategy_id: str) -> bool:
        """Delete a strategy; applied snapshots stay."""
        async with self._lock:
            if strategy_id not in self._strategies:
                return False
            state = {k: v for k, v in self._strategies.items() if k != strategy_id}
            await self._write_strategies(state)
            self._strategies = state
            return True

    async def apply(self, session_id: str, strategy_id: str | None) -> AppliedStrategy | None:
        """Snapshot ``strategy_id`` onto the session (``None`` clears its snapshot)."""
        async with self._lock:
            if strategy_id is None:
                if session_id not in self._applied:
                    return None
                state = {k: v for k, v in self._applied.items() if k != session_id}
                await self._write_applied(state)
                self._applied = state
                return None
            strategy = self._strategies.get(strategy_id)
            if strategy is None:
                raise StoreError(404, "STRATEGY_NOT_FOUND", f"no strategy {strategy_id!r}")
            if session_id not in self._applied and len(self._applied) >= MAX_APPLIED_SESSIONS:
                raise StoreError(
                    409, "STRATEGY_SESSION_LIMIT_REACHED", f"at most {MAX_APPLIED_SESSIONS}"
                )
            digest = hashlib.sha256(msgspec.json.encode(strategy)).hexdigest()
            snapshot = AppliedStrategy(
                session_id=session_id, strategy=strategy, applied_at=_iso(self.now()), sha256=digest
            )
            state = {**self._applied, session_id: snapshot}
            await self._write_applied(state)
            self._applied = state
            return snapshot

    async def inherit(self, session_id: str, parent: AppliedStrategy) -> AppliedStrategy | None:
        """Copy ``parent``'s snapshot to a session that has none (forks, delegated sessions).

        The copy is the same strategy, hash and ``appliedAt``; afterwards the two are not linked.
        Returns ``None`` when the session already has a snapshot (it keeps its own).
        """
        async with self._lock:
            if session_id in self._applied:
                return None
            if len(self._applied) >= MAX_APPLIED_SESSIONS:
                raise StoreError(
                    409, "STRATEGY_SESSION_LIMIT_REACHED", f"at most {MAX_APPLIED_SESSIONS}"
                )
            snapshot = msgspec.structs.replace(parent, session_id=session_id)
            state = {**self._applied, session_id: snapshot}
            await self._write_applied(state)
            self._applied = state
            return snapshot

    async def _write_strategies(self, state: dict[str, Strategy]) -> None:
        body = _StrategiesFile(SCHEMA_VERSION, [state[k] for k in sorted(state)])
        data = msgspec.json.encode(body)
        if len(data) > STRATEGY_FILE_MAX_BYTES:
            raise StoreError(413, "STRATEGY_STORAGE_LIMIT_REACHED", "strategies file is full")
        msgspec.json.decode(data, type=_StrategiesFile)  # validate the exact bytes
        await asyncio.to_thread(self._write, STRATEGIES_FILE, data)

    async def _write_applied(self, state: dict[str, AppliedStrategy]) -> None:
        data = msgspec.json.encode(_AppliedFile(SCHEMA_VERSION, dict(sorted(state.items()))))
        if len(data) > APPLIED_FILE_MAX_BYTES:
            raise StoreError(413, "STRATEGY_STORAGE_LIMIT_REACHED", "applied file is full")
        msgspec.json.decode(data, type=_AppliedFile)
        await asyncio.to_thread(self._write, APPLIED_FILE, data)

    def _write(self, name: str, data: bytes) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        try:
            _write_atomic(self.root / name, data)
        except OSError as exc:
            raise StoreError(500, "STRATEGY_WRITE_FAILED", f"{name}: {exc.strerror}") from None
