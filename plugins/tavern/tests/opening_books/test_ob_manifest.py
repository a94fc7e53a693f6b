"""The opening manifest: one format read by the rendering cache and the opening books; literal,
bounded data only; an extra file through ``openingManifestPath``."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from book_harness import Books, sha

from innkeeper_core.testing import start_test_host
from innkeeper_tavern.features.opening_books.manifest import (
    ManifestError,
    load_manifest,
    parse_manifest,
)

TEXT = "// my own opening snapshot (never executed)\n"
URL = "https://example.invalid/mine.js"


def snapshot_entry(**openings: Any) -> dict[str, Any]:
    data = TEXT.encode()
    entry: dict[str, Any] = {"url": URL, "sha256": hashlib.sha256(data).hexdigest()}
    entry["size"] = len(data)
    if openings:
        entry["openings"] = openings
    return entry


def manifest(*snapshots: dict[str, Any]) -> dict[str, Any]:
    return {"version": 1, "snapshots": list(snapshots)}


def test_the_shipped_manifest_lists_the_test_snapshots() -> None:
    shipped = load_manifest()
    urls = {s.url for s in shipped.snapshots.values()}
    assert "https://innkeeper.invalid/rendering-cache/opening-test.js" in urls
    lantern = [s for s in shipped.snapshots.values() if s.family == "lantern-inn"]
    assert len(lantern) == 2
    primary = next(s for s in lantern if s.openings)
    assert {k: len(v.entries) for k, v in primary.openings.items()} == {
        "default": 0,
        "cellar": 3,
        "rooftop": 2,
    }
    assert primary.openings["default"].skip is True


ENTRY = {"uid": 0, "content": "c", "key": ["k"]}
BAD: list[tuple[str, Any]] = [
    ("unknown top key", {"version": 1, "snapshots": [], "x": 1}),
    ("version", {"version": 2, "snapshots": []}),
    ("snapshot field", manifest({**snapshot_entry(), "script": "run()"})),
    ("sha case", manifest({**snapshot_entry(), "sha256": "A" * 64})),
    ("size type", manifest({**snapshot_entry(), "size": "3"})),
    ("duplicate", manifest(snapshot_entry(), snapshot_entry())),
    ("skip and entries", manifest(snapshot_entry(a={"skip": True, "entries": [ENTRY]}))),
    ("skip false", manifest(snapshot_entry(a={"skip": False}))),
    ("no entries", manifest(snapshot_entry(a={"entries": []}))),
    ("entry field", manifest(snapshot_entry(a={"entries": [{**ENTRY, "script": "x"}]}))),
    ("expression", manifest(snapshot_entry(a={"entries": [{**ENTRY, "content": {"$": 1}}]}))),
    ("missing content", manifest(snapshot_entry(a={"entries": [{"uid": 0}]}))),
    ("duplicate uid", manifest(snapshot_entry(a={"entries": [ENTRY, ENTRY]}))),
    ("corrected value", manifest(snapshot_entry(a={"entries": [{**ENTRY, "position": 99}]}))),
    ("opening id", manifest(snapshot_entry(**{"bad id": {"skip": True}}))),
    ("too big", manifest(snapshot_entry(a={"entries": [{**ENTRY, "content": "x" * 40000}]}))),
]


@pytest.mark.parametrize(("name", "doc"), BAD)
def test_a_malformed_manifest_is_rejected(name: str, doc: Any) -> None:
    with pytest.raises(ManifestError):
        parse_manifest(doc)


def test_an_extra_manifest_is_merged(tmp_path: Path) -> None:
    extra = tmp_path / "mine.json"
    extra.write_text(json.dumps(manifest(snapshot_entry(intro={"entries": [ENTRY]}))))
    merged = load_manifest(extra)
    found = merged.find(URL, sha(TEXT), len(TEXT.encode()))
    assert found is not None and list(found.openings) == ["intro"]
    assert len(merged.snapshots) == len(load_manifest().snapshots) + 1
    with pytest.raises(ManifestError):
        load_manifest(tmp_path / "absent.json")


async def test_the_configured_manifest_serves_both_features(
    start_books: Any, tmp_path: Path
) -> None:
    extra = tmp_path / "mine.json"
    opening = {"entries": [{"uid": 4, "content": "The inn's own ghost.", "key": ["ghost"]}]}
    extra.write_text(json.dumps(manifest(snapshot_entry(intro=opening))))
    _, books = await start_books(
        tmp_path / "data", plugins={"tavern": {"openingManifestPath": str(extra)}}
    )
    assert isinstance(books, Books)
    # The rendering cache accepts the configured snapshot as its opening.
    content = {"url": URL, "content": TEXT, "downloadedAt": 1}
    assert (await books.v1("PUT", "/rendering-cache/opening", {"content": content}))["ok"]
    # The opening books take the configured opening's literal entries.
    session, card = await books.bound()
    body = books.prepare_body(session, card, "intro")
    body["identitySource"] = {"url": URL, "sha256": sha(TEXT), "content": TEXT}
    body["sourceIdentity"]["identitySha256"] = sha(TEXT)
    proposal = await books.prepare(session, body)
    assert proposal["entries"] == opening["entries"]


async def test_a_bad_configured_manifest_fails_the_load(tmp_path: Path) -> None:
    extra = tmp_path / "bad.json"
    extra.write_text(json.dumps(manifest({**snapshot_entry(), "script": "x"})))
    config = {"tavern": {"openingManifestPath": str(extra)}}
    host = await start_test_host(tmp_path / "data", plugins=config)
    try:
        status = await host.load("tavern", "innkeeper_tavern.plugin")
        assert status["state"] == "failed"
        assert "opening manifest" in str(status["lastError"])
        assert "snapshots[0].script" in str(status["lastError"])
    finally:
        await host.close()
