"""The in-memory timeline -> sessions index behind the card-binding conflict check answers what a
full scan of every timeline answers, through random writes made through the workspace and
outside it, and reads only the timelines that changed."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

from innkeeper_tavern.features.play.errors import PlayError
from innkeeper_tavern.features.play.session_index import TimelineSessionIndex
from innkeeper_tavern.features.play.tree import session_ids
from innkeeper_tavern.features.play.workspace import Binding, PlayWorkspace

PATHS = [f"card-{i}/playthrough-{i}/timeline.json" for i in range(6)]


def timeline(sessions: list[str]) -> str:
    nodes = [
        {
            "id": f"n{i}",
            "kind": "qa",
            "adoptedVariantId": f"v{i}",
            "variants": [{"id": f"v{i}", "sessionId": sid, "startEventId": 1, "endEventId": 2}],
        }
        for i, sid in enumerate(sessions)
    ]
    return json.dumps({"nodes": nodes}, indent=2)


def workspace(tmp_path: Path) -> PlayWorkspace:
    root = tmp_path / "root"
    root.mkdir()
    ws = PlayWorkspace(tmp_path, lambda: None, clock=lambda: "t")
    ws.binding = Binding(root_path=str(root), workspace_id="w", bound_at="t", first_selected_at="t")
    return ws


async def full_scan(ws: PlayWorkspace, paths: list[str]) -> dict[str, frozenset[str]]:
    found: dict[str, frozenset[str]] = {}
    for path in paths:
        try:
            read = await ws.read_optional(path)
        except PlayError:
            read = None
        doc = None if read is None else read.document
        found[path] = frozenset(session_ids(doc)) if doc is not None else frozenset()
    return found


async def test_the_index_matches_a_full_scan_through_random_writes(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    root = Path(ws.require().root_path)
    index = TimelineSessionIndex(ws.leases)
    reads: list[str] = []

    async def read(path: str) -> dict[str, Any] | None:
        reads.append(path)
        try:
            found = await ws.read_optional(path)
        except PlayError:
            return None
        return None if found is None else found.document

    rng = random.Random(17)
    sessions = [f"s-{i}" for i in range(12)]
    for step in range(300):
        path = rng.choice(PATHS)
        target = root / path
        action = rng.randrange(5)
        if action in (0, 1):  # through the workspace (bumps the document's lease token)
            try:
                current = await ws.read_optional(path)
            except PlayError:
                current = None  # broken outside: a managed write needs a readable revision
            if current is not None or not target.exists():
                text = timeline(rng.sample(sessions, rng.randrange(1, 5)))
                revision = current.revision if current is not None else None
                await ws.write(path, text, expected=revision)
        elif action == 2:  # an editor outside Innkeeper: new file renamed over the old one
            target.parent.mkdir(parents=True, exist_ok=True)
            temp = target.with_name(f".edit-{step}")
            temp.write_text(timeline(rng.sample(sessions, rng.randrange(1, 5))), "utf-8")
            os.replace(temp, target)
        elif action == 3 and target.exists():  # deleted, or broken, outside Innkeeper
            if rng.random() < 0.5:
                target.unlink()
            else:
                target.write_text("{not json" + "x" * step, "utf-8")
        listed = rng.sample(PATHS, rng.randrange(1, len(PATHS) + 1))
        reads.clear()
        assert await index.sessions(str(root), listed, read) == await full_scan(ws, listed)
        # Asking again without a write reads nothing.
        reads.clear()
        assert await index.sessions(str(root), listed, read) == await full_scan(ws, listed)
        assert reads == []


async def test_a_write_rereads_only_that_timeline(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    root = ws.require().root_path
    for i, path in enumerate(PATHS):
        await ws.write(path, timeline([f"s-{i}"]), expected=None)
    index = TimelineSessionIndex(ws.leases)
    reads: list[str] = []

    async def read(path: str) -> dict[str, Any] | None:
        reads.append(path)
        found = await ws.read_optional(path)
        return None if found is None else found.document

    await index.sessions(root, PATHS, read)
    assert sorted(reads) == sorted(PATHS)
    reads.clear()
    current = await ws.read_optional(PATHS[2])
    assert current is not None
    await ws.write(PATHS[2], timeline(["s-2", "s-9"]), expected=current.revision)
    found = await index.sessions(root, PATHS, read)
    assert reads == [PATHS[2]] and found[PATHS[2]] == {"s-2", "s-9"}
