"""The path jail: escapes, links planted at every depth and a directory swapped mid-write."""

from __future__ import annotations

import urllib.parse
from pathlib import Path

import pytest
from play_harness import Play

from innkeeper_tavern.features.play.errors import PlayError
from innkeeper_tavern.features.play.paths import Jail, split_relative

ESCAPES = [
    ("../outside.txt", 403, "PLAY_PATH_ESCAPE"),
    ("a/../../outside.txt", 403, "PLAY_PATH_ESCAPE"),
    ("a\\..\\..\\outside.txt", 403, "PLAY_PATH_ESCAPE"),
    ("/etc/passwd", 403, "PLAY_PATH_ESCAPE"),
    ("\\\\server\\share\\x", 403, "PLAY_PATH_ESCAPE"),
    ("C:\\Windows\\x", 403, "PLAY_PATH_ESCAPE"),
    ("C:/x", 403, "PLAY_PATH_ESCAPE"),
    ("a\x00b", 400, "PLAY_PATH_INVALID"),
    ("   ", 400, "PLAY_PATH_INVALID"),
    ("x" * 513, 400, "PLAY_PATH_INVALID"),
    ("./.", 400, "PLAY_PATH_INVALID"),
    ("a/CATALOG.JSON", 400, "PLAY_PATH_INVALID"),
    ("Timeline.json", 400, "PLAY_PATH_INVALID"),
]


def outside_snapshot(base: Path, root: Path) -> set[str]:
    return {
        str(p)
        for p in base.rglob("*")
        if root not in p.parents and p != root and "innkeeper-data" not in p.parts
    }


@pytest.mark.parametrize(("path", "status", "code"), ESCAPES)
async def test_escapes_are_refused_with_their_code(
    play: Play, tmp_path: Path, path: str, status: int, code: str
) -> None:
    await play.bind()
    (tmp_path / "outside.txt").write_text("secret")
    before = outside_snapshot(tmp_path, play.root)
    q = urllib.parse.quote(path, safe="")
    for method, url, body in (
        ("GET", f"/workspace/files?path={q}", None),
        ("PUT", f"/workspace/files?path={q}", {"content": "x", "expectedRevision": None}),
        ("POST", "/workspace/dirs", {"path": path}),
    ):
        got, answer = await play.raw(method, url, body)
        assert (got, answer["code"]) == (status, code), (method, path, answer)
        assert "secret" not in str(answer)
    assert outside_snapshot(tmp_path, play.root) == before
    assert (tmp_path / "outside.txt").read_text() == "secret"


async def test_encoded_dots_stay_inside(play: Play, tmp_path: Path) -> None:
    await play.bind()
    # A double-encoded "..": after the one URL decoding it is a literal segment name.
    await play.v2("PUT", "/workspace/files?path=%252e%252e%2Fx.txt", {"content": "in"})
    assert (play.root / "%2e%2e" / "x.txt").read_text() == "in"
    assert not (tmp_path / "x.txt").exists()


@pytest.mark.parametrize("depth", [0, 1, 2])
@pytest.mark.parametrize("kind", ["file", "directory"])
async def test_links_planted_at_every_depth(
    play: Play, tmp_path: Path, depth: int, kind: str
) -> None:
    await play.bind()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "timeline.json").write_text('{"nodes": []}')
    (outside / "f.txt").write_text("secret")
    parent = play.root.joinpath(*[f"d{i}" for i in range(depth)])
    parent.mkdir(parents=True, exist_ok=True)
    prefix = "/".join(f"d{i}" for i in range(depth))
    join = (prefix + "/") if prefix else ""
    if kind == "file":
        (parent / "f.txt").symlink_to(outside / "f.txt")
        targets = [f"{join}f.txt"]
    else:
        (parent / "sub").symlink_to(outside, target_is_directory=True)
        targets = [f"{join}sub/f.txt", f"{join}sub/timeline.json", f"{join}sub/new.txt"]
    for target in targets:
        q = urllib.parse.quote(target, safe="")
        status, body = await play.raw("GET", f"/workspace/files?path={q}")
        assert (status, body["code"]) == (403, "PLAY_PATH_LINK"), target
        status, body = await play.raw(
            "PUT", f"/workspace/files?path={q}", {"content": "pwn", "expectedRevision": None}
        )
        assert (status, body["code"]) == (403, "PLAY_PATH_LINK"), target
    if kind == "directory":
        status, body = await play.raw("POST", "/workspace/dirs", {"path": f"{join}sub/x"})
        assert (status, body["code"]) == (403, "PLAY_PATH_LINK")
        status, body = await play.raw("GET", f"/workspace/files?list={join}sub")
        assert (status, body["code"]) == (403, "PLAY_PATH_LINK")
    assert (outside / "f.txt").read_text() == "secret"
    assert sorted(p.name for p in outside.iterdir()) == ["f.txt", "timeline.json"]


async def test_a_file_in_the_way_is_a_conflict(play: Play) -> None:
    await play.bind()
    (play.root / "a").write_text("file")
    status, body = await play.raw("POST", "/workspace/dirs", {"path": "a/b"})
    assert (status, body["code"]) == (409, "PLAY_PATH_CONFLICT")
    status, body = await play.raw("PUT", "/workspace/files?path=a/b.txt", {"content": "x"})
    assert (status, body["code"]) == (409, "PLAY_PATH_CONFLICT")
    (play.root / "d").mkdir()
    status, body = await play.raw("PUT", "/workspace/files?path=d", {"content": "x"})
    assert (status, body["code"]) == (409, "PLAY_PATH_CONFLICT")


def test_directory_swapped_for_a_link_between_check_and_rename(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "a" / "b").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    jail = Jail(str(root))
    for swapped in ("a", "a/b"):
        segments = split_relative("a/b/x.txt")
        opened = jail.open_parent(segments, create=False)
        try:
            # Between the walk and the publishing rename, swap a checked directory for a link.
            real = root / swapped
            real.rename(root / "moved")
            real.symlink_to(outside, target_is_directory=True)
            with pytest.raises(PlayError) as caught:
                jail.write_at(segments, opened, b"pwn")
            assert caught.value.code == "PLAY_PATH_RACE"
        finally:
            opened.close()
            (root / swapped).unlink()
            (root / "moved").rename(root / swapped)
    assert list(outside.iterdir()) == []
    assert not list(root.rglob("x.txt"))
    assert not [p for p in root.rglob("*.tmp")]


def test_descriptor_walk_never_follows_a_late_link(tmp_path: Path) -> None:
    """Even without the recheck, a write through the opened parent lands inside the root."""
    root = tmp_path / "root"
    (root / "a").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    jail = Jail(str(root))
    segments = split_relative("a/x.txt")
    opened = jail.open_parent(segments, create=False)
    try:
        (root / "a").rename(root / "kept")
        (root / "a").symlink_to(outside, target_is_directory=True)
        jail.recheck = lambda *_: None  # type: ignore[method-assign]
        jail.write_at(segments, opened, b"in")
    finally:
        opened.close()
    assert (root / "kept" / "x.txt").read_bytes() == b"in"
    assert list(outside.iterdir()) == []


async def test_overlong_segment_is_invalid(play: Play) -> None:
    await play.bind()
    long = "a" * 300
    for method, url, body in (
        ("GET", f"/workspace/files?path={long}", None),
        ("PUT", f"/workspace/files?path={long}/x.txt", {"content": "x"}),
        ("POST", "/workspace/dirs", {"path": long}),
    ):
        status, answer = await play.raw(method, url, body)
        assert (status, answer["code"]) == (400, "PLAY_PATH_INVALID"), (method, answer)
