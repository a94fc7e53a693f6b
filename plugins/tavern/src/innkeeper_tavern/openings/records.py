"""The Tavern-owned opening-draft record (`spec/API.md` "Sessionless opening drafts").

A draft is a catalog playthrough without ``rootSessionId`` plus one record here, stored as
``<plugin data>/opening-drafts/<draftId>.json`` (written atomically; the file is the truth, a
process keeps no other copy). ``docs/openings.md`` documents every field.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any, Final, Literal

import msgspec

from innkeeper_tavern.resources.atomic import atomic_write

DraftStatus = Literal["open", "preparing", "materialized"]

#: Record schema version.
SCHEMA_VERSION: Final = 1
#: Directory of the records under the plugin's data directory.
DRAFTS_DIR: Final = "opening-drafts"
#: Largest record file (variables of every greeting included).
MAX_RECORD_BYTES: Final = 8 << 20
#: Draft ids: ``draft-`` and 32 lowercase hex.
DRAFT_ID: Final = re.compile(r"draft-[0-9a-f]{32}")


class DraftSelection(msgspec.Struct, kw_only=True, rename="camel", frozen=True):
    """What the opening binds: greeting, preset, persona and standalone books."""

    greeting_index: int = 0
    preset_id: str | None = None
    user_id: str | None = None
    world_book_ids: tuple[str, ...] = ()


class DraftOpening(msgspec.Struct, kw_only=True, rename="camel", frozen=True):
    """One greeting's opening variables: generated, or edited by the player (``edited``)."""

    variables: dict[str, Any]
    edited: bool = False
    #: The MVU template version the variables were generated from (``None``: no template).
    template_version: str | None = None


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
    #: Per greeting index (decimal string key): that greeting's opening variables.
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


class DraftStore:
    """The records on disk, one lock per draft (process-local, like the other play guards)."""

    def __init__(self, data_dir: Path) -> None:
        self.root = data_dir / DRAFTS_DIR
        self._locks: dict[str, asyncio.Lock] = {}

    def lock(self, draft_id: str) -> asyncio.Lock:
        """The lock serializing every change of one draft."""
        return self._locks.setdefault(draft_id, asyncio.Lock())

    def _path(self, draft_id: str) -> Path:
        assert DRAFT_ID.fullmatch(draft_id)
        return self.root / f"{draft_id}.json"

    async def load(self, draft_id: str) -> DraftRecord | None:
        """The record, or ``None`` when there is none."""

        def work() -> DraftRecord | None:
            try:
                data = self._path(draft_id).read_bytes()
            except FileNotFoundError:
                return None
            return _DECODER.decode(data)

        return await asyncio.to_thread(work)

    async def save(self, record: DraftRecord) -> None:
        """Replace the record atomically (``ValueError`` when it outgrows the limit)."""
        data = _ENCODER.encode(record)
        if len(data) > MAX_RECORD_BYTES:
            raise ValueError("draft record too large")

        def work() -> None:
            self.root.mkdir(parents=True, exist_ok=True)
            atomic_write(self._path(record.id), data)

        await asyncio.to_thread(work)
