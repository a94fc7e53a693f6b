"""The normalized world-book model: corpus files, defaults for old files, lossless round trips."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from innkeeper_tavern.pure.formats.guards import StructureLimitError
from innkeeper_tavern.pure.formats.worldbook import (
    Position,
    Role,
    SelectiveLogic,
    WorldBook,
    WorldBookFormatError,
    export_character_book,
    export_world_book,
    parse_any_world_book,
    parse_character_book,
    parse_world_book,
)


def test_every_corpus_book_parses_and_round_trips(corpus: list[Any]) -> None:
    assert len(corpus) == 6
    for name, raw, shape in corpus:
        book = parse_world_book(raw) if shape == "st" else parse_character_book(raw)
        assert book.entries, name
        assert not book.diagnostics, (name, book.diagnostics[:3])
        same_shape = export_world_book(book) if shape == "st" else export_character_book(book)
        again = parse_world_book(same_shape) if shape == "st" else parse_character_book(same_shape)
        assert again == book, name
        # Cross-shape conversion keeps every activation-relevant field.
        other = (
            parse_character_book(export_character_book(book))
            if shape == "st"
            else parse_world_book(export_world_book(book))
        )
        for a, b in zip(book.entries, other.entries, strict=True):
            assert (a.uid, a.keys, a.content, a.position, a.order, a.disable, a.selective) == (
                b.uid,
                b.keys,
                b.content,
                b.position,
                b.order,
                b.disable,
                b.selective,
            )


def test_legacy_minimal_entry_gets_st_defaults() -> None:
    book = parse_world_book(
        {"entries": {"0": {"uid": 0, "key": ["a"], "keysecondary": [], "content": "x"}}}
    )
    entry = book.entries[0]
    assert entry.selective is True  # docs/worldbook.md#wi-entry-fields: newest WI default
    assert entry.position == Position.BEFORE_CHAR
    assert entry.probability == 100
    assert entry.use_probability is True
    assert entry.depth == 4
    assert entry.group_weight == 100
    assert entry.role == Role.SYSTEM
    assert entry.scan_depth is None
    assert entry.case_sensitive is None


def test_js_object_key_order_and_uid_from_key() -> None:
    book = parse_world_book({"entries": {"b": {"content": "b"}, "10": {}, "2": {}, "01": {}}})
    assert [e.source_key for e in book.entries] == ["2", "10", "b", "01"]
    assert [e.uid for e in book.entries] == [2, 10, "b", 1]
    assert any(d.code == "duplicate-uid" for d in book.diagnostics) is False


def test_bad_values_fall_back_with_diagnostics() -> None:
    book = parse_world_book(
        {
            "entries": {
                "0": {
                    "uid": 0,
                    "order": "12",
                    "position": 99,
                    "probability": "lots",
                    "delayUntilRecursion": True,
                    "role": None,
                    "selectiveLogic": 3,
                }
            }
        }
    )
    entry = book.entries[0]
    assert entry.order == 12
    assert entry.position == Position.BEFORE_CHAR
    assert entry.probability == 100
    assert entry.delay_until_recursion == 1
    assert entry.selective_logic == SelectiveLogic.AND_ALL
    codes = {d.code for d in book.diagnostics}
    assert codes == {"unknown-position", "invalid-number"}


def test_character_book_mapping_and_unknown_fields_survive() -> None:
    raw = {
        "name": "Book",
        "scan_depth": 3,
        "token_budget": 500,
        "recursive_scanning": True,
        "extensions": {"vendor": 1},
        "x_top": {"keep": True},
        "entries": [
            {
                "keys": ["k"],
                "content": "c",
                "enabled": True,
                "insertion_order": 7,
                "position": "after_char",
                "use_regex": True,
                "priority": 3,
                "extensions": {"position": 4, "depth": 2, "role": 1, "sticky": 2, "mine": "x"},
            },
            {"keys": ["j"], "content": "d", "insertion_order": 1, "secondary_keys": ["z"]},
        ],
    }
    book = parse_character_book(raw)
    first, second = book.entries
    assert (first.uid, first.order, first.position, first.depth, first.role) == (
        0,
        7,
        Position.AT_DEPTH,
        2,
        Role.USER,
    )
    assert first.sticky == 2
    assert first.extensions == {"mine": "x"}
    assert first.extra == {"priority": 3}
    # docs/worldbook.md#wi-formats: no `selective` → secondary keys ignored; no `enabled` →
    # disabled (as ST imports it).
    assert second.selective is False
    assert second.disable is True
    assert second.position == Position.AFTER_CHAR
    assert {d.code for d in book.diagnostics} == {"missing-enabled"}
    out = export_character_book(book)
    assert out["x_top"] == {"keep": True}
    assert out["entries"][0]["extensions"]["mine"] == "x"
    assert out["entries"][0]["priority"] == 3
    assert out["scan_depth"] == 3
    assert out["token_budget"] == 500
    assert parse_character_book(out).entries == book.entries


def test_v3_lorebook_wrapper_and_detection() -> None:
    book = parse_any_world_book(
        {"spec": "lorebook_v3", "data": {"entries": [{"keys": ["a"], "enabled": True}]}}
    )
    assert book.source_format == "character_book"
    assert parse_any_world_book({"entries": {}}).source_format == "st"


def test_rejects_non_books_and_guards_structure() -> None:
    with pytest.raises(WorldBookFormatError):
        parse_world_book({"entries": 3})
    with pytest.raises(StructureLimitError) as info:
        parse_world_book({"entries": {str(i): {} for i in range(10_001)}})
    assert info.value.code in {"WORLD_BOOK_TOO_MANY_ENTRIES", "STRUCTURE_TOO_MANY_NODES"}
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(40):
        node["x"] = {}
        node = node["x"]
    with pytest.raises(StructureLimitError):
        parse_world_book({"entries": {}, "deep": deep})


def test_model_round_trips_through_msgspec_json(corpus: list[Any]) -> None:
    for _, raw, shape in corpus:
        book = parse_world_book(raw) if shape == "st" else parse_character_book(raw)
        again = msgspec.json.decode(msgspec.json.encode(book), type=WorldBook)
        assert again == book


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63) + 1, 2**63 - 1)  # wider integers: test_integer_range_is_guarded
    | st.floats(allow_nan=True)
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=20,
)
_field_names = st.sampled_from(
    [
        "uid",
        "key",
        "keysecondary",
        "order",
        "position",
        "probability",
        "group",
        "role",
        "sticky",
        "delayUntilRecursion",
        "characterFilter",
        "extensions",
        "selectiveLogic",
        "scanDepth",
        "keys",
        "insertion_order",
        "enabled",
        "id",
        "secondary_keys",
        "triggers",
        "depth",
    ]
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.dictionaries(_field_names, _json, max_size=8), max_size=5), st.booleans())
def test_arbitrary_field_values_never_crash(entries: list[dict[str, Any]], as_map: bool) -> None:
    raw: dict[str, Any] = {
        "entries": {str(i): e for i, e in enumerate(entries)} if as_map else entries
    }
    for parse in (parse_world_book, parse_character_book):
        book = parse(raw)
        assert len(book.entries) == len(entries)
        msgspec.json.encode(book)  # always encodable (64-bit integers only)
        for exported in (export_world_book(book), export_character_book(book)):
            again = parse_any_world_book(exported)
            # A standalone file is an object keyed by uid: on re-import JavaScript's key order
            # (array-index keys first, ascending) decides the order, so entries with negative
            # or non-numeric uids may move. The set of entries must survive.
            assert sorted((e.keys for e in again.entries), key=repr) == sorted(
                (e.keys for e in book.entries), key=repr
            )


@pytest.mark.parametrize("number", [2**63, -(2**63), 10**309])
def test_integer_range_is_guarded(number: int) -> None:
    """Issue 19 item 4: an integer no ST number can hold is a clear refusal, not OverflowError."""
    raw = {"entries": [{"uid": 1, "key": ["a"], "order": number}]}
    for parse in (parse_world_book, parse_character_book):
        with pytest.raises(StructureLimitError) as caught:
            parse(raw)
        assert caught.value.code == "NUMBER_OUT_OF_RANGE"


@pytest.mark.parametrize("number", [1e19, -1e19, 2.0**63, 1e300])
def test_a_huge_integral_float_survives_export_and_reimport(number: float) -> None:
    """An integral double beyond JS's safe range is exported as a float, not as an integer the
    64-bit guard would refuse on re-import (hypothesis found probability 9.2e18)."""
    raw = {"entries": [{"uid": 1, "key": ["a"], "probability": number, "groupWeight": number}]}
    for parse in (parse_world_book, parse_character_book):
        book = parse(raw)
        for exported in (export_world_book(book), export_character_book(book)):
            again = parse_any_world_book(exported)
            assert [e.probability for e in again.entries] == [e.probability for e in book.entries]
