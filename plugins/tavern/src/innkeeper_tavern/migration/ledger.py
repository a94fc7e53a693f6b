"""What a folder import already brought in, by content hash (``migration-ledger.json``).

The ledger lives in the Tavern data directory the command is configured for and is written only
by ``innkeeper import`` (never by the server): ``{schemaVersion: 1, items: {<sha256>: {kind, id,
name, source}}}``. The key is the SHA-256 of the item's kind and the exact bytes imported, so a
renamed file with the same content is still a duplicate and an edited file is new. An entry only
counts when its id still exists in the target library (a deleted card is imported again, and a
ledger of another server never hides an import). It is saved atomically after every imported
item, so a run that is killed resumes where it stopped.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Final

LEDGER_FILE: Final = "migration-ledger.json"


def content_key(kind: str, *parts: bytes) -> str:
    """The ledger key of one item: SHA-256 over its kind and bytes."""
    digest = hashlib.sha256(kind.encode() + b"\x00")
    for part in parts:
        digest.update(hashlib.sha256(part).digest())
    return digest.hexdigest()


class Ledger:
    """The ledger file of one data directory (``save`` is atomic)."""

    def __init__(self, root: Path, *, read_only: bool = False) -> None:
        self.path = root / LEDGER_FILE
        self.read_only = read_only
        self.items: dict[str, dict[str, Any]] = {}
        try:
            doc = json.loads(self.path.read_bytes())
        except (OSError, ValueError):
            doc = {}
        items = doc.get("items") if isinstance(doc, dict) else None
        if isinstance(items, dict):
            self.items = {k: v for k, v in items.items() if isinstance(v, dict)}

    def get(self, key: str) -> dict[str, Any] | None:
        """The entry of ``key``, if any."""
        return self.items.get(key)

    def record(self, key: str, **entry: Any) -> None:
        """Remember one imported item and save."""
        self.items[key] = entry
        self.save()

    def save(self) -> None:
        """Write the ledger atomically (temporary file, fsync, rename)."""
        if self.read_only:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = json.dumps({"schemaVersion": 1, "items": self.items}, ensure_ascii=False).encode()
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".ledger-")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
