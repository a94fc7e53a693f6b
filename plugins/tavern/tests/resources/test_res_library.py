"""The resource stores without HTTP: atomic writes, the metadata index, limits, locking."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import logging
from pathlib import Path
from typing import Any

import msgspec
import pytest

from innkeeper_tavern.pure.formats.user import UserData
from innkeeper_tavern.pure.formats.worldbook import WorldBook, WorldBookEntry
from innkeeper_tavern.pure.worldbook.incremental import share_unchanged_entries
from innkeeper_tavern.state.resources import atomic
from innkeeper_tavern.state.resources.errors import ResourceError
from innkeeper_tavern.state.resources.kinds import USERS, WORLD_BOOKS, WorldBookDocument
from innkeeper_tavern.state.resources.library import DocumentKind, DocumentLibrary
from innkeeper_tavern.state.resources.lock import DataDirLock, DataDirLockedError
from innkeeper_tavern.state.resources.relations import ResourceBindings
from innkeeper_tavern.state.resources.statefile import StateFile

LOG = logging.getLogger("test.tavern.resources")
#: Built at import (plugin tests elsewhere purge and re-import Tavern modules).
_BOOK = msgspec.json.Decoder(WorldBook)


def make_library(root: Path, kind: DocumentKind[Any] = USERS) -> DocumentLibrary[Any]:
    ticks = itertools.count()
    ids = itertools.count()
    return DocumentLibrary(
        root,
        kind,
        clock=lambda: f"2026-01-01T00:00:{next(ticks):02d}.000Z",
        ids=lambda prefix: f"{prefix}-{next(ids)}",
        logger=LOG,
    )


def fail_rename(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(source: Path, target: Path) -> None:
        raise OSError("simulated crash")

    monkeypatch.setattr(atomic, "_replace", boom)


def test_atomic_write_replaces_whole_files(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "f.json"
    atomic.atomic_write(target, b"one")
    atomic.atomic_write(target, b"two")
    assert target.read_bytes() == b"two"
    assert [p.name for p in target.parent.iterdir()] == ["f.json"]
    assert target.stat().st_mode & 0o777 == atomic.FILE_MODE


def test_crash_before_rename_keeps_the_previous_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "f.json"
    atomic.atomic_write(target, b"previous")
    fail_rename(monkeypatch)
    with pytest.raises(OSError, match="simulated"):
        atomic.atomic_write(target, b"next")
    assert target.read_bytes() == b"previous"
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]


def test_read_bounded_refuses_oversized_files(tmp_path: Path) -> None:
    path = tmp_path / "big"
    path.write_bytes(b"x" * 11)
    assert atomic.read_bounded(tmp_path / "missing", 10) is None
    with pytest.raises(ResourceError) as info:
        atomic.read_bounded(path, 10)
    assert info.value.code == "RESOURCE_READ_FAILED"


def test_stale_temp_files_are_cleaned_on_open(tmp_path: Path) -> None:
    folder = tmp_path / "users"
    folder.mkdir()
    (folder / ".u.json.1.abc.tmp").write_bytes(b"half")
    asyncio.run(make_library(tmp_path).open())
    assert list(folder.glob("*.tmp")) == []


async def test_create_update_delete_and_index(tmp_path: Path) -> None:
    lib = make_library(tmp_path)
    await lib.open()
    rec = await lib.create(UserData(name="Ada", description="d"))
    assert rec.id == "user-0" and rec.created_at == rec.updated_at
    edited = await lib.update(rec.id, lambda u: msgspec.structs.replace(u, name="Ada L"))
    assert edited.created_at == rec.created_at and edited.updated_at > rec.updated_at
    entry = lib.entry(rec.id)
    assert entry is not None and entry.name == "Ada L"
    assert entry.summary == {"descriptionPreview": "d", "hasAvatar": False}
    disk = json.loads((tmp_path / "users" / "user-0.json").read_text())
    assert disk["schemaVersion"] == 1 and disk["name"] == "Ada L"
    index = json.loads((tmp_path / "users" / ".index.json").read_text())
    assert [e["name"] for e in index["entries"]] == ["Ada L"]
    await _delete(lib, rec.id)
    assert lib.count() == 0
    assert not (tmp_path / "users" / "user-0.json").exists()
    with pytest.raises(ResourceError) as info:
        await lib.get(rec.id)
    assert (info.value.status, info.value.code) == (404, "USER_NOT_FOUND")


async def _delete(lib: DocumentLibrary[Any], resource_id: str) -> None:
    async with lib.lock:
        await lib.delete_locked(resource_id)


async def test_reopening_reads_only_changed_documents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lib = make_library(tmp_path)
    await lib.open()
    ids = [(await lib.create(UserData(name=f"u{i}"))).id for i in range(5)]
    # Edit one file behind the library's back, drop one, add a junk and a corrupt file.
    changed = tmp_path / "users" / f"{ids[0]}.json"
    doc = json.loads(changed.read_text())
    doc["name"] = "renamed outside"
    changed.write_text(json.dumps(doc))
    (tmp_path / "users" / f"{ids[1]}.json").unlink()
    (tmp_path / "users" / "not an id!.json").write_text("{}")
    (tmp_path / "users" / "user-corrupt.json").write_text("{broken")
    decoded: list[int] = []
    original = DocumentLibrary.decode

    def counting(self: DocumentLibrary[Any], data: bytes) -> Any:
        decoded.append(1)
        return original(self, data)

    monkeypatch.setattr(DocumentLibrary, "decode", counting)
    again = make_library(tmp_path)
    await again.open()
    # Only the edited and the corrupt file were parsed; the other three came from the index.
    assert len(decoded) == 2
    names = {e.id: e.name for e in again.entries()}
    assert names == {ids[0]: "renamed outside", ids[2]: "u2", ids[3]: "u3", ids[4]: "u4"}
    # A third open finds everything in the (rewritten) index.
    decoded.clear()
    third = make_library(tmp_path)
    await third.open()
    assert len(decoded) == 1  # the corrupt file is retried, never indexed
    assert {e.id for e in third.entries()} == set(names)


async def test_corrupt_index_is_rebuilt(tmp_path: Path) -> None:
    lib = make_library(tmp_path)
    await lib.open()
    rec = await lib.create(UserData(name="x"))
    (tmp_path / "users" / ".index.json").write_text("{nope")
    again = make_library(tmp_path)
    await again.open()
    assert [e.id for e in again.entries()] == [rec.id]


async def test_oversized_index_is_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from innkeeper_tavern.state.resources import library as library_module

    lib = make_library(tmp_path)
    await lib.open()
    rec = await lib.create(UserData(name="x"))
    monkeypatch.setattr(library_module, "MAX_INDEX_BYTES", 10)
    again = make_library(tmp_path)
    await again.open()
    assert [e.id for e in again.entries()] == [rec.id]


async def test_limits_reject_without_writing(tmp_path: Path) -> None:
    small = dataclasses.replace(USERS, max_document_bytes=400, max_count=2)
    lib = make_library(tmp_path, small)
    await lib.open()
    with pytest.raises(ResourceError) as info:
        await lib.create(UserData(name="x", description="y" * 500))
    assert (info.value.status, info.value.code) == (413, "RESOURCE_DOCUMENT_TOO_LARGE")
    assert lib.count() == 0 and not list((tmp_path / "users").glob("user-*.json"))
    await lib.create(UserData(name="a"))
    await lib.create(UserData(name="b"))
    with pytest.raises(ResourceError) as info:
        await lib.create(UserData(name="c"))
    assert (info.value.status, info.value.code) == (409, "RESOURCE_LIMIT_REACHED")


async def test_failed_edit_writes_nothing(tmp_path: Path) -> None:
    lib = make_library(tmp_path)
    await lib.open()
    rec = await lib.create(UserData(name="x"))
    before = (tmp_path / "users" / f"{rec.id}.json").read_bytes()

    def bad(user: UserData) -> UserData:
        raise ValueError("no")

    with pytest.raises(ValueError, match="no"):
        await lib.update(rec.id, bad)
    assert (tmp_path / "users" / f"{rec.id}.json").read_bytes() == before


async def test_failed_index_write_rolls_the_document_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lib = make_library(tmp_path)
    await lib.open()
    rec = await lib.create(UserData(name="before"))
    path = tmp_path / "users" / f"{rec.id}.json"
    before = path.read_bytes()
    real = atomic._replace

    def fail_index(source: Path, target: Path) -> None:
        if target.name == ".index.json":
            raise OSError("index disk full")
        real(source, target)

    monkeypatch.setattr(atomic, "_replace", fail_index)
    with pytest.raises(ResourceError) as info:
        await lib.update(rec.id, lambda u: msgspec.structs.replace(u, name="after"))
    assert info.value.code == "RESOURCE_WRITE_FAILED"
    assert path.read_bytes() == before
    assert lib.entry(rec.id).name == "before"  # type: ignore[union-attr]
    with pytest.raises(ResourceError):
        await lib.create(UserData(name="new"))
    assert sorted(p.name for p in (tmp_path / "users").glob("user-*.json")) == [path.name]


async def test_failed_delete_keeps_the_document(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lib = make_library(tmp_path)
    await lib.open()
    rec = await lib.create(UserData(name="stay"))
    path = tmp_path / "users" / f"{rec.id}.json"
    before = path.read_bytes()
    real = atomic._replace

    def fail_index(source: Path, target: Path) -> None:
        if target.name == ".index.json":
            raise OSError("index disk full")
        real(source, target)

    for failure in (fail_index, None):
        if failure is None:
            fail_rename(monkeypatch)  # every rename fails: the document cannot even move aside
        else:
            monkeypatch.setattr(atomic, "_replace", failure)
        with pytest.raises(ResourceError) as info:
            await _delete(lib, rec.id)
        assert info.value.code == "RESOURCE_WRITE_FAILED"
        assert path.read_bytes() == before and lib.exists(rec.id)
        assert sorted(p.name for p in (tmp_path / "users").iterdir()) == [".index.json", path.name]


async def test_a_crash_mid_delete_does_not_resurrect(tmp_path: Path) -> None:
    lib = make_library(tmp_path)
    await lib.open()
    rec = await lib.create(UserData(name="gone"))
    path = tmp_path / "users" / f"{rec.id}.json"
    # State after a crash between moving the document aside and rewriting the index.
    atomic.move(path, atomic.trash_path(path))
    again = make_library(tmp_path)
    await again.open()
    assert again.count() == 0
    assert sorted(p.name for p in (tmp_path / "users").iterdir()) == [".index.json"]


async def test_concurrent_updates_of_one_document_are_serialized(tmp_path: Path) -> None:
    lib = make_library(tmp_path)
    await lib.open()
    rec = await lib.create(UserData(name="counter", description=""))

    async def bump(i: int) -> None:
        await lib.update(
            rec.id, lambda u: msgspec.structs.replace(u, description=u.description + f"{i},")
        )

    await asyncio.gather(*(bump(i) for i in range(50)))
    final = await lib.get(rec.id)
    assert sorted(int(x) for x in final.body.description.split(",") if x) == list(range(50))


async def test_state_file_round_trip_and_corruption(tmp_path: Path) -> None:
    store = StateFile(tmp_path / "b.json", ResourceBindings, max_bytes=1000, logger=LOG)
    await store.open()
    assert store.state == ResourceBindings()
    new = ResourceBindings(preset={"p": ["w"]})
    async with store.lock:
        await store.save_locked(new)
    assert json.loads((tmp_path / "b.json").read_text())["preset"] == {"p": ["w"]}
    too_big = ResourceBindings(preset={f"p{i}": ["w" * 50] for i in range(50)})
    with pytest.raises(ResourceError) as info:
        async with store.lock:
            await store.save_locked(too_big)
    assert info.value.status == 413 and store.state == new
    (tmp_path / "c.json").write_text("{bad")
    other = StateFile(tmp_path / "c.json", ResourceBindings, max_bytes=1000, logger=LOG)
    await other.open()
    assert other.state == ResourceBindings()
    assert (tmp_path / "c.json.corrupt").read_text() == "{bad"


def test_data_dir_lock_is_exclusive(tmp_path: Path) -> None:
    first = DataDirLock(tmp_path)
    first.acquire()
    second = DataDirLock(tmp_path)
    with pytest.raises(DataDirLockedError):
        second.acquire()
    first.release()
    second.acquire()
    second.release()
    first.release()  # idempotent


async def test_orphan_covers_are_swept_at_open(tmp_path: Path) -> None:
    from innkeeper_tavern.pure.formats.card import parse_card
    from innkeeper_tavern.pure.formats.png import placeholder_png
    from innkeeper_tavern.state.resources.kinds import CHARACTERS

    lib = make_library(tmp_path, CHARACTERS)
    await lib.open()
    card = parse_card({"spec": "chara_card_v2", "spec_version": "2.0", "data": {"name": "A"}})
    rec = await lib.create(card, artifact=placeholder_png())
    covers = tmp_path / "character-artifacts"
    (covers / "character-orphan.png").write_bytes(b"x")
    again = make_library(tmp_path, CHARACTERS)
    await again.open()
    assert sorted(p.name for p in covers.iterdir()) == [f"{rec.id}.png"]


async def test_world_book_reads_after_an_edit_reuse_what_was_written(tmp_path: Path) -> None:
    entries = tuple(WorldBookEntry(uid=i, keys=(f"k{i}",), content=f"c{i}") for i in range(50))
    lib = make_library(tmp_path, WORLD_BOOKS)
    await lib.open()
    rec = await lib.create(WorldBookDocument(name="B", book=WorldBook(entries=entries)))

    def edit(doc: WorldBookDocument) -> WorldBookDocument:
        fresh = _BOOK.decode(msgspec.json.encode(doc.book))  # as a PATCH body arrives
        changed = list(fresh.entries)
        changed[20] = msgspec.structs.replace(changed[20], content="edited")
        book = share_unchanged_entries(doc.book, WorldBook(entries=tuple(changed)))
        return msgspec.structs.replace(doc, book=book)

    edited = await lib.update(rec.id, edit)
    got = await lib.get(rec.id)
    assert got is edited  # no disk read and decode while it is current
    assert got.body.book.entries[19] is entries[19] and got.body.book.entries[21] is entries[21]
    assert got.body.book.entries[20].content == "edited"
    # What is on disk is the same document.
    reopened = make_library(tmp_path, WORLD_BOOKS)
    await reopened.open()
    # (The same values: a float field holding an int default prints as 100 here, 100.0 read back.)
    on_disk = (await reopened.get(rec.id)).body
    assert json.loads(msgspec.json.encode(on_disk)) == json.loads(msgspec.json.encode(got.body))
    # Another revision (here: written by the reopened library) is read from disk, not the
    # remembered record.
    again = await reopened.update(rec.id, lambda d: msgspec.structs.replace(d, name="Renamed"))
    assert (await reopened.get(rec.id)) is again
    lib._index = dict(reopened._index)  # the first library sees the new index entry
    assert (await lib.get(rec.id)).body.name == "Renamed"
    await _delete(lib, rec.id)
    with pytest.raises(ResourceError):
        await lib.get(rec.id)
