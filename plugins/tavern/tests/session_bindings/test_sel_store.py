"""SessionSelectionStore: file shape, migration, limits, failure atomicity, clearResource."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from innkeeper_tavern.state.resources import atomic
from innkeeper_tavern.state.session_bindings import journal, snapshot
from innkeeper_tavern.state.session_bindings import store as store_module
from innkeeper_tavern.state.session_bindings.model import (
    CharacterOptions,
    RpState,
    Selection,
    SelectionInvalid,
    normalize_selection,
    selection_wire,
)
from innkeeper_tavern.state.session_bindings.preset_default import PRESET_STATE_FILE
from innkeeper_tavern.state.session_bindings.store import (
    DEFAULT_MAX_SESSIONS,
    HARD_MAX_SESSIONS,
    MAX_READ_BYTES,
    SELECTIONS_FILE,
    SelectionStoreError,
    SessionSelectionStore,
)

NOW = "2026-08-15T00:00:00.000Z"
S1, S2, S3, S4 = "s-1", "s-2", "s-3", "s-4"


class Clock:
    def __init__(self) -> None:
        self.n = 0

    def __call__(self) -> str:
        self.n += 1
        return f"2026-08-15T00:00:{self.n:02d}.000Z"


async def opened(root: Path, **kwargs: Any) -> SessionSelectionStore:
    store = SessionSelectionStore(root, clock=kwargs.pop("clock", lambda: NOW), **kwargs)
    await store.open()
    return store


def read_file(root: Path) -> Any:
    """The durable document (current after every acknowledged write; no log beside it)."""
    assert not (root / journal.LOG_FILE).exists()
    return json.loads((root / SELECTIONS_FILE).read_text("utf-8"))


def disk(root: Path) -> tuple[bytes | None, ...]:
    """The raw bytes of the file and of a log (``None`` when absent)."""
    paths = (root / SELECTIONS_FILE, root / journal.LOG_FILE)
    return tuple(p.read_bytes() if p.exists() else None for p in paths)


def write_file(root: Path, doc: Any) -> None:
    (root / SELECTIONS_FILE).write_text(json.dumps(doc), "utf-8")


def temps(root: Path) -> list[str]:
    return [n for n in os.listdir(root) if n.endswith(".tmp")]


# ---------------------------------------------------------------- shape


async def test_file_is_schema_2_exactly_as_the_spec_shows(tmp_path: Path) -> None:
    store = await opened(tmp_path)
    assert store.get(S1) == Selection()  # unknown session: defaults, nothing stored
    assert not (tmp_path / SELECTIONS_FILE).exists()
    await store.update(S1, lambda s: s)
    # The acknowledged write is in the file itself.
    assert not (tmp_path / journal.LOG_FILE).exists()
    assert read_file(tmp_path) == {
        "schemaVersion": 2,
        "sessions": {
            S1: {
                "selection": {
                    "presetId": None,
                    "characterCardId": None,
                    "userId": None,
                    "worldBookIds": [],
                    "character": {},
                    "rp": {
                        "active": False,
                        "source": None,
                        "followSuppressed": False,
                        "sandboxBefore": None,
                    },
                },
                "updatedAt": NOW,
            }
        },
    }
    # Pretty-printed with a trailing newline (the size limit counts these bytes).
    assert (tmp_path / SELECTIONS_FILE).read_bytes().endswith(b"}\n")


async def test_selection_round_trips_through_a_reopen(tmp_path: Path) -> None:
    store = await opened(tmp_path)
    chosen = Selection(
        preset_id="p",
        character_card_id="c",
        user_id="u",
        world_book_ids=("b1", "b2"),
        character=CharacterOptions(greeting_index=2, prefer_character_system_prompt=False),
        rp=RpState(active=True, source="command", sandbox_before="read-only"),
    )
    await store.set(S1, chosen)
    again = await opened(tmp_path)
    assert again.get(S1) == chosen
    assert again.record(S1) is not None
    assert selection_wire(chosen)["character"] == {
        "greetingIndex": 2,
        "preferCharacterSystemPrompt": False,
    }


# ---------------------------------------------------------------- reading and migration


async def test_v1_file_is_migrated_in_place_on_read(tmp_path: Path) -> None:
    write_file(
        tmp_path,
        {
            "schemaVersion": 1,
            "sessions": {
                S1: {
                    "presetId": "p",
                    "characterCardId": "c",
                    "worldBookIds": ["b1", "b1", "b2", 7, ""],
                    "character": {
                        "greetingIndex": 1,
                        "preferCharacterPostHistory": True,
                        "avatarOverride": "x",  # not a loader-known option
                    },
                },
                S2: "not an object",
            },
        },
    )
    store = await opened(tmp_path)
    assert store.get(S1) == Selection(
        preset_id="p",
        character_card_id="c",
        world_book_ids=("b1", "b2"),
        character=CharacterOptions(greeting_index=1, prefer_character_post_history=True),
    )
    assert store.get(S2) == Selection()
    on_disk = read_file(tmp_path)
    assert on_disk["schemaVersion"] == 2
    assert on_disk["sessions"][S1]["updatedAt"] == NOW
    assert on_disk["sessions"][S1]["selection"]["character"] == {
        "greetingIndex": 1,
        "preferCharacterPostHistory": True,
    }
    assert on_disk["sessions"][S1]["selection"]["rp"]["active"] is False


def test_lenient_reading_keeps_only_valid_values() -> None:
    value = {
        "presetId": "x" * 201,
        "characterCardId": 5,
        "userId": "bad\nid",
        "worldBookIds": [f"b{i}" for i in range(150)],
        "character": {
            "greetingIndex": True,  # a bool is not an index
            "preferCharacterSystemPrompt": "yes",
            "preferCharacterPostHistory": False,
        },
        "rp": {"active": 1, "source": "hacker", "followSuppressed": True, "sandboxBefore": "root"},
    }
    selection = normalize_selection(value)
    assert selection.preset_id is None and selection.character_card_id is None
    assert selection.user_id is None
    assert len(selection.world_book_ids) == 100
    assert selection.character == CharacterOptions(prefer_character_post_history=False)
    assert selection.rp == RpState(follow_suppressed=True)
    assert normalize_selection({"character": {"greetingIndex": -1}}).character == CharacterOptions()
    assert normalize_selection(None) == Selection()


async def test_v2_with_foreign_values_is_normalized_and_rewritten(tmp_path: Path) -> None:
    write_file(
        tmp_path,
        {
            "schemaVersion": 2,
            "sessions": {
                S1: {
                    "selection": {"presetId": "p", "character": {"extra": 1}},
                    "updatedAt": "yesterday",
                },
                "__proto__": {"selection": {"presetId": "evil"}, "updatedAt": NOW},
                "../etc": {"selection": {}, "updatedAt": NOW},
            },
        },
    )
    store = await opened(tmp_path)
    assert store.session_ids() == [S1]
    on_disk = read_file(tmp_path)
    assert list(on_disk["sessions"]) == [S1]
    assert on_disk["sessions"][S1]["updatedAt"] == NOW
    assert on_disk["sessions"][S1]["selection"]["character"] == {}


async def test_a_clean_v2_file_is_not_rewritten(tmp_path: Path) -> None:
    store = await opened(tmp_path)
    await store.set(S1, Selection(preset_id="p"))
    before = (tmp_path / SELECTIONS_FILE).stat().st_mtime_ns
    os.utime(tmp_path / SELECTIONS_FILE, ns=(1, 1))
    await opened(tmp_path)
    assert (tmp_path / SELECTIONS_FILE).stat().st_mtime_ns == 1 != before


async def test_newer_schema_is_refused_and_left_untouched(tmp_path: Path) -> None:
    write_file(tmp_path, {"schemaVersion": 3, "sessions": {}})
    raw = (tmp_path / SELECTIONS_FILE).read_bytes()
    with pytest.raises(SelectionStoreError) as caught:
        await opened(tmp_path)
    assert caught.value.code == "SESSION_SELECTION_SCHEMA_UNSUPPORTED"
    assert (tmp_path / SELECTIONS_FILE).read_bytes() == raw


async def test_files_over_8_mib_are_never_parsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / SELECTIONS_FILE
    path.write_bytes(b'{"schemaVersion":2,"sessions":{}}' + b" " * MAX_READ_BYTES)

    def no_parse(*_: Any) -> Any:
        raise AssertionError("parsed an oversized file")

    monkeypatch.setattr(store_module, "migrate", no_parse)
    with pytest.raises(SelectionStoreError) as caught:
        await opened(tmp_path)
    assert caught.value.code == "SESSION_SELECTION_FILE_TOO_LARGE"
    assert path.stat().st_size > MAX_READ_BYTES  # untouched


async def test_exactly_8_mib_is_still_read(tmp_path: Path) -> None:
    head = b'{"schemaVersion":2,"sessions":{}}'
    (tmp_path / SELECTIONS_FILE).write_bytes(head + b" " * (MAX_READ_BYTES - len(head)))
    store = await opened(tmp_path)
    assert len(store) == 0


@pytest.mark.parametrize(
    "content",
    [b"{not json", b"[]", b'{"schemaVersion": 2, "sessions": []}', b'{"schemaVersion": true}'],
)
async def test_unreadable_file_is_moved_aside(tmp_path: Path, content: bytes) -> None:
    (tmp_path / SELECTIONS_FILE).write_bytes(content)
    store = await opened(tmp_path)
    assert len(store) == 0
    assert (tmp_path / (SELECTIONS_FILE + ".corrupt")).read_bytes() == content
    assert not (tmp_path / SELECTIONS_FILE).exists()


async def test_stale_temp_files_are_removed_on_open(tmp_path: Path) -> None:
    (tmp_path / f".{SELECTIONS_FILE}.123.abc.tmp").write_bytes(b"half")
    (tmp_path / ".other.json.1.tmp").write_bytes(b"someone else's")
    await opened(tmp_path)
    assert temps(tmp_path) == [".other.json.1.tmp"]


async def test_failed_migration_write_still_serves_the_migrated_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_file(tmp_path, {"schemaVersion": 1, "sessions": {S1: {"presetId": "p"}}})

    def fail(*_: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(atomic, "_replace", fail)
    store = await opened(tmp_path)
    assert store.get(S1).preset_id == "p"
    assert read_file(tmp_path)["schemaVersion"] == 1
    monkeypatch.undo()
    await store.update(S2, lambda s: s)  # the next write persists schema 2
    assert read_file(tmp_path)["schemaVersion"] == 2


# ---------------------------------------------------------------- limits


async def test_session_id_checks(tmp_path: Path) -> None:
    store = await opened(tmp_path)
    for bad in ["", "__proto__", "-x", "a/b", "a b", "x" * 201, "é"]:
        with pytest.raises(SelectionInvalid) as caught:
            await store.update(bad, lambda s: s)
        assert caught.value.code == "SESSION_ID_INVALID"
        with pytest.raises(SelectionInvalid):
            store.get(bad)
    await store.update("A" + "x" * 199, lambda s: s)
    await store.update("0a.b:c-d_e", lambda s: s)
    assert len(store) == 2


async def test_resource_ids_and_world_book_counts_are_bounded(tmp_path: Path) -> None:
    store = await opened(tmp_path)
    replace = msgspec.structs.replace
    bad_edits: list[Callable[[Selection], Selection]] = [
        lambda s: replace(s, preset_id="x" * 201),
        lambda s: replace(s, user_id=""),
        lambda s: replace(s, character_card_id="a\x00b"),
        lambda s: replace(s, world_book_ids=tuple(f"b{i}" for i in range(101))),
        lambda s: replace(s, world_book_ids=("b", "b")),
        lambda s: replace(s, world_book_ids=("ok", "y" * 201)),
        lambda s: replace(s, character=CharacterOptions(greeting_index=-1)),
    ]
    for edit in bad_edits:
        with pytest.raises(SelectionInvalid) as caught:
            await store.update(S1, edit)
        assert caught.value.code == "SESSION_SELECTION_INVALID"
    assert len(store) == 0 and not (tmp_path / SELECTIONS_FILE).exists()
    ok = tuple(f"b{i}" for i in range(100))
    assert (await store.update(S1, lambda s: replace(s, world_book_ids=ok))).world_book_ids == ok


async def test_session_cap_rejects_new_sessions_without_eviction(tmp_path: Path) -> None:
    store = await opened(tmp_path, max_sessions=3)
    for sid in (S1, S2, S3):
        await store.ensure(sid, Selection(preset_id=sid))
    for attempt in (
        store.update(S4, lambda s: s),
        store.ensure(S4, Selection()),
        store.set_many({S1: Selection(), S4: Selection()}),
    ):
        with pytest.raises(SelectionStoreError) as caught:
            await attempt
        assert (caught.value.status, caught.value.code) == (409, "SESSION_SELECTION_LIMIT_REACHED")
    assert store.session_ids() == [S1, S2, S3]
    assert store.get(S1).preset_id == S1  # nothing was evicted or touched
    # Existing sessions still change; deleting one makes room.
    await store.update(S1, lambda s: msgspec.structs.replace(s, user_id="u"))
    assert await store.delete_session(S2)
    await store.ensure(S4, Selection())
    assert store.session_ids() == [S1, S3, S4]


def test_cap_defaults_and_hard_limit(tmp_path: Path) -> None:
    assert SessionSelectionStore(tmp_path).max_sessions == DEFAULT_MAX_SESSIONS == 2_048
    assert SessionSelectionStore(tmp_path, max_sessions=HARD_MAX_SESSIONS).max_sessions == 4_096
    for bad in (0, HARD_MAX_SESSIONS + 1):
        with pytest.raises(ValueError, match="max_sessions"):
            SessionSelectionStore(tmp_path, max_sessions=bad)


async def test_real_4_mib_state_limit(tmp_path: Path) -> None:
    store = await opened(tmp_path, max_sessions=HARD_MAX_SESSIONS)
    books = tuple(f"{i:03d}" + "w" * 196 for i in range(100))  # ~21 KiB per session
    many = {f"s-{i}": Selection(world_book_ids=books) for i in range(150)}
    await store.set_many(many)
    size = (tmp_path / SELECTIONS_FILE).stat().st_size
    assert size < store_module.MAX_STATE_BYTES
    more = {f"t-{i}": Selection(world_book_ids=books) for i in range(60)}
    with pytest.raises(SelectionStoreError) as caught:
        await store.set_many(more)
    assert (caught.value.status, caught.value.code) == (
        413,
        "SESSION_SELECTION_STORAGE_LIMIT_REACHED",
    )
    assert len(store) == 150
    assert (tmp_path / SELECTIONS_FILE).stat().st_size == size
    assert not (tmp_path / journal.LOG_FILE).exists()


async def test_an_oversized_old_state_may_shrink_but_not_grow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await opened(tmp_path)
    await store.set_many({f"s-{i}": Selection(preset_id="p" * 100) for i in range(10)})
    size = (tmp_path / SELECTIONS_FILE).stat().st_size
    monkeypatch.setattr(store_module, "MAX_STATE_BYTES", size // 2)
    store = await opened(tmp_path)  # loads although over the (patched) limit
    assert len(store) == 10
    with pytest.raises(SelectionStoreError):
        await store.update("new", lambda s: s)
    with pytest.raises(SelectionStoreError):  # same size is not a shrink
        await store.update("s-0", lambda s: msgspec.structs.replace(s, preset_id="q" * 100))
    assert await store.delete_session("s-0")
    assert (await store.clear_resource("preset", "p" * 100)) == [f"s-{i}" for i in range(1, 10)]


# ---------------------------------------------------------------- failure atomicity


@pytest.mark.parametrize("step", ["_fsync", "_replace"])
async def test_failed_write_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    store = await opened(tmp_path)
    await store.set(S1, Selection(preset_id="before"))
    raw = disk(tmp_path)

    def fail(*_: Any) -> None:
        raise OSError(f"{step} failed")

    monkeypatch.setattr(atomic, step, fail)
    attempts = [
        store.set(S1, Selection(preset_id="after")),
        store.update(S2, lambda s: s),
        store.ensure(S3, Selection()),
        store.clear_resource("preset", "before"),
        store.delete_session(S1),
        store.set_many({S1: Selection(), S2: Selection()}),
    ]
    for attempt in attempts:
        with pytest.raises(SelectionStoreError) as caught:
            await attempt
        assert (caught.value.status, caught.value.code) == (500, "SESSION_SELECTION_WRITE_FAILED")
    assert store.get(S1).preset_id == "before"
    assert store.session_ids() == [S1]
    assert disk(tmp_path) == raw
    assert temps(tmp_path) == []
    monkeypatch.undo()
    assert (await opened(tmp_path)).get(S1).preset_id == "before"


async def test_failed_global_default_write_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await opened(tmp_path)
    await store.global_preset.select("p1")

    def fail(*_: Any) -> None:
        raise OSError("rename failed")

    monkeypatch.setattr(atomic, "_replace", fail)
    with pytest.raises(SelectionStoreError):
        await store.global_preset.select("p2")
    assert store.defaults() == Selection(preset_id="p1")
    assert json.loads((tmp_path / PRESET_STATE_FILE).read_text())["selectedId"] == "p1"


async def test_invalid_entry_in_a_batch_writes_nothing(tmp_path: Path) -> None:
    store = await opened(tmp_path)
    with pytest.raises(SelectionInvalid):
        await store.set_many({S1: Selection(), "bad id": Selection()})
    with pytest.raises(SelectionInvalid):
        await store.set_many({S1: Selection(), S2: Selection(user_id="")})
    assert len(store) == 0 and not (tmp_path / SELECTIONS_FILE).exists()


# ---------------------------------------------------------------- operations


async def test_ensure_freezes_once_and_existing_selection_wins(tmp_path: Path) -> None:
    store = await opened(tmp_path)
    first = await store.ensure(S1, Selection(preset_id="a"))
    second = await store.ensure(S1, Selection(preset_id="b"))
    assert first == (Selection(preset_id="a"), True)
    assert second == (Selection(preset_id="a"), False)


async def test_update_starts_from_base_only_when_unbound(tmp_path: Path) -> None:
    store = await opened(tmp_path)
    await store.global_preset.select("global")
    base = Selection(preset_id="parent", user_id="u")
    replace = msgspec.structs.replace
    assert (await store.update(S1, lambda s: replace(s, character_card_id="c"), base=base)) == (
        Selection(preset_id="parent", user_id="u", character_card_id="c")
    )
    assert (await store.update(S2, lambda s: s)).preset_id == "global"
    # Once stored, the base is ignored.
    assert (await store.update(S1, lambda s: s, base=Selection())).preset_id == "parent"


async def test_concurrent_edits_of_one_session_lose_nothing(tmp_path: Path) -> None:
    store = await opened(tmp_path)
    replace = msgspec.structs.replace

    def add(book: str) -> Callable[[Selection], Selection]:
        return lambda s: replace(s, world_book_ids=(*s.world_book_ids, book))

    await asyncio.gather(*(store.update(S1, add(f"b{i}")) for i in range(20)))
    assert sorted(store.get(S1).world_book_ids) == sorted(f"b{i}" for i in range(20))
    assert len(read_file(tmp_path)["sessions"][S1]["selection"]["worldBookIds"]) == 20


async def test_clear_resource_clears_every_dangling_reference(tmp_path: Path) -> None:
    clock = Clock()
    store = await opened(tmp_path, clock=clock)
    options = CharacterOptions(greeting_index=1, prefer_character_system_prompt=False)
    await store.set(
        S1,
        Selection(
            preset_id="p",
            character_card_id="c",
            user_id="u",
            world_book_ids=("a", "b", "c"),
            character=options,
        ),
    )
    await store.set(S2, Selection(preset_id="p", character_card_id="other", character=options))
    await store.set(S3, Selection(world_book_ids=("b",)))
    await store.global_preset.select("p")

    assert await store.clear_resource("preset", "p") == [S1, S2]
    assert store.global_preset.selected_id is None
    assert await store.clear_resource("character-card", "c") == [S1]
    assert store.get(S1).character == CharacterOptions()  # options go with the card
    assert store.get(S2).character == options
    assert await store.clear_resource("user", "u") == [S1]
    assert await store.clear_resource("world-book", "b") == [S1, S3]
    assert store.get(S1).world_book_ids == ("a", "c")
    assert store.get(S3).world_book_ids == ()
    stamped = read_file(tmp_path)["sessions"][S3]["updatedAt"]
    writes = clock.n
    assert await store.clear_resource("world-book", "zzz") == []
    assert await store.clear_resource("user", "x" * 500) == []
    assert clock.n == writes  # no change, no write
    assert read_file(tmp_path)["sessions"][S3]["updatedAt"] == stamped
    with pytest.raises(ValueError, match="unknown resource kind"):
        await store.clear_resource("card", "c")  # type: ignore[arg-type]
    reopened = await opened(tmp_path)
    assert reopened.get(S1) == Selection(world_book_ids=("a", "c"))


async def test_delete_session(tmp_path: Path) -> None:
    store = await opened(tmp_path)
    await store.set(S1, Selection(preset_id="p"))
    await store.set(S2, Selection())
    assert await store.delete_session(S1) is True
    assert await store.delete_session(S1) is False
    assert await store.delete_session("not a valid id") is False
    assert store.get(S1) == Selection()
    assert list(read_file(tmp_path)["sessions"]) == [S2]
    assert await store.delete_sessions([S2, S3]) == 1
    assert await store.delete_sessions([S3]) == 0
    assert read_file(tmp_path)["sessions"] == {}


async def test_global_default_preset_persists_and_tolerates_a_bad_file(tmp_path: Path) -> None:
    store = await opened(tmp_path)
    await store.global_preset.select("p1")
    assert json.loads((tmp_path / PRESET_STATE_FILE).read_text()) == {
        "schemaVersion": 1,
        "selectedId": "p1",
    }
    assert (await opened(tmp_path)).defaults() == Selection(preset_id="p1")
    assert await store.global_preset.clear("other") is False
    await store.global_preset.select(None)
    assert (await opened(tmp_path)).defaults() == Selection()
    with pytest.raises(ValueError, match="invalid preset id"):
        await store.global_preset.select("")
    (tmp_path / PRESET_STATE_FILE).write_text("{broken")
    assert (await opened(tmp_path)).defaults() == Selection()
    (tmp_path / PRESET_STATE_FILE).write_text('{"schemaVersion": 1, "selectedId": 5}')
    assert (await opened(tmp_path)).defaults() == Selection()


async def test_a_copy_that_fails_validation_is_never_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await opened(tmp_path)
    await store.set(S1, Selection(preset_id="p"))
    raw = disk(tmp_path)
    real = snapshot._serialize

    def corrupting(change: Any) -> bytes:  # a serializer bug: a bad RP enum value
        return real(change).replace(b'"sandboxBefore":null', b'"sandboxBefore":"root"')

    monkeypatch.setattr(snapshot, "_serialize", corrupting)
    with pytest.raises(SelectionStoreError) as caught:
        await store.update(S2, lambda s: s)
    assert (caught.value.status, caught.value.code) == (500, "SESSION_SELECTION_VALIDATION_FAILED")

    def over_long_key(change: Any) -> bytes:
        return real(change).replace(f'"{S1}"'.encode(), b'"' + b"k" * 300 + b'"')

    monkeypatch.setattr(snapshot, "_serialize", over_long_key)
    with pytest.raises(SelectionStoreError):
        await store.update(S1, lambda s: s)
    assert store.session_ids() == [S1] and store.get(S1).preset_id == "p"
    assert disk(tmp_path) == raw


async def test_a_file_over_a_lowered_cap_loads_whole_and_only_refuses_new_sessions(
    tmp_path: Path,
) -> None:
    store = await opened(tmp_path)
    await store.set_many({f"s-{i}": Selection() for i in range(4)})
    smaller = await opened(tmp_path, max_sessions=2)
    assert len(smaller) == 4  # nothing dropped on read
    await smaller.update("s-0", lambda s: msgspec.structs.replace(s, user_id="u"))
    with pytest.raises(SelectionStoreError) as caught:
        await smaller.ensure("s-9", Selection())
    assert caught.value.code == "SESSION_SELECTION_LIMIT_REACHED"
