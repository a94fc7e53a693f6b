"""One world-book entry edited without re-validating the whole book (the editor's save):
the entry checked as a whole-book edit checks it, the book's limits kept as exact running totals,
and the document written byte-for-byte as the merged encoding would write it."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import msgspec
import pytest

from innkeeper_tavern.pure.formats.errors import FormatError
from innkeeper_tavern.pure.formats.guards import book_limits
from innkeeper_tavern.pure.formats.worldbook import WorldBook, parse_any_world_book
from innkeeper_tavern.state.resources import TavernResources, book_entry_edit
from innkeeper_tavern.state.resources.book_entry_edit import (
    BookTotals,
    book_totals,
    edit_one_entry,
)
from innkeeper_tavern.state.resources.library import SCHEMA_VERSION, Record
from innkeeper_tavern.state.resources.service import edited_book


def _book(rng: random.Random, count: int, shape: str = "st") -> WorldBook:
    entries = [
        {
            "uid": i,
            "key": [f"k{i}"] * rng.randrange(1, 4),
            "keysecondary": ["s"] * rng.randrange(0, 3),
            "content": "x" * rng.randrange(5),
            "extensions": {"tag": [1, 2]} if rng.random() < 0.3 else {},
        }
        for i in range(count)
    ]
    if shape == "character_book":
        cb = [
            {"id": e["uid"], "keys": e["key"], "content": e["content"], "enabled": True}
            for e in entries
        ]
        return parse_any_world_book({"entries": cb, "scan_depth": 3})
    return parse_any_world_book({"name": "b", "entries": {str(e["uid"]): e for e in entries}})


def _wire(rng: random.Random, uid: int) -> dict[str, Any]:
    return {
        "uid": uid,
        "keys": [f"n{uid}"] * rng.randrange(1, 6),
        "secondary_keys": ["z"] * rng.randrange(3),
        "content": "new",
        "extensions": {"deep": {"a": [1, 2, 3]}} if rng.random() < 0.5 else {},
    }


@pytest.mark.parametrize("shape", ["st", "character_book"])
def test_running_totals_equal_a_full_count_and_the_entry_equals_a_whole_book_edit(
    shape: str,
) -> None:
    rng = random.Random(11)
    book = _book(rng, 30, shape)
    totals = book_totals(book)
    for step in range(40):
        entries = book.entries
        action = rng.choice(["replace", "add", "delete"]) if entries else "add"
        index = None if action == "add" else rng.randrange(len(entries))
        value = None if action == "delete" else _wire(rng, 500 + step)
        book, totals = edit_one_entry(book, index, value, totals)
        assert totals == book_totals(book)
        if value is not None:
            # The entry is what a whole-book PATCH carrying it would store.
            whole = msgspec.json.decode(
                msgspec.json.encode(msgspec.structs.replace(book, diagnostics=()))
            )
            whole.pop("diagnostics", None)
            whole["entries"][len(whole["entries"]) - 1 if index is None else index] = value
            assert edited_book(whole) == book


def test_bad_entries_and_books_past_their_limits_are_refused_with_the_whole_book_codes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = random.Random(5)
    book = _book(rng, 3)
    totals = book_totals(book)
    with pytest.raises(FormatError) as bad:
        edit_one_entry(book, 0, {"keys": "dragon", "bogus": 1}, totals)
    assert (bad.value.status, bad.value.code) == (400, "WORLD_BOOK_INVALID")
    assert bad.value.path == "$.entry"  # the request body's field
    nested: Any = 1
    for _ in range(40):
        nested = [nested]
    with pytest.raises(FormatError) as deep:
        edit_one_entry(book, 0, {"extensions": {"a": nested}}, totals)
    assert deep.value.code == "STRUCTURE_TOO_DEEP"
    # The node budget of the whole book: the other entries' nodes count too.
    budget = book_limits(4).max_nodes
    almost = BookTotals(budget - 5, budget - 5)
    with pytest.raises(FormatError) as nodes:
        edit_one_entry(book, None, _wire(rng, 9), almost)
    assert nodes.value.code == "STRUCTURE_TOO_MANY_NODES"
    # A book exactly at its budget may still save an entry that does not grow it.
    full = BookTotals(book_limits(3).max_nodes, book_limits(3).max_nodes)
    same = msgspec.json.decode(msgspec.json.encode(book.entries[0]))
    assert edit_one_entry(book, 0, same, full) == (
        msgspec.structs.replace(book, diagnostics=()),
        full,
    )
    monkeypatch.setattr(book_entry_edit, "MAX_BOOK_ENTRIES", 3)
    with pytest.raises(FormatError) as cap:
        edit_one_entry(book, None, _wire(rng, 9), totals)
    assert cap.value.code == "WORLD_BOOK_TOO_MANY_ENTRIES"
    edit_one_entry(book, 1, _wire(rng, 1), totals)  # a replacement does not add one


async def test_a_spliced_document_equals_the_merged_encoding(tmp_path: Path) -> None:
    library = TavernResources(tmp_path).world_books
    record = await library.create(
        library.kind.body_type(name="Lore", book=_book(random.Random(2), 5))
    )
    merged = {
        "schemaVersion": SCHEMA_VERSION,
        "id": record.id,
        "createdAt": record.created_at,
        "updatedAt": record.updated_at,
        **msgspec.to_builtins(record.body),
    }
    assert library.encode(record) == msgspec.json.encode(merged)
    stored = (tmp_path / "world-books" / f"{record.id}.json").read_bytes()
    assert stored == library.encode(Record(record.id, record.created_at, record.updated_at,
                                           record.body))  # fmt: skip
