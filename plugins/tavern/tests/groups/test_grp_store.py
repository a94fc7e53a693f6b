"""The group store on its own: limits, failed writes, reload, corrupt and newer files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from innkeeper_tavern.pure.groups.model import GroupError
from innkeeper_tavern.state.groups.store import GroupStore


def _store(root: Path, **kwargs: object) -> GroupStore:
    return GroupStore(root, known_character=lambda cid: cid.startswith("card"), **kwargs)  # type: ignore[arg-type]


async def test_limits_and_reload(tmp_path: Path) -> None:
    store = _store(tmp_path, max_groups=2)
    await store.open()
    first = await store.create({"name": "A", "members": [{"characterId": "card1"}]})
    await store.create({"name": "B"})
    with pytest.raises(GroupError) as full:
        await store.create({"name": "C"})
    assert (full.value.status, full.value.code) == (409, "GROUP_LIMIT_REACHED")
    again = _store(tmp_path)
    await again.open()
    assert [g.name for g in again.groups()] == ["A", "B"]
    assert again.get(first.id) == first


async def test_byte_limit_is_413_and_changes_nothing(tmp_path: Path) -> None:
    store = _store(tmp_path, max_state_bytes=2000)
    await store.open()
    group = await store.create({"name": "A"})
    with pytest.raises(GroupError) as big:
        await store.update(group.id, {"revision": 1, "joinPrefix": "p" * 5000})
    assert (big.value.status, big.value.code) == (413, "GROUP_STORAGE_LIMIT_REACHED")
    assert store.get(group.id).join_prefix == ""


async def test_a_failed_write_changes_nothing(tmp_path: Path) -> None:
    def refuse(path: Path, data: bytes) -> None:
        raise OSError("disk full")

    store = _store(tmp_path)
    await store.open()
    group = await store.create({"name": "A"})
    store.writer = refuse
    with pytest.raises(GroupError) as failed:
        await store.update(group.id, {"revision": 1, "name": "B"})
    assert (failed.value.status, failed.value.code) == (500, "GROUP_WRITE_FAILED")
    assert store.get(group.id).name == "A"
    assert json.loads((tmp_path / "groups.json").read_text())["groups"][0]["name"] == "A"


async def test_corrupt_file_is_moved_aside_and_newer_schema_is_refused(tmp_path: Path) -> None:
    (tmp_path / "groups.json").write_text("{not json")
    store = _store(tmp_path)
    await store.open()
    assert store.groups() == []
    assert (tmp_path / "groups.json.corrupt").read_text() == "{not json"
    (tmp_path / "groups.json").write_text(json.dumps({"schemaVersion": 9, "groups": []}))
    with pytest.raises(GroupError) as newer:
        await _store(tmp_path).open()
    assert newer.value.code == "GROUPS_FILE_UNSUPPORTED"
    assert json.loads((tmp_path / "groups.json").read_text())["schemaVersion"] == 9
