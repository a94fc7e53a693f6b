"""Operation logs of play mutations (`docs/contract/play.md#lifecycle` and
`docs/contract/play.md#operation-logs`; fields and caps: `docs/play.md#operation-logs`).

Each mutation request gets one ``operationId``; its ``start``, named stages and one terminal
record (``success`` or ``failure``) go to the plugin logger (prefix ``dsh-tavern.operation``) and
to a persistent journal. Records hold only whitelisted, length-capped fields — never a body, a
length or a summary of one. GET requests and chrome are never logged.

The journal is ``operation-logs/operations.jsonl`` in the plugin data directory, appended with
``O_APPEND``; when it reaches :data:`MAX_JOURNAL_FILE_BYTES` it rotates to
``operations.1.jsonl`` … ``operations.<N>.jsonl`` and the oldest file is dropped, so the journal
never exceeds ``(N + 1) × MAX_JOURNAL_FILE_BYTES``. Records carry a monotonic ``seq`` that
survives restarts (the cursor of ``GET /v2/operation-logs``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import msgspec

from innkeeper_hostapi import HttpProblem

#: Journal folder and files (in the plugin data directory).
JOURNAL_DIR: Final = "operation-logs"
JOURNAL_FILE: Final = "operations.jsonl"
#: Size at which the current file rotates, and how many rotated files are kept.
MAX_JOURNAL_FILE_BYTES: Final = 1 << 20
ROTATED_FILES: Final = 4
#: Record schema version.
RECORD_VERSION: Final = 1
LOG_PREFIX: Final = "dsh-tavern.operation "
#: Field caps (`docs/play.md#operation-logs`).
_CAPS: Final = {
    "operation": 96,
    "stage": 96,
    "result": 96,
    "errorCode": 96,
    "method": 32,
    "operationId": 128,
    "sessionId": 128,
    "playthroughId": 128,
    "path": 512,
}
#: Whitelisted record fields, in output order.
FIELDS: Final = (
    "seq",
    "at",
    "v",
    "operationId",
    "operation",
    "stage",
    "result",
    "errorCode",
    "status",
    "durationMs",
    "method",
    "sessionId",
    "playthroughId",
    "path",
)
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_ENCODER: Final = msgspec.json.Encoder()


def _clean(key: str, value: object) -> object:
    if isinstance(value, str):
        return _CONTROL.sub("\ufffd", value)[: _CAPS.get(key, 128)]
    return value


def _iso(ms: int) -> str:
    return (
        datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"
    )


class Journal:
    """The persistent, bounded, rotating journal."""

    def __init__(
        self, data_dir: Path, *, logger: logging.Logger, clock_ms: Callable[[], int]
    ) -> None:
        self.folder = data_dir / JOURNAL_DIR
        self._log = logger
        self._clock_ms = clock_ms
        self._seq = 0
        self._fd: int | None = None
        self._size = 0

    def open(self) -> None:
        """Create the folder and continue the ``seq`` of the newest record."""
        self.folder.mkdir(parents=True, exist_ok=True)
        for record in self._read_file(self.folder / JOURNAL_FILE, newest_first=True):
            self._seq = max(self._seq, int(record.get("seq", 0)))
            break
        else:
            for path in self._rotated():
                for record in self._read_file(path, newest_first=True):
                    self._seq = max(self._seq, int(record.get("seq", 0)))
                    break
                if self._seq:
                    break
        self._open_current()

    def close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    def _open_current(self) -> None:
        path = self.folder / JOURNAL_FILE
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self._size = os.fstat(self._fd).st_size

    def _rotated(self) -> list[Path]:
        return [self.folder / f"operations.{i}.jsonl" for i in range(1, ROTATED_FILES + 1)]

    def _rotate(self) -> None:
        self.close()
        rotated = self._rotated()
        with contextlib.suppress(FileNotFoundError):
            rotated[-1].unlink()
        for older, newer in zip(reversed(rotated[1:]), reversed(rotated[:-1]), strict=True):
            with contextlib.suppress(FileNotFoundError):
                os.replace(newer, older)
        with contextlib.suppress(FileNotFoundError):
            os.replace(self.folder / JOURNAL_FILE, rotated[0])
        self._open_current()

    def append(self, fields: dict[str, Any]) -> dict[str, Any]:
        """Write one record (whitelisted fields only); journal failures are logged, not raised."""
        self._seq += 1
        now = self._clock_ms()
        record: dict[str, Any] = {"seq": self._seq, "at": _iso(now), "v": RECORD_VERSION}
        for key in FIELDS[3:]:
            value = fields.get(key)
            if value is not None:
                record[key] = _clean(key, value)
        line = _ENCODER.encode(record) + b"\n"
        try:
            if self._fd is None:
                self._open_current()
            if self._size + len(line) > MAX_JOURNAL_FILE_BYTES:
                self._rotate()
            assert self._fd is not None
            os.write(self._fd, line)
            self._size += len(line)
        except OSError as exc:
            self._log.warning("operation journal write failed: %s", exc.strerror)
        return record

    # -- reading ----------------------------------------------------------------------------
    def _read_file(self, path: Path, *, newest_first: bool) -> Iterable[dict[str, Any]]:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return []
        lines = data.splitlines()
        if newest_first:
            lines.reverse()
        out: list[dict[str, Any]] = []
        for line in lines:
            try:
                record = msgspec.json.decode(line)
            except msgspec.DecodeError:
                continue  # a torn last line after a crash
            if isinstance(record, dict):
                out.append(record)
        return out

    def records(self) -> Iterable[dict[str, Any]]:
        """Every record, newest first."""
        yield from self._read_file(self.folder / JOURNAL_FILE, newest_first=True)
        for path in self._rotated():
            yield from self._read_file(path, newest_first=True)


@dataclass(slots=True)
class Operation:
    """One mutation request's operation: ``stage`` records, then one terminal record."""

    journal: Journal
    logger: logging.Logger
    operation_id: str
    operation: str
    method: str
    started: float
    session_id: str | None = None
    playthrough_id: str | None = None
    path: str | None = None
    done: bool = False

    def _emit(self, level: int, stage: str, **extra: Any) -> None:
        fields = {
            "operationId": self.operation_id,
            "operation": self.operation,
            "stage": stage,
            "method": self.method,
            "sessionId": self.session_id,
            "playthroughId": self.playthrough_id,
            "path": self.path,
            "durationMs": max(0, int((time.monotonic() - self.started) * 1000)),
            **extra,
        }
        record = self.journal.append(fields)
        with contextlib.suppress(Exception):
            self.logger.log(level, "%s%s", LOG_PREFIX, _ENCODER.encode(record).decode())

    def stage(self, name: str) -> None:
        """A named, body-free stage (``mutation.begin``, ``host.forked``…)."""
        if not self.done:
            self._emit(logging.INFO, name)

    def success(self, status: int = 200, result: str = "ok") -> None:
        if not self.done:
            self._emit(logging.INFO, "success", result=result, status=status)
            self.done = True

    def failure(self, code: str, status: int) -> None:
        if not self.done:
            status = status if 100 <= status <= 599 else 500
            self._emit(logging.WARNING, "failure", errorCode=code or "UNKNOWN_ERROR", status=status)
            self.done = True


class OperationLog:
    """Creates operations and answers journal queries."""

    def __init__(
        self,
        journal: Journal,
        logger: logging.Logger,
        *,
        new_id: Callable[[], str] = lambda: str(uuid.uuid4()),
    ) -> None:
        self.journal = journal
        self._log = logger
        self._new_id = new_id

    def begin(
        self,
        operation: str,
        method: str,
        *,
        session_id: str | None = None,
        playthrough_id: str | None = None,
        path: str | None = None,
    ) -> Operation:
        op = Operation(
            self.journal,
            self._log,
            self._new_id(),
            operation,
            method,
            time.monotonic(),
            session_id=session_id if isinstance(session_id, str) else None,
            playthrough_id=playthrough_id if isinstance(playthrough_id, str) else None,
            path=path if isinstance(path, str) else None,
        )
        op._emit(logging.INFO, "start")
        return op

    @contextlib.asynccontextmanager
    async def operation(
        self, operation: str, method: str, **ids: str | None
    ) -> AsyncIterator[Operation]:
        """Run a mutation as one operation: a raised problem is its failure, a clean exit its
        success (unless the body already ended it)."""
        op = self.begin(operation, method, **ids)
        try:
            yield op
        except HttpProblem as exc:
            op.failure(exc.code, exc.status)
            raise
        except BaseException:
            op.failure("INTERNAL_ERROR", 500)
            raise
        op.success()
