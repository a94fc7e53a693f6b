"""The Tavern-owned opening-draft record (`docs/contract/openings.md#opening-drafts`).

A draft is a catalog playthrough without ``rootSessionId`` plus one record here, stored as
``<plugin data>/opening-drafts/<draftId>.json`` (written atomically; the file is the truth).
Each edited greeting's variables live beside it in their own content-addressed file
``<draftId>/<greetingIndex>-<sha256>.json``, written (atomically) before the record that names
them, so a greeting switch rewrites only the small record and a crash between the two writes
leaves the old record pointing at old, complete bytes. Unreferenced edit files are collected
after the record is published. ``docs/play.md`` documents every field.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import re
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

import msgspec

from innkeeper_tavern.state.resources.atomic import TEMP_SUFFIX, atomic_write

DraftStatus = Literal["open", "preparing", "materialized"]

#: Record schema version (2: edited variables in their own files; 1 kept them inline and is
#: still read, its inline edits moving to files on the next save).
SCHEMA_VERSION: Final = 2
#: Directory of the records under the plugin's data directory.
DRAFTS_DIR: Final = "opening-drafts"
#: Largest record file (a schema-1 record kept every greeting's variables inline).
MAX_RECORD_BYTES: Final = 8 << 20
#: Largest edited opening of one greeting.
MAX_OPENING_BYTES: Final = 8 << 20
#: Bytes of edited openings kept in memory (by content digest; the least recent go first).
EDIT_CACHE_BYTES: Final = 32 << 20
#: Draft ids: ``draft-`` and 32 lowercase hex.
DRAFT_ID: Final = re.compile(r"draft-[0-9a-f]{32}")


class DraftSelection(msgspec.Struct, kw_only=True, rename="camel", frozen=True):
    """What the opening binds: greeting, preset, persona and standalone books."""

    greeting_index: int = 0
    preset_id: str | None = None
    user_id: str | None = None
    world_book_ids: tuple[str, ...] = ()


class DraftOpening(msgspec.Struct, kw_only=True, rename="camel", frozen=True, omit_defaults=True):
    """One greeting's edited opening: the digest and size of its variables' file."""

    edited: bool
    #: The MVU template version the edit was made against (``None``: no template).
    template_version: str | None = None
    sha256: str = ""
    size: int = 0
    #: Schema 1 only: the variables inline (moved to their own file by the next save).
    variables: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class OpeningValue:
    """A greeting's opening as its JSON bytes: answered as they are (never re-encoded) and
    kept in memory at their size, not at the several-fold size of decoded objects."""

    raw: bytes

    @property
    def variables(self) -> dict[str, Any]:
        """The variables, decoded afresh (a detached copy)."""
        return _VARIABLES.decode(self.raw)

    @classmethod
    def of(cls, variables: dict[str, Any]) -> OpeningValue:
        return cls(_ENCODER.encode(variables))


class Materialization(msgspec.Struct, kw_only=True, rename="camel", frozen=True):
    """The first send's reservation: written before the host session is created."""

    operation_id: str
    request_id: str
    text_sha256: str
    session_id: str | None = None


class DraftRecord(msgspec.Struct, kw_only=True, rename="camel", frozen=True):
    """One opening draft (immutable; edit with ``msgspec.structs.replace``)."""

    schema_version: int = SCHEMA_VERSION
    id: str
    playthrough_id: str
    character_id: str
    character_sha256: str | None = None
    revision: int = 1
    status: DraftStatus = "open"
    created_at: str
    updated_at: str
    source: str | None = None
    selection: DraftSelection = msgspec.field(default_factory=DraftSelection)
    assembly_preset_id: str | None = None
    import_context_ref: str | None = None
    #: Per greeting index (decimal string key): that greeting's edited opening.
    openings: dict[str, DraftOpening] = msgspec.field(default_factory=dict)
    last_input: str | None = None
    materialize: Materialization | None = None
    released_session_ids: tuple[str, ...] = ()

    def view(self) -> dict[str, Any]:
        """The JSON the routes answer (``draft``)."""
        out: dict[str, Any] = msgspec.to_builtins(self)
        return out


_ENCODER: Final = msgspec.json.Encoder()
_DECODER: Final = msgspec.json.Decoder(DraftRecord)
_VARIABLES: Final = msgspec.json.Decoder(dict[str, Any])


def remember_within(cache: OrderedDict[Any, OpeningValue], budget: int) -> None:
    """Drop the least recent openings until ``cache`` holds at most ``budget`` bytes (the
    newest one always stays)."""
    total = sum(len(value.raw) for value in cache.values())
    while total > budget and len(cache) > 1:
        _, dropped = cache.popitem(last=False)
        total -= len(dropped.raw)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class DraftStore:
    """The records on disk, one lock per draft (process-local, like the other play guards)."""

    def __init__(self, data_dir: Path) -> None:
        self.root = data_dir / DRAFTS_DIR
        self._locks: dict[str, asyncio.Lock] = {}
        #: Decoded edits by content digest (the files are immutable once named).
        self._edits: OrderedDict[str, OpeningValue] = OrderedDict()

    def lock(self, draft_id: str) -> asyncio.Lock:
        """The lock serializing every change of one draft."""
        return self._locks.setdefault(draft_id, asyncio.Lock())

    def _path(self, draft_id: str) -> Path:
        assert DRAFT_ID.fullmatch(draft_id)
        return self.root / f"{draft_id}.json"

    def _edit_path(self, draft_id: str, index: str, sha256: str) -> Path:
        assert DRAFT_ID.fullmatch(draft_id) and index.isdigit()
        return self.root / draft_id / f"{index}-{sha256}.json"

    async def load(self, draft_id: str) -> DraftRecord | None:
        """The record, or ``None`` when there is none."""

        def work() -> DraftRecord | None:
            try:
                data = self._path(draft_id).read_bytes()
            except FileNotFoundError:
                return None
            return _DECODER.decode(data)

        return await asyncio.to_thread(work)

    def _remember(self, sha256: str, value: OpeningValue) -> OpeningValue:
        self._edits[sha256] = value
        self._edits.move_to_end(sha256)
        remember_within(self._edits, EDIT_CACHE_BYTES)
        return value

    def edit(self, variables: dict[str, Any]) -> tuple[DraftOpening, OpeningValue]:
        """A reference to ``variables`` as an edit (``ValueError`` when too large); the
        file is written by the next :meth:`save`."""
        value = OpeningValue.of(variables)
        if len(value.raw) > MAX_OPENING_BYTES:
            raise ValueError("edited opening too large")
        digest = _sha256(value.raw)
        self._remember(digest, value)
        return DraftOpening(edited=True, sha256=digest, size=len(value.raw)), value

    async def load_edit(self, draft_id: str, index: str, ref: DraftOpening) -> OpeningValue:
        """The variables an edit reference names (size and digest verified on read)."""
        if ref.variables is not None:  # schema 1
            return OpeningValue.of(ref.variables)
        cached = self._edits.get(ref.sha256)
        if cached is not None:
            self._edits.move_to_end(ref.sha256)
            return cached
        path = self._edit_path(draft_id, index, ref.sha256)

        def work() -> bytes:
            with path.open("rb") as file:
                data = file.read(MAX_OPENING_BYTES + 1)
            if len(data) != ref.size or _sha256(data) != ref.sha256:
                raise OSError(f"edited opening {path.name} does not match its record")
            return data

        data = await asyncio.to_thread(work)
        return self._remember(ref.sha256, OpeningValue(data))

    async def save(
        self, record: DraftRecord, edits: dict[str, OpeningValue] | None = None
    ) -> DraftRecord:
        """Publish ``record``: the files of its new ``edits`` (by greeting index, as
        :meth:`edit` referenced them) first, each written atomically and once, then the record
        atomically, then unreferenced edit files are removed. ``ValueError`` when it outgrows
        a limit (nothing written then). Answers the record as saved (schema-1 inline edits
        moved to files)."""
        files: list[tuple[Path, bytes]] = []
        openings: dict[str, DraftOpening] = {}
        for index, ref in record.openings.items():
            value = (edits or {}).get(index)
            if ref.variables is not None:  # a schema-1 inline edit
                new, value = self.edit(ref.variables)
                ref = msgspec.structs.replace(
                    new, edited=ref.edited, template_version=ref.template_version
                )
            if value is not None:
                files.append((self._edit_path(record.id, index, ref.sha256), value.raw))
            openings[index] = ref
        record = msgspec.structs.replace(record, openings=openings, schema_version=SCHEMA_VERSION)
        data = _ENCODER.encode(record)
        if len(data) > MAX_RECORD_BYTES:
            raise ValueError("draft record too large")
        keep = {self._edit_path(record.id, i, r.sha256).name for i, r in openings.items()}
        folder = self.root / record.id

        def work() -> None:
            self.root.mkdir(parents=True, exist_ok=True)
            for path, raw in files:
                if not path.exists():
                    atomic_write(path, raw)
            atomic_write(self._path(record.id), data)
            if folder.is_dir():
                for leftover in folder.iterdir():
                    if leftover.name not in keep and not leftover.name.endswith(TEMP_SUFFIX):
                        with contextlib.suppress(OSError):
                            leftover.unlink()

        await asyncio.to_thread(work)
        return record
