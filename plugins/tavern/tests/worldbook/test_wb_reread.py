"""A stored book re-read after random edits on disk equals a fresh decode, and so does its
compiled form.

The world-book library decodes a changed document by raw entry spans
(:class:`innkeeper_tavern.state.resources.book_codec.BookCodec`): only entries whose bytes changed
are decoded, the others are the previous revision's objects. For random edit sequences — change,
add, remove and reorder entries, change book and document fields, change the imported original,
re-indent the whole file — every revision must equal a full decode of the same bytes, keep the
unchanged entries by identity, and its compiled form (derived from the previous revision's)
must activate exactly like a fresh compile.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from innkeeper_tavern.pure.formats.worldbook import WorldBook, WorldBookEntry
from innkeeper_tavern.pure.worldbook import MatcherCache, TimedEffectsState, activate
from innkeeper_tavern.pure.worldbook.compiler import compile_book
from innkeeper_tavern.state.resources import TavernResources, book_codec
from innkeeper_tavern.state.resources.book_codec import BookCodec, BookMemo
from innkeeper_tavern.state.resources.kinds import WORLD_BOOKS, WorldBookDocument, WorldBookSource

from .test_wb_corpus_and_properties import _entries
from .test_wb_incremental import _encoded, _request

_FULL = msgspec.json.Decoder(WorldBookDocument)
_CODEC = WORLD_BOOKS.incremental
assert isinstance(_CODEC, BookCodec)

_edit = st.tuples(
    st.sampled_from(
        ["change", "add", "remove", "swap", "book-name", "scan-depth", "name", "raw", "indent"]
    ),
    st.integers(0, 60),
    _entries,
)


def _bytes(doc: WorldBookDocument, indent: bool) -> bytes:
    """The stored file: store fields and body, compact as the library writes it or re-indented
    as an editor may save it."""
    data = {
        "schemaVersion": 1,
        "id": "world-book-a",
        "createdAt": "2026-01-01T00:00:00.000Z",
        "updatedAt": "2026-01-01T00:00:00.000Z",
        **msgspec.to_builtins(doc),
    }
    if indent:
        return json.dumps(data, indent=2, ensure_ascii=False).encode()
    return msgspec.json.encode(data)


def _apply(doc: WorldBookDocument, edit: tuple[str, int, WorldBookEntry]) -> WorldBookDocument:
    kind, where, entry = edit
    entries = list(doc.book.entries)
    book = doc.book
    uid = max((int(e.uid) for e in entries), default=0) + 1
    index = where % len(entries) if entries else 0
    if kind == "add" or (not entries and kind in ("change", "remove", "swap")):
        entries.insert(index, msgspec.structs.replace(entry, uid=uid))
    elif kind == "change":
        entries[index] = msgspec.structs.replace(entry, uid=entries[index].uid)
    elif kind == "remove":
        del entries[index]
    elif kind == "swap":
        other = (index * 7 + 3) % len(entries)
        entries[index], entries[other] = entries[other], entries[index]
    elif kind == "book-name":
        book = msgspec.structs.replace(book, name=f"book {where}")
    elif kind == "scan-depth":
        book = msgspec.structs.replace(book, scan_depth=where)
    elif kind == "name":
        return msgspec.structs.replace(doc, name=f"doc {where}")
    elif kind == "raw":
        raw = {"entries": {str(e.uid): {"content": e.content} for e in entries[:5]}, "n": where}
        return msgspec.structs.replace(doc, source=WorldBookSource(file_name="x.json", raw=raw))
    return msgspec.structs.replace(doc, book=msgspec.structs.replace(book, entries=tuple(entries)))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_entries, max_size=30), st.lists(_edit, min_size=1, max_size=8))
def test_reread_books_equal_fresh_decodes_and_compile_alike(
    start: list[WorldBookEntry], edits: list[tuple[str, int, WorldBookEntry]]
) -> None:
    doc = WorldBookDocument(
        name="B",
        source=WorldBookSource(raw={"entries": {}}),
        book=WorldBook(entries=tuple({e.uid: e for e in start}.values())),
    )
    data = _bytes(doc, indent=False)
    *_, previous, memo = _CODEC.decode(data)
    cache = MatcherCache()
    state = TimedEffectsState()
    activate(_request(previous.book, 0, state), cache)
    for revision, edit in enumerate(edits, start=1):
        doc = _apply(doc, edit)
        before_spans = _spans(data)
        data = _bytes(doc, indent=edit[0] == "indent")
        rid, created, updated, body, memo = _CODEC.decode(data, previous, memo)
        assert (rid, created, updated) == ("world-book-a", *_times(data))
        assert body == _FULL.decode(data)
        # Entries whose bytes did not change are the previous revision's objects.
        # Entries (and the source) whose bytes did not change are the previous revision's
        # objects.
        spans = _spans(data)
        old_by_span = dict(zip(before_spans[1:], previous.book.entries, strict=True))
        for span, entry in zip(spans[1:], body.book.entries, strict=True):
            if span in old_by_span:
                assert entry is old_by_span[span]
        if spans[0] == before_spans[0]:
            assert body.source is previous.source
        request = _request(body.book, revision, state)
        incremental = activate(request, cache)
        assert _encoded(incremental) == _encoded(activate(request, MatcherCache()))
        derived, compiled = cache.get("a", body.book, revision), compile_book("a", body.book)
        for name in ("always", "dynamic"):
            assert [derived.position[s] for s in getattr(derived, name)] == getattr(compiled, name)
        state = incremental.timed_state
        previous = body


def _times(data: bytes) -> tuple[str, str]:
    doc = json.loads(data)
    return doc["createdAt"], doc["updatedAt"]


class _Split(msgspec.Struct):
    entries: list[msgspec.Raw]


class _Doc(msgspec.Struct):
    book: _Split
    source: msgspec.Raw


_SPANS = msgspec.json.Decoder(_Doc)


def _spans(data: bytes) -> list[bytes]:
    """The raw bytes of the ``source`` object, then of each entry."""
    doc = _SPANS.decode(data)
    return [bytes(doc.source), *(bytes(raw) for raw in doc.book.entries)]


def _count_entry_decodes(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The spans the codec decodes as entries from now on (appended as it decodes them)."""
    decoded: list[bytes] = []
    real = book_codec._entry_decoder

    class Counting:
        def decode(self, data: Any) -> Any:
            decoded.append(bytes(data))
            return real.decode(data)

    monkeypatch.setattr(book_codec, "_entry_decoder", Counting())
    return decoded


def test_a_one_entry_edit_decodes_one_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    entries = tuple(WorldBookEntry(uid=i, keys=(f"k{i}",), content=f"c{i}") for i in range(200))
    doc = WorldBookDocument(
        name="B", source=WorldBookSource(raw={"x": [1, 2]}), book=WorldBook(entries=entries)
    )
    # As stored: read back once (an int held by a float field is written back as a float).
    doc = _FULL.decode(_bytes(doc, indent=False))
    *_, first, memo = _CODEC.decode(_bytes(doc, indent=False))
    changed = list(first.book.entries)
    changed[70] = msgspec.structs.replace(changed[70], content="edited")
    edited = msgspec.structs.replace(first, book=WorldBook(entries=tuple(changed)))
    decoded = _count_entry_decodes(monkeypatch)
    *_, second, new_memo = _CODEC.decode(_bytes(edited, indent=False), first, memo)
    assert len(decoded) == 1 and b"edited" in decoded[0]  # the edited entry only
    assert second.source is first.source
    assert second.book.entries[70].content == "edited"
    assert all(second.book.entries[i] is first.book.entries[i] for i in range(200) if i != 70)
    assert isinstance(new_memo, BookMemo) and len(new_memo.entries) == 200


def test_invalid_documents_fail_as_a_full_decode_does() -> None:
    bad_entry = (
        b'{"schemaVersion":1,"id":"a","createdAt":"x","updatedAt":"y","name":"B",'
        b'"book":{"entries":[{"uid":1},{"keys":"k"}]}}'
    )
    for data, message in (
        (bad_entry, r"invalid world book body: .*\$\.book\.entries\[1\]"),
        (b"[1]", "document is not an object"),
        (b'{"schemaVersion":1,"id":"a","createdAt":"x","updatedAt":"y"}', "name"),
        (b'{"schemaVersion":2,"id":"a","createdAt":"x","updatedAt":"y","name":"B"}', "schema"),
    ):
        with pytest.raises(ValueError, match=message):
            _CODEC.decode(data)


async def test_after_a_write_an_edit_on_disk_decodes_only_the_edited_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lib = TavernResources(tmp_path).world_books
    await lib.open()
    entries = tuple(WorldBookEntry(uid=i, keys=(f"k{i}",), content=f"c{i}") for i in range(300))
    rec = await lib.create(WorldBookDocument(name="B", book=WorldBook(entries=entries)))
    written = (await lib.get(rec.id)).body
    path = lib.path(rec.id)
    doc = msgspec.json.decode(path.read_bytes())
    doc["book"]["entries"][42]["content"] = "edited by a script"
    path.write_bytes(msgspec.json.encode(doc))  # the same formatting as the library's
    decoded = _count_entry_decodes(monkeypatch)
    await lib.reload()
    current = (await lib.get(rec.id)).body
    assert len(decoded) == 1 and b"edited by a script" in decoded[0]
    assert current.book.entries[42].content == "edited by a script"
    assert all(current.book.entries[i] is written.book.entries[i] for i in range(300) if i != 42)
    assert current.source is written.source
    # What was kept is what a fresh library reads from the same file.
    fresh = TavernResources(tmp_path).world_books
    await fresh.open()
    assert (await fresh.get(rec.id)).body == current
