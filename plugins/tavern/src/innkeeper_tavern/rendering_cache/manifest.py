"""The opening manifest: which fixed opening snapshots ``PUT /rendering-cache/opening`` accepts.

``opening-manifest.json`` ships in this package::

    {"version": 1, "entries": [{"url": str, "sha256": str, "size": int}, ...]}

``sha256`` is the lowercase hex SHA-256 of the snapshot's UTF-8 bytes and ``size`` their
length. A snapshot is accepted only when its exact URL, digest and size match one entry.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import Any, Final

from .model import SourceRef

__all__ = ["MANIFEST_FILE", "OpeningManifest", "load_manifest"]

MANIFEST_FILE: Final = "opening-manifest.json"


@dataclass(frozen=True, slots=True)
class OpeningManifest:
    """The accepted ``(url, sha256, size)`` triples."""

    entries: frozenset[tuple[str, str, int]]

    def accepts(self, ref: SourceRef) -> bool:
        return (ref.url, ref.digest, ref.size) in self.entries

    @staticmethod
    def parse(doc: Any) -> OpeningManifest:
        """Validate a manifest document (``ValueError`` on any malformed entry)."""
        if not isinstance(doc, dict) or doc.get("version") != 1:
            raise ValueError("opening manifest: version 1 object expected")
        entries = doc.get("entries")
        if not isinstance(entries, list):
            raise ValueError("opening manifest: entries must be an array")
        out: set[tuple[str, str, int]] = set()
        for entry in entries:
            if not isinstance(entry, dict) or set(entry) != {"url", "sha256", "size"}:
                raise ValueError("opening manifest: each entry is exactly {url, sha256, size}")
            url, digest, size = entry["url"], entry["sha256"], entry["size"]
            valid_digest = isinstance(digest, str) and len(digest) == 64
            if not (isinstance(url, str) and url and valid_digest and isinstance(size, int)):
                raise ValueError("opening manifest: malformed entry")
            out.add((url, digest.lower(), size))
        return OpeningManifest(frozenset(out))


def load_manifest() -> OpeningManifest:
    """The manifest shipped in this package."""
    text = resources.files(__package__).joinpath(MANIFEST_FILE).read_text("utf-8")
    return OpeningManifest.parse(json.loads(text))
