"""Pure rules of the library state: sort orders, custom-order validation, tombstones, relations,
and the file classifier used by ``innkeeper import``."""

from __future__ import annotations

from pathlib import Path

import pytest

from innkeeper_tavern.state.resources.character_state import (
    MAX_TOMBSTONES,
    CharacterState,
    Tombstone,
    checked_order,
    match_tombstone,
    parse_mode,
    sort_entries,
    with_tombstone,
)
from innkeeper_tavern.state.resources.classify import classify
from innkeeper_tavern.state.resources.errors import ResourceError
from innkeeper_tavern.state.resources.library import IndexEntry
from innkeeper_tavern.state.resources.relations import (
    ResourceBindings,
    UserBindings,
    normalize_book_ids,
    with_owner,
    without_books,
)

CORPUS = Path(__file__).resolve().parents[5] / "shared" / "sillytavern-corpus"


def entry(cid: str, name: str, created: str, updated: str) -> IndexEntry:
    return IndexEntry(
        id=cid, name=name, created_at=created, updated_at=updated, size=0, mtime_ns=0, sha256=""
    )


ENTRIES = [
    entry("c1", "beta", "2026-01-01", "2026-01-05"),
    entry("c2", "Alpha", "2026-01-02", "2026-01-05"),
    entry("c3", "item 10", "2026-01-03", "2026-01-03"),
    entry("c4", "item 9", "2026-01-04", "2026-01-09"),
]


def ids(entries: list[IndexEntry]) -> list[str]:
    return [e.id for e in entries]


def test_updated_mode_breaks_ties_by_name_then_id() -> None:
    assert ids(sort_entries(ENTRIES, "updated", [])) == ["c4", "c2", "c1", "c3"]


def test_name_mode_is_case_insensitive_and_numeric() -> None:
    assert ids(sort_entries(ENTRIES, "name", [])) == ["c2", "c1", "c4", "c3"]


def test_custom_mode_appends_cards_added_while_away_oldest_first() -> None:
    assert ids(sort_entries(ENTRIES, "custom", ["c3", "gone", "c1"])) == ["c3", "c1", "c2", "c4"]


def test_mode_validation() -> None:
    assert parse_mode("custom") == "custom"
    for bad in ("Custom", None, 1):
        with pytest.raises(ResourceError) as info:
            parse_mode(bad)
        assert info.value.code == "CHARACTER_SORT_MODE_INVALID"


@pytest.mark.parametrize(
    "value",
    [["a"], ["a", "b", "b"], ["a", "b", "c"], "ab", [1, 2], None],
)
def test_custom_order_must_list_every_card_once(value: object) -> None:
    with pytest.raises(ResourceError) as info:
        checked_order(value, {"a", "b"})
    assert (info.value.status, info.value.code) == (400, "CHARACTER_ORDER_INVALID")


def test_custom_order_accepts_a_permutation() -> None:
    assert checked_order(["b", "a"], {"a", "b"}) == ["b", "a"]


def test_tombstones_are_bounded_oldest_first() -> None:
    state = CharacterState(character_order=["t0", "x"])
    for i in range(MAX_TOMBSTONES + 3):
        state = with_tombstone(state, Tombstone(id=f"t{i}", name=f"n{i}"))
    assert len(state.missing_characters) == MAX_TOMBSTONES
    assert state.missing_characters[0].id == "t3"
    assert state.character_order == ["x"]
    again = with_tombstone(state, Tombstone(id="t3", name="renamed"))
    assert len(again.missing_characters) == MAX_TOMBSTONES
    assert again.missing_characters[-1].name == "renamed"


def test_tombstone_matching_prefers_unique_hashes_then_unique_names() -> None:
    state = CharacterState(
        missing_characters=[
            Tombstone(id="a", name="Lyra", sha256="h1"),
            Tombstone(id="b", name="Twin", sha256="h2"),
            Tombstone(id="c", name="Twin", sha256="h2"),
            Tombstone(id="d", name="Solo"),
        ]
    )
    assert match_tombstone(state, "h1", "Other", ["Other"]) == (
        state.missing_characters[0],
        "sha256",
    )
    assert match_tombstone(state, "h2", "Twin", ["Twin"]) is None  # two hash candidates
    assert match_tombstone(state, None, "Twin", ["Twin"]) is None  # two missing with the name
    assert match_tombstone(state, None, "  solo ", ["solo"]) == (
        state.missing_characters[3],
        "name",
    )
    assert match_tombstone(state, None, "Solo", ["Solo", "SOLO"]) is None  # not unique live
    assert match_tombstone(state, "zz", "Nobody", ["Nobody"]) is None


def test_book_ids_dedupe_stably_and_are_bounded() -> None:
    assert normalize_book_ids(["b", "a", "b", "c", "a"]) == ["b", "a", "c"]
    assert normalize_book_ids([f"w{i % 100}" for i in range(300)]) == [f"w{i}" for i in range(100)]
    for bad, code in (
        ([f"w{i}" for i in range(101)], "WORLD_BOOK_BINDING_LIMIT"),
        (["a/b"], "WORLD_BOOK_BINDING_INVALID"),
        ([""], "WORLD_BOOK_BINDING_INVALID"),
        ({"a": 1}, "WORLD_BOOK_BINDING_INVALID"),
    ):
        with pytest.raises(ResourceError) as info:
            normalize_book_ids(bad)
        assert info.value.code == code


def test_relation_helpers() -> None:
    state = with_owner(ResourceBindings(), "preset", "p", ["a", "b"])
    state = with_owner(state, "character", "c", ["b"])
    assert state.preset == {"p": ["a", "b"]} and state.character == {"c": ["b"]}
    cleared = without_books(state, ("preset", "character"), "b")
    assert cleared.preset == {"p": ["a"]} and cleared.character == {}
    assert with_owner(cleared, "preset", "p", []).preset == {}
    users = without_books(with_owner(UserBindings(), "user", "u", ["b"]), ("user",), "b")
    assert users.user == {}


@pytest.mark.parametrize(
    ("rel", "kind"),
    [
        ("sillytavern-repo/staging-1ac6780/default_Seraphina.png", "character"),
        ("sillytavern-repo/staging-1ac6780/Eldoria.json", "world-book"),
        ("sillytavern-repo/staging-1ac6780/presets_openai_Default.json", "preset"),
        ("sillytavern-repo/staging-1ac6780/settings.json", "skip"),
        ("sillytavern-repo/tag-1.0.0/Toaru.json", "world-book"),
        ("sillytavern-repo/tag-1.9.7/OpenAI_Default.settings.json", "preset"),
        ("prolix-oc-st-presets/cards/Pxansatu.json", "character"),
        ("prolix-oc-st-presets/regex/regex-trim_sim_blocks.json", "skip"),
        ("prolix-oc-st-presets/worldbooks/The Long Reclamation.json", "world-book"),
    ],
)
def test_classifier_on_the_corpus(rel: str, kind: str) -> None:
    assert classify((CORPUS / rel).read_bytes())[0] == kind


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (b'{"format": "pmp-dsh-tavern", "resourceType": "user", "data": {}}', "user"),
        (b'{"name": "V1", "first_mes": "hi"}', "character"),
        (b'{"entries": []}', "world-book"),
        (b"[1]", "skip"),
        (b"not json", "skip"),
        (b'{"hello": 1}', "skip"),
    ],
)
def test_classifier_on_small_documents(data: bytes, kind: str) -> None:
    assert classify(data)[0] == kind
