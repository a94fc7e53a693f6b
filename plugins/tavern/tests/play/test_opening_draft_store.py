"""The opening-draft record on disk: edited openings in their own content-addressed files
written before the record, verified on read, collected when no longer named; schema-1 records
(edits inline) still read and move their edits out on the next save."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from innkeeper_tavern.features.opening_drafts import records
from innkeeper_tavern.features.opening_drafts.records import DraftOpening, DraftRecord, DraftStore

DID = "draft-" + "a" * 32


def record(**changes: object) -> DraftRecord:
    base = DraftRecord(
        id=DID,
        playthrough_id="opening-" + "a" * 32,
        character_id="character-00001",
        created_at="2026-01-01T00:00:00.000Z",
        updated_at="2026-01-01T00:00:00.000Z",
    )
    return msgspec.structs.replace(base, **changes)


async def test_edits_live_in_their_own_files_and_a_switch_rewrites_only_the_record(
    tmp_path: Path,
) -> None:
    store = DraftStore(tmp_path)
    ref, value = store.edit({"stat_data": {"hp": 1}})
    saved = await store.save(record(openings={"0": ref}), {"0": value})
    edit_file = tmp_path / "opening-drafts" / DID / f"0-{ref.sha256}.json"
    assert edit_file.read_bytes() == value.raw
    stamp = edit_file.stat().st_mtime_ns
    main = (tmp_path / "opening-drafts" / f"{DID}.json").read_bytes()
    assert b'"hp"' not in main and ref.sha256.encode() in main  # the record names, not holds
    switched = msgspec.structs.replace(saved, revision=2)
    await store.save(switched)
    assert edit_file.stat().st_mtime_ns == stamp  # never rewritten by a switch
    fresh = DraftStore(tmp_path)  # a restarted process: read from disk, digest verified
    loaded = await fresh.load(DID)
    assert loaded is not None and loaded.revision == 2
    edited = await fresh.load_edit(DID, "0", loaded.openings["0"])
    assert edited.variables == {"stat_data": {"hp": 1}}
    # A replaced edit's old file is collected once the record no longer names it.
    ref2, value2 = store.edit({"stat_data": {"hp": 2}})
    await store.save(msgspec.structs.replace(switched, openings={"0": ref2}), {"0": value2})
    assert not edit_file.exists()
    assert [p.name for p in (tmp_path / "opening-drafts" / DID).iterdir()] == [
        f"0-{ref2.sha256}.json"
    ]


async def test_a_crash_before_the_record_write_leaves_the_old_record_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = DraftStore(tmp_path)
    ref, value = store.edit({"stat_data": {"hp": 1}})
    await store.save(record(openings={"0": ref}), {"0": value})
    real = records.atomic_write

    def crash(path: Path, data: bytes) -> None:
        if path.name == f"{DID}.json":
            raise OSError("killed before the record was replaced")
        real(path, data)

    monkeypatch.setattr(records, "atomic_write", crash)
    ref2, value2 = store.edit({"stat_data": {"hp": 2}})
    with pytest.raises(OSError, match="killed"):
        await store.save(record(revision=2, openings={"0": ref2}), {"0": value2})
    monkeypatch.setattr(records, "atomic_write", real)
    fresh = DraftStore(tmp_path)
    loaded = await fresh.load(DID)
    assert loaded is not None and loaded.revision == 1
    assert (await fresh.load_edit(DID, "0", loaded.openings["0"])).variables == {
        "stat_data": {"hp": 1}
    }


async def test_a_tampered_edit_file_is_refused_on_read(tmp_path: Path) -> None:
    store = DraftStore(tmp_path)
    ref, value = store.edit({"stat_data": {"hp": 1}})
    await store.save(record(openings={"0": ref}), {"0": value})
    path = tmp_path / "opening-drafts" / DID / f"0-{ref.sha256}.json"
    path.write_bytes(value.raw.replace(b"1", b"9"))
    with pytest.raises(OSError, match="does not match"):
        await DraftStore(tmp_path).load_edit(DID, "0", ref)


async def test_a_schema_1_record_reads_and_moves_its_inline_edits_out(tmp_path: Path) -> None:
    folder = tmp_path / "opening-drafts"
    folder.mkdir()
    legacy = msgspec.to_builtins(record(schema_version=1))
    legacy["openings"] = {
        "1": {"variables": {"stat_data": {"hp": 3}}, "edited": True, "templateVersion": "v"}
    }
    (folder / f"{DID}.json").write_bytes(msgspec.json.encode(legacy))
    store = DraftStore(tmp_path)
    loaded = await store.load(DID)
    assert loaded is not None
    assert (await store.load_edit(DID, "1", loaded.openings["1"])).variables == {
        "stat_data": {"hp": 3}
    }
    saved = await store.save(loaded)
    ref = saved.openings["1"]
    assert saved.schema_version == records.SCHEMA_VERSION and ref.variables is None
    assert ref.template_version == "v" and ref.edited is True
    fresh = DraftStore(tmp_path)
    again = await fresh.load(DID)
    assert again is not None and isinstance(again.openings["1"], DraftOpening)
    assert (await fresh.load_edit(DID, "1", again.openings["1"])).variables == {
        "stat_data": {"hp": 3}
    }


def test_an_oversized_edit_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    store = DraftStore(tmp_path)
    with pytest.raises(ValueError, match="too large"):
        store.edit({"stat_data": {"big": "x" * records.MAX_OPENING_BYTES}})
    assert not (tmp_path / "opening-drafts").exists()
