"""Re-reading stored documents: the typed decode, and a world book edited on disk.

A document is decoded straight into its body type (not builtins then ``convert``): the result
must be the same record either way, for every kind, with the same errors. A world book edited
on disk and re-read (``reload``) keeps the entry objects the edit left unchanged, is served to
the next reader without a second read, and its compiled form is derived, not recompiled.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import msgspec
import pytest

from innkeeper_tavern.pure.formats.worldbook import WorldBook, WorldBookEntry
from innkeeper_tavern.pure.worldbook import (
    ActivationContext,
    ActivationMessage,
    ActivationRequest,
    BookInput,
    MatcherCache,
    activate,
)
from innkeeper_tavern.state.resources import TavernResources, atomic, library
from innkeeper_tavern.state.resources.kinds import WorldBookDocument
from innkeeper_tavern.state.resources.library import DocumentLibrary

CORPUS = Path(__file__).resolve().parents[5] / "shared" / "sillytavern-corpus"
ST = CORPUS / "sillytavern-repo" / "staging-1ac6780"
PROLIX = CORPUS / "prolix-oc-st-presets"


def books(root: Path) -> DocumentLibrary[WorldBookDocument]:
    return TavernResources(root).world_books


async def test_typed_decode_equals_builtins_then_convert_for_every_kind(tmp_path: Path) -> None:
    res = TavernResources(tmp_path)
    await res.open()
    await res.import_preset(json.loads((ST / "presets_openai_Default.json").read_text()), "D")
    await res.import_character((ST / "default_Seraphina.png").read_bytes(), "s.png")
    await res.import_character((PROLIX / "cards" / "Pxansatu.json").read_bytes(), "p.json")
    for path in (PROLIX / "worldbooks" / "The Long Reclamation.json", ST / "Eldoria.json"):
        await res.import_world_book(path.read_bytes(), file_name=path.name)
    await res.create_user({"name": "Ann", "description": "a user"})
    checked = 0
    for lib in (res.presets, res.characters, res.users, res.world_books):
        assert lib._decoder is not None, lib.kind.name  # every kind takes the fast path
        for entry in lib.entries():
            data = lib.path(entry.id).read_bytes()
            assert lib.decode(data) == lib._decode_builtins(data)
            checked += 1
    assert checked == 6


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (b"[1, 2]", "document is not an object"),
        (b"{nope", "not JSON"),
        (b'{"schemaVersion": 2, "id": "u", "createdAt": "a", "updatedAt": "b"}', "schemaVersion"),
        (b'{"schemaVersion": 1, "id": 7, "createdAt": "a", "updatedAt": "b"}', "id must be"),
        (
            b'{"schemaVersion": 1, "id": "u", "createdAt": "a", "updatedAt": "b", "name": 3}',
            "invalid user body",
        ),
    ],
)
def test_bad_documents_fail_alike_on_both_paths(
    tmp_path: Path, document: bytes, message: str
) -> None:
    lib = TavernResources(tmp_path).users
    for decode in (lib.decode, lib._decode_builtins):
        with pytest.raises(ValueError, match=message):
            decode(document)


def _book(count: int) -> WorldBook:
    return WorldBook(
        entries=tuple(
            WorldBookEntry(uid=i, keys=(f"key{i}",), content=f"lore {i}") for i in range(count)
        )
    )


def _edit_on_disk(path: Path, index: int, keys: list[str]) -> None:
    """What a person does with an editor: change one entry of the stored file."""
    doc = json.loads(path.read_bytes())
    doc["book"]["entries"][index]["keys"] = keys
    doc["book"]["entries"][index]["content"] = "edited by hand"
    stat = path.stat()
    path.write_bytes(json.dumps(doc, ensure_ascii=False).encode())
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))


def _fired(book: WorldBook, revision: str, cache: MatcherCache, text: str) -> list[int]:
    context = ActivationContext(messages=(ActivationMessage(id="1", role="user", text=text),))
    request = ActivationRequest(
        books=[BookInput(resource_id="b", book=book, revision=revision)], context=context
    )
    return sorted(int(e.uid) for e in activate(request, cache).activated)


async def test_a_book_edited_on_disk_is_brought_current_incrementally(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lib = books(tmp_path)
    await lib.open()
    rec = await lib.create(WorldBookDocument(name="B", book=_book(300)))
    cache = MatcherCache()
    entry = lib.entry(rec.id)
    assert entry is not None
    before = (await lib.get(rec.id)).body.book
    assert _fired(before, entry.sha256, cache, "key7 and key150") == [7, 150]

    _edit_on_disk(lib.path(rec.id), 150, ["dragon"])
    await lib.reload()
    reads: list[Path] = []
    real_read = atomic.read_bounded

    def counting(path: Path, limit: int) -> bytes | None:
        reads.append(path)
        return real_read(path, limit)

    monkeypatch.setattr(library, "read_bounded", counting)
    got = await lib.get(rec.id)
    assert reads == []  # the reload's record is served, not read and decoded again
    book = got.body.book
    assert book.entries[150].keys == ("dragon",) and book.entries[150].content == "edited by hand"
    assert all(book.entries[i] is before.entries[i] for i in range(300) if i != 150)
    entry = lib.entry(rec.id)
    assert entry is not None
    assert _fired(book, entry.sha256, cache, "key7 and key150, a dragon") == [7, 150]
    assert (cache.compiled, cache.derived) == (1, 1)
    fresh = MatcherCache()
    for text in ("key150", "dragon", "key299 key0", "nothing here"):
        assert _fired(book, entry.sha256, cache, text) == _fired(book, "x", fresh, text)


async def test_a_read_is_remembered_only_while_the_file_is_the_indexed_one(
    tmp_path: Path,
) -> None:
    lib = books(tmp_path)
    await lib.open()
    rec = await lib.create(WorldBookDocument(name="B", book=_book(3)))
    reader = books(tmp_path)
    await reader.open()
    first = await reader.get(rec.id)
    assert (await reader.get(rec.id)) is first  # read once, then remembered
    # Edited on disk: readers follow the index (the revision) until the library is reloaded.
    _edit_on_disk(lib.path(rec.id), 1, ["changed"])
    assert (await reader.get(rec.id)) is first
    await reader.reload()
    current = await reader.get(rec.id)
    assert current.body.book.entries[1].keys == ("changed",)
    assert current.body.book.entries[0] is first.body.book.entries[0]  # shared, not re-decoded
    # A library whose index no longer matches the file reads it every time and keeps nothing.
    stale = books(tmp_path)
    stale._index = dict(lib._index)
    one: Any = await stale.get(rec.id)
    two: Any = await stale.get(rec.id)
    assert one.body.book.entries[1].keys == ("changed",) and one is not two
    assert msgspec.json.encode(one.body) == msgspec.json.encode(two.body)
