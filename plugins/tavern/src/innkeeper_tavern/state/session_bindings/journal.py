"""The change log beside ``session-selections.json``: a bind appends what changed, not the file.

``session-selections.log`` holds one JSON line per committed change since the snapshot
(``session-selections.json``) was last written: ``{"set": {<id>: <record>}, "delete": [<id>]}``.
A change is durable once its line is appended and fsynced. Replaying the lines in order over the
snapshot gives the current state. Compaction appends the change first, then writes the snapshot,
then removes the log: the log's last value of every session it names is then the snapshot's, so
a crash between the two replays to the same state.

A line that does not end in a newline is a write cut short (a crash or a kill mid-write): it is
dropped at start, with the change it would have made. A line that does not decode into valid
records ends the replay there (the log is moved aside as ``session-selections.log.corrupt``).

Everything here is blocking: the store calls it through ``asyncio.to_thread``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final

import msgspec

from .files import FILE_MODE, FileTooLarge, read_limited
from .model import SelectionInvalid, SessionRecord, check_selection, check_session_id

#: The log file, beside ``session-selections.json``.
LOG_FILE: Final = "session-selections.log"
#: The log is folded into the snapshot once it is larger than the snapshot and this.
COMPACT_MIN_BYTES: Final = 256 << 10
#: A log past this size is never read (compaction keeps it far below).
MAX_LOG_BYTES: Final = 32 << 20


class Change(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One committed change: records stored whole, and sessions dropped."""

    set: dict[str, SessionRecord] = {}
    delete: list[str] = []


_encoder: Final = msgspec.json.Encoder()
_decoder: Final = msgspec.json.Decoder(Change)


def _serialize(change: Change) -> bytes:
    """The JSON of one change; a module-level seam so tests can simulate a serializer bug."""
    return _encoder.encode(change)


def _fsync(fd: int) -> None:
    """Flush the log; a module-level seam so tests can simulate a failed fsync."""
    os.fsync(fd)


def encode_change(sessions: Mapping[str, SessionRecord], deleted: list[str]) -> bytes:
    """The log line (with its newline) of one change; ``ValueError`` unless the exact bytes
    decode back into valid records."""
    line = _serialize(Change(set=dict(sessions), delete=deleted))
    check_change(line)
    return line + b"\n"


def check_change(line: bytes) -> Change:
    """Decode and check one line; ``ValueError`` when it is not a valid change."""
    try:
        change = _decoder.decode(line)
        for key, record in change.set.items():
            check_session_id(key)
            check_selection(record.selection)
        for key in change.delete:
            check_session_id(key)
    except (msgspec.DecodeError, msgspec.ValidationError, SelectionInvalid) as exc:
        raise ValueError(str(exc)) from None
    return change


def read_changes(path: Path) -> tuple[list[Change], int, str | None]:
    """The log's complete, valid changes in order, how many bytes they take, and what was wrong
    with the rest (``None`` when nothing was). :class:`FileTooLarge` past :data:`MAX_LOG_BYTES`.
    """
    data = read_limited(path, MAX_LOG_BYTES)
    if not data:
        return [], 0, None
    lines = data.split(b"\n")
    torn = lines.pop()  # b"" when the log ends with a newline
    changes: list[Change] = []
    size = 0
    for number, line in enumerate(lines, 1):
        try:
            changes.append(check_change(line))
        except ValueError as exc:
            return changes, size, f"line {number} is invalid ({exc})"
        size += len(line) + 1
    return changes, size, (f"its last {len(torn)} bytes are a cut-short write" if torn else None)


def append(path: Path, line: bytes, expected_size: int) -> int:
    """Append ``line`` to a log of ``expected_size`` bytes and fsync; returns the new size.

    Bytes past ``expected_size`` (a failed earlier append that could not be cut back) are cut
    first, so a line always starts on a complete one. On failure the log is cut back to
    ``expected_size`` (best effort) and ``OSError`` is raised.
    """
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, FILE_MODE)
    try:
        if os.fstat(fd).st_size != expected_size:
            os.ftruncate(fd, expected_size)
        try:
            written = os.write(fd, line)
            if written != len(line):
                raise OSError(f"short write ({written} of {len(line)} bytes)")
            _fsync(fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, expected_size)
            raise
        return expected_size + len(line)
    finally:
        os.close(fd)


def remove(path: Path) -> None:
    """Delete the log (after its changes are in the snapshot)."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


__all__ = [
    "COMPACT_MIN_BYTES",
    "LOG_FILE",
    "MAX_LOG_BYTES",
    "Change",
    "FileTooLarge",
    "append",
    "check_change",
    "encode_change",
    "read_changes",
    "remove",
]
