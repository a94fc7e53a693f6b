"""``session-selections.log``, as earlier versions wrote it: read once at start, then removed.

Earlier versions appended one JSON line per committed change beside ``session-selections.json``
(``{"set": {<id>: <record>}, "delete": [<id>]}``) and folded the log into the file later. The
store now rewrites the file at every write (:mod:`.store`), so a log is only ever the leftover of
such a version: replaying its lines in order over the file gives the state it had acknowledged.

A line that does not end in a newline is a write cut short (a crash or a kill mid-write): it is
dropped, with the change it would have made. A line that does not decode into valid records
ends the replay there (the log is moved aside as ``session-selections.log.corrupt``).

Everything here is blocking: the store calls it through ``asyncio.to_thread``.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Final

import msgspec

from .files import FileTooLarge, read_limited
from .model import SelectionInvalid, SessionRecord, check_selection, check_session_id

#: The log file, beside ``session-selections.json``.
LOG_FILE: Final = "session-selections.log"
#: A log past this size is never read (earlier versions folded it in far below).
MAX_LOG_BYTES: Final = 32 << 20


class Change(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One committed change: records stored whole, and sessions dropped."""

    set: dict[str, SessionRecord] = {}
    delete: list[str] = []


_decoder: Final = msgspec.json.Decoder(Change)


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


def remove(path: Path) -> None:
    """Delete the log (after its changes are in the snapshot)."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


__all__ = [
    "LOG_FILE",
    "MAX_LOG_BYTES",
    "Change",
    "FileTooLarge",
    "check_change",
    "read_changes",
    "remove",
]
