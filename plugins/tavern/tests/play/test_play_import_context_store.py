"""The import-context bindings on disk: one file per session (a bind writes only its own file,
so the number of imported playthroughs is not bounded by one file's size), the original's single
``import-context-bindings.json`` split once at start, a bad file costing only its own binding."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, cast

import msgspec
import pytest

from innkeeper_tavern.features.play import import_context
from innkeeper_tavern.features.play.errors import PlayError
from innkeeper_tavern.features.play.import_context import (
    BINDINGS_DIR,
    LEGACY_BINDINGS_FILE,
    Binding,
    ImportContexts,
    binding_file_name,
)


def store(root: Path) -> ImportContexts:
    none = cast(Any, None)  # loading and saving bindings use none of the collaborators
    return ImportContexts(
        root, none, selections=none, resources=none, logger=logging.getLogger("test")
    )


def binding(n: int) -> Binding:
    return Binding(path=f"p{n}/import-context.json", hash=f"{n:064x}", qa_count=n, characters=n)


async def test_the_original_single_file_is_split_once_and_removed(tmp_path: Path) -> None:
    legacy = {
        "schemaVersion": 1,
        "sessions": {
            "s/1": msgspec.to_builtins(binding(1)),
            "s2": {**msgspec.to_builtins(binding(2)), "state": "consumed"},
        },
    }
    (tmp_path / LEGACY_BINDINGS_FILE).write_text(json.dumps(legacy))
    first = store(tmp_path)
    await first.open()
    assert not (tmp_path / LEGACY_BINDINGS_FILE).exists()
    names = sorted(p.name for p in (tmp_path / BINDINGS_DIR).iterdir())
    assert names == sorted([binding_file_name("s/1"), binding_file_name("s2")])
    again = store(tmp_path)  # a restart reads the split files
    await again.open()
    assert again.binding("s/1") == binding(1)
    second = again.binding("s2")
    assert second is not None and second.state == "consumed" and second.qa_count == 2


async def test_a_bind_writes_only_its_own_file_and_an_unbind_removes_it(tmp_path: Path) -> None:
    contexts = store(tmp_path)
    await contexts.open()
    for n in range(3):
        await contexts._set(f"s{n}", binding(n))
    folder = tmp_path / BINDINGS_DIR
    before = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    await contexts._set("s1", Binding(**{**msgspec.structs.asdict(binding(1)), "state": "claimed"}))
    after = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    changed = [name for name in before if before[name] != after[name]]
    assert changed == [binding_file_name("s1")]
    await contexts._set("s0", None)
    assert not (folder / binding_file_name("s0")).exists()
    restarted = store(tmp_path)
    await restarted.open()
    assert restarted.binding("s0") is None
    claimed = restarted.binding("s1")
    assert claimed is not None and claimed.state == "claimed"
    assert restarted.binding("s2") == binding(2)


async def test_the_count_limit_refuses_a_new_binding_and_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(import_context, "MAX_BINDINGS", 2)
    contexts = store(tmp_path)
    await contexts.open()
    await contexts._set("a", binding(1))
    await contexts._set("b", binding(2))
    with pytest.raises(PlayError) as refused:
        await contexts._set("c", binding(3))
    assert (refused.value.status, refused.value.code) == (413, "PLAY_STORAGE_LIMIT")
    assert contexts.binding("c") is None
    assert len(list((tmp_path / BINDINGS_DIR).iterdir())) == 2
    await contexts._set("a", binding(4))  # an existing session's binding may still change
    assert contexts.binding("a") == binding(4)


async def test_a_bad_file_costs_only_its_own_binding(tmp_path: Path) -> None:
    contexts = store(tmp_path)
    await contexts.open()
    await contexts._set("good", binding(1))
    await contexts._set("moved", binding(2))
    folder = tmp_path / BINDINGS_DIR
    (folder / binding_file_name("bad")).write_text("{not json")
    moved = folder / binding_file_name("moved")
    moved.rename(folder / binding_file_name("elsewhere"))  # names another session's file
    restarted = store(tmp_path)
    await restarted.open()
    assert restarted.binding("good") == binding(1)
    assert restarted.binding("bad") is None and restarted.binding("moved") is None
    assert restarted.binding("elsewhere") is None
