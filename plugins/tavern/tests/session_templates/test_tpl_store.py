"""SessionTemplateStore: persistence, limits, failure atomicity and tolerant loading."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
from pathlib import Path

import pytest

from innkeeper_tavern.state.resources import atomic
from innkeeper_tavern.state.session_bindings.model import RpState, Selection
from innkeeper_tavern.state.session_templates.errors import (
    SESSION_TEMPLATE_FILE_TOO_LARGE,
    SESSION_TEMPLATE_LIMIT_REACHED,
    SESSION_TEMPLATE_NOT_FOUND,
    SESSION_TEMPLATE_SCHEMA_UNSUPPORTED,
    SESSION_TEMPLATE_STORAGE_LIMIT_REACHED,
    SESSION_TEMPLATE_WRITE_FAILED,
    TemplateError,
)
from innkeeper_tavern.state.session_templates.store import (
    HARD_MAX_TEMPLATES,
    MAX_READ_BYTES,
    TEMPLATES_FILE,
    SessionTemplateStore,
)


def make_store(root: Path, **kwargs: object) -> SessionTemplateStore:
    counter = itertools.count(1)
    ticks = itertools.count(1)
    return SessionTemplateStore(
        root,
        ids=lambda: f"session-template-{next(counter)}",
        clock=lambda: f"2026-01-01T00:00:{next(ticks):02d}.000Z",
        **kwargs,  # type: ignore[arg-type]
    )


async def opened(root: Path, **kwargs: object) -> SessionTemplateStore:
    store = make_store(root, **kwargs)
    await store.open()
    return store


SEL = Selection(preset_id="preset-1", world_book_ids=("b", "a"), rp=RpState(active=True))


async def test_create_update_select_delete_persist(tmp_path: Path) -> None:
    store = await opened(tmp_path)
    first = await store.create("First", SEL)
    second = await store.create("Second", Selection(), select=False)
    assert store.selected_id == first.id
    assert [t.id for t in store.templates()] == [first.id, second.id]

    renamed = await store.update(first.id, name="  Renamed ")
    assert renamed.name == "Renamed" and renamed.selection == SEL
    assert renamed.created_at == first.created_at and renamed.updated_at != first.updated_at
    replaced = await store.update(first.id, selection=Selection(user_id="user-1"))
    assert replaced.selection == Selection(user_id="user-1")

    doc = json.loads((tmp_path / TEMPLATES_FILE).read_text())
    assert doc["schemaVersion"] == 1 and doc["selectedId"] == first.id
    assert doc["templates"][0]["selection"]["userId"] == "user-1"
    assert set(doc["templates"][0]) == {"id", "name", "selection", "createdAt", "updatedAt"}

    again = await opened(tmp_path)
    assert again.templates() == store.templates() and again.selected_id == first.id

    def selected() -> str | None:  # a call, so mypy does not narrow across awaits
        return store.selected_id

    await store.select(second.id)
    assert selected() == second.id
    await store.delete(second.id)  # deleting the selected template clears the selection
    assert [t.id for t in store.templates()] == [first.id] and selected() is None
    assert (await store.select(first.id)) == store.templates()[0]
    assert (await store.select(None)) is None and selected() is None
    with pytest.raises(TemplateError) as info:
        store.get(second.id)
    assert info.value.status == 404 and info.value.code == SESSION_TEMPLATE_NOT_FOUND
    with pytest.raises(TemplateError):
        await store.select("nope")
    with pytest.raises(TemplateError):
        store.get("../etc/passwd")


async def test_count_limit_is_409_and_nothing_is_written(tmp_path: Path) -> None:
    store = await opened(tmp_path, max_templates=2)
    await store.create("a", Selection())
    await store.create("b", Selection())
    before = (tmp_path / TEMPLATES_FILE).read_bytes()
    with pytest.raises(TemplateError) as info:
        await store.create("c", Selection())
    assert (info.value.status, info.value.code) == (409, SESSION_TEMPLATE_LIMIT_REACHED)
    assert len(store) == 2 and (tmp_path / TEMPLATES_FILE).read_bytes() == before
    with pytest.raises(ValueError, match="max_templates"):
        SessionTemplateStore(tmp_path, max_templates=HARD_MAX_TEMPLATES + 1)


async def test_storage_limit_is_413_and_an_oversized_state_may_shrink(tmp_path: Path) -> None:
    big = Selection(world_book_ids=tuple(f"world-book-{i:03d}-{'x' * 150}" for i in range(100)))
    store = await opened(tmp_path)
    await store.create("big", big)
    await store.create("small", Selection())
    size = store.state_bytes
    # A lower limit (an option lowered between starts) keeps the state but refuses growth.
    limited = await opened(tmp_path, max_state_bytes=size - 100)
    with pytest.raises(TemplateError) as info:
        await limited.create("more", Selection())
    assert (info.value.status, info.value.code) == (413, SESSION_TEMPLATE_STORAGE_LIMIT_REACHED)
    assert len(limited) == 2
    await limited.delete(limited.templates()[0].id)  # shrinking is always allowed
    assert len(limited) == 1


async def test_failed_write_changes_nothing(tmp_path: Path) -> None:
    store = await opened(tmp_path)
    kept = await store.create("kept", SEL)
    before = (tmp_path / TEMPLATES_FILE).read_bytes()

    def broken(path: Path, data: bytes) -> None:
        raise OSError("disk full")

    store.writer = broken
    for attempt in (
        store.create("new", Selection()),
        store.update(kept.id, name="changed"),
        store.delete(kept.id),
        store.select(None),
    ):
        with pytest.raises(TemplateError) as info:
            await attempt
        assert (info.value.status, info.value.code) == (500, SESSION_TEMPLATE_WRITE_FAILED)
    assert store.templates() == [kept] and store.selected_id == kept.id
    assert (tmp_path / TEMPLATES_FILE).read_bytes() == before


async def test_real_atomic_write_failure_leaves_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await opened(tmp_path)
    await store.create("kept", Selection())

    def fail(source: Path, target: Path) -> None:
        raise OSError("rename refused")

    monkeypatch.setattr(atomic, "_replace", fail)
    with pytest.raises(TemplateError):
        await store.create("lost", Selection())
    assert sorted(os.listdir(tmp_path)) == [TEMPLATES_FILE]
    assert [t.name for t in store.templates()] == ["kept"]


async def test_file_too_large_or_newer_schema_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / TEMPLATES_FILE
    path.write_bytes(b" " * (MAX_READ_BYTES + 1))
    with pytest.raises(TemplateError) as info:
        await opened(tmp_path)
    assert info.value.code == SESSION_TEMPLATE_FILE_TOO_LARGE
    newer = b'{"schemaVersion": 2, "selectedId": null, "templates": []}'
    path.write_bytes(newer)
    with pytest.raises(TemplateError) as info:
        await opened(tmp_path)
    assert info.value.code == SESSION_TEMPLATE_SCHEMA_UNSUPPORTED
    assert path.read_bytes() == newer


async def test_unreadable_file_is_moved_aside(tmp_path: Path) -> None:
    path = tmp_path / TEMPLATES_FILE
    path.write_bytes(b"{not json")
    store = await opened(tmp_path)
    assert len(store) == 0 and not path.exists()
    assert (tmp_path / (TEMPLATES_FILE + ".corrupt")).read_bytes() == b"{not json"


async def test_bad_entries_are_skipped_and_the_original_is_kept(tmp_path: Path) -> None:
    path = tmp_path / TEMPLATES_FILE
    original = json.dumps(
        {
            "schemaVersion": 1,
            "selectedId": "gone",
            "templates": [
                {
                    "id": "t1",
                    "name": " Good ",
                    # lenient read: bad values take defaults, unknown options are dropped
                    "selection": {"presetId": "", "character": {"x": 1, "greetingIndex": 1}},
                    "createdAt": "garbage",
                },
                {"id": "t1", "name": "duplicate"},
                {"id": "../x", "name": "bad id"},
                {"id": "t3", "name": ""},
                "not an object",
            ],
        }
    ).encode()
    path.write_bytes(original)
    store = await opened(tmp_path)
    [good] = store.templates()
    assert good.id == "t1" and good.name == "Good"
    assert good.selection.preset_id is None and good.selection.character.greeting_index == 1
    assert good.created_at == good.updated_at  # invalid timestamps fall back to the clock
    assert store.selected_id is None
    assert (tmp_path / (TEMPLATES_FILE + ".corrupt")).read_bytes() == original


async def test_concurrent_writes_never_lose_each_other(tmp_path: Path) -> None:
    store = await opened(tmp_path)
    seed = await store.create("seed", Selection())
    await asyncio.gather(
        *(store.create(f"t{i}", Selection(), select=False) for i in range(20)),
        store.update(seed.id, name="renamed"),
    )
    again = await opened(tmp_path)
    assert len(again) == 21 and again.get(seed.id).name == "renamed"
    assert again.selected_id == seed.id
