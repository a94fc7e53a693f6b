"""The opening manifest: the fixed snapshots the host accepts, and the literal data that their
openings produce (`docs/contract/openings.md#opening-world-books` and
`docs/contract/openings.md#rendering-cache`).

One format, one file, read by two features:

- ``PUT /v1/rendering-cache/opening`` stores a snapshot only when its exact URL, SHA-256 and
  size match a listed snapshot;
- ``opening-worldbook/prepare`` accepts ``identitySource`` / ``source`` only when they match a
  listed snapshot, and takes the opening's entries from that snapshot's ``openings`` mapping.
  The snapshot's text is verified, never executed or parsed: the entries are literal data here.

``manifest.json`` ships in this package; the plugin option ``openingManifestPath`` names one more
file in the same format (its snapshots are added to the shipped ones)::

    {"version": 1,
     "snapshots": [
       {"url": str, "sha256": <64 lowercase hex of the UTF-8 bytes>, "size": <byte length>,
        "family"?: str,
        "openings"?: {<openingId>: {"name"?: str, "skip": true}
                                 | {"name"?: str, "entries": [<entry>, ...]}}}]}

An ``<entry>`` is a SillyTavern world-info entry restricted to literal values of the keys in
:data:`ENTRY_FIELDS` (``uid`` and ``content`` required). Anything else (an unknown key, an
object where a literal belongs, a value the world-book parser would correct) rejects the whole
manifest: the host never guesses at data it cannot represent exactly.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Final

from innkeeper_tavern.pure.formats.worldbook import (
    WorldBook,
    WorldBookFormatError,
    parse_world_book,
)

__all__ = [
    "ENTRY_FIELDS",
    "MANIFEST_FILE",
    "MANIFEST_PATH_OPTION",
    "Manifest",
    "ManifestError",
    "Opening",
    "Snapshot",
    "load_manifest",
    "parse_manifest",
]

#: The manifest shipped in this package.
MANIFEST_FILE: Final = "manifest.json"
#: Plugin option: the path of one more manifest file (same format).
MANIFEST_PATH_OPTION: Final = "openingManifestPath"
#: Bounds of the data a manifest may carry.
MAX_MANIFEST_BYTES: Final = 4 << 20
MAX_SNAPSHOTS: Final = 256
MAX_OPENINGS_PER_SNAPSHOT: Final = 64
MAX_ENTRIES_PER_OPENING: Final = 64
MAX_ENTRY_CONTENT_BYTES: Final = 32 << 10
MAX_KEYS_PER_ENTRY: Final = 64
MAX_TEXT_CHARS: Final = 200
#: ``openingId`` (and ``family``) spelling.
OPENING_ID_PATTERN: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_SHA256: Final = re.compile(r"[0-9a-f]{64}")

#: Entry keys a manifest may set, with the literal type each one holds.
ENTRY_FIELDS: Final[Mapping[str, str]] = {
    "uid": "int",
    "content": "str",
    "comment": "str",
    "key": "strs",
    "keysecondary": "strs",
    "constant": "bool",
    "selective": "bool",
    "selectiveLogic": "int",
    "order": "int",
    "position": "int",
    "depth": "int",
    "role": "int",
    "disable": "bool",
    "probability": "number",
    "useProbability": "bool",
    "caseSensitive": "bool",
    "matchWholeWords": "bool",
}


class ManifestError(ValueError):
    """A manifest that cannot be used (the message names where)."""


@dataclass(frozen=True, slots=True)
class Opening:
    """One opening of a snapshot: a skip, or the literal entries and the book they make."""

    opening_id: str
    name: str
    skip: bool
    entries: tuple[dict[str, Any], ...]
    book: WorldBook | None


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One accepted snapshot: its identity and (optionally) its openings."""

    url: str
    sha256: str
    size: int
    family: str | None
    openings: Mapping[str, Opening]

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.url, self.sha256, self.size)


@dataclass(frozen=True, slots=True)
class Manifest:
    """Every accepted snapshot, by ``(url, sha256, size)``."""

    snapshots: Mapping[tuple[str, str, int], Snapshot]

    def find(self, url: str, sha256: str, size: int) -> Snapshot | None:
        """The snapshot with exactly this identity, or ``None``."""
        return self.snapshots.get((url, sha256, size))

    def accepts(self, url: str, sha256: str, size: int) -> bool:
        return (url, sha256, size) in self.snapshots

    def merged(self, other: Manifest) -> Manifest:
        """Both manifests' snapshots; the same identity listed twice must be identical."""
        out = dict(self.snapshots)
        for key, snapshot in other.snapshots.items():
            if key in out and out[key] != snapshot:
                raise ManifestError(f"snapshot {snapshot.url} is listed twice, differently")
            out[key] = snapshot
        return Manifest(out)


def _text(value: Any, where: str, *, pattern: re.Pattern[str] | None = None) -> str:
    if not isinstance(value, str) or not value or len(value) > MAX_TEXT_CHARS:
        raise ManifestError(f"{where} must be a non-empty string of at most {MAX_TEXT_CHARS}")
    if pattern is not None and not pattern.fullmatch(value):
        raise ManifestError(f"{where} must match {pattern.pattern}")
    return value


def _literal(kind: str, value: Any, where: str) -> None:
    ok = {
        "int": isinstance(value, int) and not isinstance(value, bool),
        "number": isinstance(value, (int, float)) and not isinstance(value, bool),
        "bool": isinstance(value, bool),
        "str": isinstance(value, str),
        "strs": isinstance(value, list)
        and len(value) <= MAX_KEYS_PER_ENTRY
        and all(isinstance(v, str) and 0 < len(v) <= MAX_TEXT_CHARS for v in value),
    }[kind]
    if not ok:
        raise ManifestError(f"{where} must be a literal {kind}")


def _entry(raw: Any, where: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ManifestError(f"{where} must be an object")
    unknown = sorted(set(raw) - set(ENTRY_FIELDS))
    if unknown:
        raise ManifestError(f"{where}.{unknown[0]} is not a supported entry field")
    for name in ("uid", "content"):
        if name not in raw:
            raise ManifestError(f"{where}.{name} is required")
    for name, value in raw.items():
        _literal(ENTRY_FIELDS[name], value, f"{where}.{name}")
    if raw["uid"] < 0:
        raise ManifestError(f"{where}.uid must be non-negative")
    if len(raw["content"].encode("utf-8")) > MAX_ENTRY_CONTENT_BYTES:
        raise ManifestError(f"{where}.content is over {MAX_ENTRY_CONTENT_BYTES} bytes")
    return dict(raw)


def opening_book(name: str, entries: tuple[dict[str, Any], ...]) -> WorldBook:
    """The world book the literal ``entries`` make (``ManifestError`` if the parser would
    correct or drop anything)."""
    raw = {"name": name, "entries": {str(e["uid"]): e for e in entries}}
    try:
        book = parse_world_book(raw)
    except WorldBookFormatError as exc:
        raise ManifestError(f"opening {name!r}: {exc}") from None
    if book.diagnostics:
        first = book.diagnostics[0]
        raise ManifestError(f"opening {name!r}: {first.code} at {first.path}")
    return book


def _opening(opening_id: str, raw: Any, where: str) -> Opening:
    if not isinstance(raw, dict) or not set(raw) <= {"name", "skip", "entries"}:
        raise ManifestError(f"{where} must be {{name?, skip}} or {{name?, entries}}")
    name = _text(raw.get("name", opening_id), f"{where}.name")
    if ("skip" in raw) == ("entries" in raw):
        raise ManifestError(f"{where} needs exactly one of skip and entries")
    if "skip" in raw:
        if raw["skip"] is not True:
            raise ManifestError(f"{where}.skip must be true")
        return Opening(opening_id, name, True, (), None)
    items = raw["entries"]
    if not isinstance(items, list) or not 0 < len(items) <= MAX_ENTRIES_PER_OPENING:
        raise ManifestError(f"{where}.entries must hold 1..{MAX_ENTRIES_PER_OPENING} entries")
    entries = tuple(_entry(e, f"{where}.entries[{i}]") for i, e in enumerate(items))
    if len({e["uid"] for e in entries}) != len(entries):
        raise ManifestError(f"{where}.entries repeat a uid")
    return Opening(opening_id, name, False, entries, opening_book(name, entries))


def _snapshot(raw: Any, where: str) -> Snapshot:
    if not isinstance(raw, dict) or not {"url", "sha256", "size"} <= set(raw):
        raise ManifestError(f"{where} must carry url, sha256 and size")
    unknown = sorted(set(raw) - {"url", "sha256", "size", "family", "openings"})
    if unknown:
        raise ManifestError(f"{where}.{unknown[0]} is not a snapshot field")
    url = raw["url"]
    if not isinstance(url, str) or not url or len(url) > 2048:
        raise ManifestError(f"{where}.url must be a non-empty string")
    digest = raw["sha256"]
    if not isinstance(digest, str) or not _SHA256.fullmatch(digest):
        raise ManifestError(f"{where}.sha256 must be 64 lowercase hex")
    size = raw["size"]
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise ManifestError(f"{where}.size must be a non-negative integer")
    family = raw.get("family")
    if family is not None:
        family = _text(family, f"{where}.family", pattern=OPENING_ID_PATTERN)
    openings_raw = raw.get("openings", {})
    if not isinstance(openings_raw, dict) or len(openings_raw) > MAX_OPENINGS_PER_SNAPSHOT:
        raise ManifestError(f"{where}.openings must map at most {MAX_OPENINGS_PER_SNAPSHOT} ids")
    openings = {}
    for opening_id, value in openings_raw.items():
        _text(opening_id, f"{where}.openings key", pattern=OPENING_ID_PATTERN)
        openings[opening_id] = _opening(opening_id, value, f"{where}.openings.{opening_id}")
    return Snapshot(url, digest, size, family, openings)


def parse_manifest(doc: Any) -> Manifest:
    """Validate a manifest document (:class:`ManifestError` on anything malformed)."""
    if not isinstance(doc, dict) or doc.get("version") != 1 or set(doc) != {"version", "snapshots"}:
        raise ManifestError("manifest: {version: 1, snapshots} expected")
    items = doc["snapshots"]
    if not isinstance(items, list) or len(items) > MAX_SNAPSHOTS:
        raise ManifestError(f"manifest: snapshots must be an array of at most {MAX_SNAPSHOTS}")
    out: dict[tuple[str, str, int], Snapshot] = {}
    for index, raw in enumerate(items):
        snapshot = _snapshot(raw, f"snapshots[{index}]")
        if snapshot.key in out:
            raise ManifestError(f"snapshots[{index}] repeats {snapshot.url}")
        out[snapshot.key] = snapshot
    return Manifest(out)


def _decode(data: bytes, where: str) -> Manifest:
    if len(data) > MAX_MANIFEST_BYTES:
        raise ManifestError(f"{where} is over {MAX_MANIFEST_BYTES} bytes")
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ManifestError(f"{where} is not JSON: {exc}") from None
    try:
        return parse_manifest(doc)
    except ManifestError as exc:
        raise ManifestError(f"{where}: {exc}") from None


def load_manifest(extra_path: str | Path | None = None) -> Manifest:
    """The shipped manifest, plus the snapshots of ``extra_path`` when given (blocking read;
    called once at plugin setup). ``ManifestError`` names the file and the problem."""
    shipped = resources.files(__package__).joinpath(MANIFEST_FILE).read_bytes()
    manifest = _decode(shipped, MANIFEST_FILE)
    if extra_path is None:
        return manifest
    path = Path(extra_path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ManifestError(f"{MANIFEST_PATH_OPTION} {path}: {exc.strerror}") from None
    return manifest.merged(_decode(data, str(path)))
