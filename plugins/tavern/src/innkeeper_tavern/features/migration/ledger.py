"""What a folder import already brought in, by content hash (``migration-ledger.jsonl``).

The ledger lives in the Tavern data directory the command is configured for and is written only
by ``innkeeper import`` (never by the server). It is append-only JSON lines, each appended and
fsynced before the command goes on (a torn last line is ignored):

* ``{"op": "run", "known": {library: [id…]}}`` — the ids each library held when a run started;
* ``{"op": "pending", "key", "kind", "name"}`` — written just before an item is imported;
* ``{"op": "sessions", "newest": createdAt}`` — the creation time (host clock) of the newest
  session the host had before this run created any (``""``: none);
* ``{"op": "session", "key", "sessionId"}`` — a chat's session exists (written as soon as the
  server created it, before anything is bound to it);
* ``{"op": "done", "key", "kind", "id", "name", "source"}`` — written once it is;
* ``{"op": "abandon", "key"}`` — written when the library refused it.

The key is the SHA-256 of the item's kind and the exact bytes imported, so a renamed file with
the same content is still a duplicate and an edited file is new. A ``done`` entry only counts when
its id still exists in the target library (a deleted card is imported again). A ``pending`` entry
without its ``done`` is a run killed between the two: the next run looks for the one resource of
that kind (and name) that appeared after that run started and is not in the ledger, and records
it as done — so a killed run never leaves a duplicate behind. A chat killed after its session
was created left a ``session`` line: the next run adopts that session (if it still exists) and
finishes the playthrough on it, so no empty session is left behind. A run killed after the
server created a session but before its ``session`` line leaves a session that is in no
ledger line and no catalog row, created after the newest session of that run's start: the next
run adopts such a session for a pending chat of the same title (they are interchangeable: nothing
is bound to one before its line is written).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

LEDGER_FILE: Final = "migration-ledger.jsonl"


def content_key(kind: str, *parts: bytes) -> str:
    """The ledger key of one item: SHA-256 over its kind and bytes."""
    digest = hashlib.sha256(kind.encode() + b"\x00")
    for part in parts:
        digest.update(hashlib.sha256(part).digest())
    return digest.hexdigest()


@dataclass(frozen=True, slots=True)
class Pending:
    """An import that started and was not recorded as done."""

    key: str
    kind: str
    name: str | None
    known: dict[str, set[str]]
    #: ``createdAt`` of the newest host session when the run that began this import started
    #: (``""``: there was none; ``None``: not recorded).
    sessions_after: str | None = None


class Ledger:
    """The ledger file of one data directory."""

    def __init__(self, root: Path, *, read_only: bool = False) -> None:
        self.path = root / LEDGER_FILE
        self.read_only = read_only
        self.items: dict[str, dict[str, Any]] = {}
        self._pending: dict[str, Pending] = {}
        self._sessions: dict[str, str] = {}
        self._handle: Any = None
        known: dict[str, set[str]] = {}
        newest: str | None = None
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            lines = []
        for line in lines:
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if not isinstance(doc, dict):
                continue
            op, key = doc.get("op"), doc.get("key")
            if op == "run" and isinstance(doc.get("known"), dict):
                known = {k: set(v) for k, v in doc["known"].items() if isinstance(v, list)}
            elif op == "sessions" and isinstance(doc.get("newest"), str):
                newest = doc["newest"]
            elif op == "pending" and isinstance(key, str) and key not in self._pending:
                # A re-begun import keeps the snapshot of the run that began it first.
                name = doc.get("name")
                label = name if isinstance(name, str) else None
                self._pending[key] = Pending(key, str(doc.get("kind")), label, known, newest)
            elif op == "session" and isinstance(key, str) and isinstance(doc.get("sessionId"), str):
                self._sessions[key] = doc["sessionId"]
            elif op == "abandon" and isinstance(key, str):
                self._pending.pop(key, None)
                self._sessions.pop(key, None)
            elif op == "done" and isinstance(key, str):
                self.items[key] = {k: v for k, v in doc.items() if k not in ("op", "key")}
                self._pending.pop(key, None)
                self._sessions.pop(key, None)

    def get(self, key: str) -> dict[str, Any] | None:
        """The ``done`` entry of ``key``, if any."""
        return self.items.get(key)

    def pending(self) -> list[Pending]:
        """Imports that started in an earlier run and were never recorded as done."""
        return list(self._pending.values())

    def pending_of(self, key: str) -> Pending | None:
        """The unfinished import of ``key``, if an earlier run began one."""
        return self._pending.get(key)

    def recorded_sessions(self) -> set[str]:
        """Every session a ``session`` line of an unfinished chat names."""
        return set(self._sessions.values())

    def sessions_before(self, newest: str) -> None:
        """Record the creation time of the host's newest session before this run creates any."""
        self._append({"op": "sessions", "newest": newest})

    def session(self, key: str) -> str | None:
        """The session an unfinished chat import of ``key`` created, if any."""
        return self._sessions.get(key)

    def created_session(self, key: str, session_id: str) -> None:
        """Record that the chat import of ``key`` created ``session_id`` (adopted on a re-run)."""
        self._sessions[key] = session_id
        self._append({"op": "session", "key": key, "sessionId": session_id})

    def done_ids(self) -> set[str]:
        """Every id the ledger records."""
        return {str(v.get("id")) for v in self.items.values()}

    def start_run(self, known: dict[str, set[str]]) -> None:
        """Record the ids each library holds as this run starts."""
        self._append({"op": "run", "known": {k: sorted(v) for k, v in known.items()}})

    def begin(self, key: str, kind: str, name: str | None) -> None:
        """Record that ``key`` is about to be imported."""
        self._pending.setdefault(key, Pending(key, kind, name, {}))
        self._append({"op": "pending", "key": key, "kind": kind, "name": name})

    def abandon(self, key: str) -> None:
        """Record that the import of ``key`` was refused (nothing to recover later)."""
        self._pending.pop(key, None)
        self._sessions.pop(key, None)
        self._append({"op": "abandon", "key": key})

    def record(self, key: str, **entry: Any) -> None:
        """Record one imported item."""
        self.items[key] = entry
        self._pending.pop(key, None)
        self._sessions.pop(key, None)
        self._append({"op": "done", "key": key, **entry})

    def _append(self, doc: dict[str, Any]) -> None:
        if self.read_only:
            return
        if self._handle is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._handle = open(self.path, "ab")  # noqa: SIM115 - kept open for the run
            if self._handle.tell() > 0:
                self._handle.write(b"\n")  # a torn last line of a killed run stays on its own
        self._handle.write(json.dumps(doc, ensure_ascii=False).encode() + b"\n")
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def close(self) -> None:
        """Close the file."""
        if self._handle is not None:
            self._handle.close()
            self._handle = None
