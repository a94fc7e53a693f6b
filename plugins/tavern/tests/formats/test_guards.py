import pytest

from innkeeper_tavern.pure.formats.guards import (
    StructureLimitError,
    StructureLimits,
    check_book_entry_count,
    check_structure,
)


def test_accepts_ordinary_document() -> None:
    assert check_structure({"a": [1, "x", {"b": None}]}) == 6


@pytest.mark.parametrize(
    ("doc", "limits", "code"),
    [
        ([[[[1]]]], StructureLimits(max_depth=3), "STRUCTURE_TOO_DEEP"),
        (list(range(50)), StructureLimits(max_nodes=20), "STRUCTURE_TOO_MANY_NODES"),
        ({"k": "é" * 6}, StructureLimits(max_string_bytes=11), "STRUCTURE_STRING_TOO_LARGE"),
        ({"x" * 9: 1}, StructureLimits(max_key_chars=8), "STRUCTURE_KEY_TOO_LONG"),
    ],
)
def test_rejects_over_limit(doc: object, limits: StructureLimits, code: str) -> None:
    with pytest.raises(StructureLimitError) as info:
        check_structure(doc, limits)
    assert info.value.code == code


def test_limits_are_inclusive() -> None:
    assert check_structure({"k": "é" * 6}, StructureLimits(max_string_bytes=12)) == 2
    assert check_structure([[[1]]], StructureLimits(max_depth=3)) == 4


def test_deep_document_does_not_hit_recursion_limit() -> None:
    doc: list[object] = []
    for _ in range(5000):
        doc = [doc]
    with pytest.raises(StructureLimitError):
        check_structure(doc)


def test_book_entry_count() -> None:
    check_book_entry_count(10_000)
    with pytest.raises(StructureLimitError) as info:
        check_book_entry_count(10_001)
    assert info.value.code == "WORLD_BOOK_TOO_MANY_ENTRIES"
