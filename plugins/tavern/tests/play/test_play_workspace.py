"""Workspace binding, files, managed documents and revision/CAS over real HTTP."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path

from play_harness import Play

EMPTY_TIMELINE = '{"nodes": []}\n'


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def exists(path: str) -> bool:
    return Path(path).exists()


def put_in_the_way(path: str, *, file: bool = False, link_to: Path | None = None) -> None:
    """A file (or a symlink to ``link_to``) where the default play folder would be created."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists() or target.is_symlink():
        target.unlink()
    if file:
        target.write_text("not a folder")
    if link_to is not None:
        target.symlink_to(link_to)


def catalog(*rows: dict[str, object]) -> str:
    return json.dumps({"playthroughs": list(rows)}, indent=2) + "\n"


async def test_unbound_workspace_reads_409_and_bind_reports_warnings(play: Play) -> None:
    view = await play.v2("GET", "/workspace")
    assert view["selected"] is False and view["contractVersion"] == 1
    assert view["defaultRootPath"].endswith("/plugins/tavern/play-workspace")
    # A read never binds (a GET changes nothing): the default folder is not even created.
    status, body = await play.raw("GET", "/workspace/files?path=a.txt")
    assert (status, body["code"]) == (409, "PLAY_WORKSPACE_UNBOUND")
    assert not exists(view["defaultRootPath"])
    bound = await play.bind()
    assert bound["selected"] is True and "SWIPE_DISK" in bound["warnings"]
    assert json.loads(bound["workspaceScope"]) == [bound["workspaceId"], str(play.root)]
    again = await play.v2("GET", "/workspace")
    assert again["rootPath"] == str(play.root) and again["previousRoots"] == []


async def test_first_write_binds_the_default_folder(play: Play) -> None:
    default = Path((await play.v2("GET", "/workspace"))["defaultRootPath"])
    made = await play.v2("POST", "/workspace/dirs", {"path": "ada"}, 201)
    assert made["created"] is True and (default / "ada").is_dir()
    view = await play.v2("GET", "/workspace")
    assert view["selected"] is True and view["rootPath"] == str(default)
    # Bound like PUT /workspace: a host workspace, and the binding survives as the file.
    await play.write("ada/notes.txt", "kept")
    assert (default / "ada" / "notes.txt").read_text() == "kept"


async def test_default_folder_in_the_way_is_refused_not_replaced(play: Play) -> None:
    default = (await play.v2("GET", "/workspace"))["defaultRootPath"]
    put_in_the_way(default, file=True)
    status, body = await play.raw("POST", "/workspace/dirs", {"path": "ada"})
    assert (status, body["code"]) == (409, "PLAY_WORKSPACE_INVALID")
    assert Path(default).read_text() == "not a folder"  # noqa: ASYNC240
    put_in_the_way(default, link_to=play.root)
    status, body = await play.raw("POST", "/workspace/dirs", {"path": "ada"})
    assert (status, body["code"]) == (403, "PLAY_PATH_LINK")
    assert (await play.v2("GET", "/workspace"))["selected"] is False


async def test_moving_the_folder_lists_the_old_playthroughs_where_they_are(
    play: Play, tmp_path: Path
) -> None:
    await play.bind()
    row = {
        "id": "playthrough-1",
        "path": "ada/playthrough-1/timeline.json",
        "ext": {"pmpDshTavern": {"characterId": "ada", "characterName": "Ada",
                                  "playthroughNumber": 1}},
    }  # fmt: skip
    await play.write("ada/playthrough-1/timeline.json", EMPTY_TIMELINE, expectedRevision=None)
    await play.write("catalog.json", catalog(row), expectedRevision=None)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    moved = await play.v2("PUT", "/workspace", {"path": str(elsewhere)})
    assert moved["rootPath"] == str(elsewhere)
    assert [r["rootPath"] for r in moved["previousRoots"]] == [str(play.root)]
    previous = (await play.v2("GET", "/workspace/previous"))["roots"]
    assert [(r["rootPath"], r["status"]) for r in previous] == [(str(play.root), "ok")]
    assert previous[0]["playthroughs"] == [
        {"id": "playthrough-1", "path": "ada/playthrough-1/timeline.json", "title": None,
         "characterId": "ada", "characterName": "Ada", "playthroughNumber": 1,
         "archived": False}
    ]  # fmt: skip
    # Nothing moved: the old folder is untouched, and binding it again opens its catalog.
    assert json.loads((play.root / "catalog.json").read_text())["playthroughs"][0]["id"] == (
        "playthrough-1"
    )
    back = await play.bind()
    assert [r["rootPath"] for r in back["previousRoots"]] == [str(elsewhere)]
    assert (await play.read("catalog.json"))["content"] == catalog(row)
    # A remembered folder that is gone is listed as unavailable, not dropped.
    elsewhere.rmdir()
    gone = (await play.v2("GET", "/workspace/previous"))["roots"]
    assert [(r["status"], r["code"]) for r in gone] == [("unavailable", "PLAY_WORKSPACE_INVALID")]


async def test_bind_never_creates_the_root(play: Play, tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    status, body = await play.raw("PUT", "/workspace", {"path": str(missing)})
    assert (status, body["code"]) == (400, "PLAY_WORKSPACE_INVALID")
    assert not missing.exists()
    link = tmp_path / "link"
    link.symlink_to(play.root)
    status, body = await play.raw("PUT", "/workspace", {"path": str(link)})
    assert (status, body["code"]) == (403, "PLAY_PATH_LINK")


async def test_ordinary_files_and_directories(play: Play) -> None:
    await play.bind()
    made = await play.v2("POST", "/workspace/dirs", {"path": "ada/playthrough-1"}, 201)
    assert made["created"] is True
    again = await play.v2("POST", "/workspace/dirs", {"path": "ada/playthrough-1"})
    assert again["created"] is False
    await play.write("ada/notes.txt", "héllo")
    assert (play.root / "ada" / "notes.txt").read_text() == "héllo"
    read = await play.read("ada/notes.txt")
    assert read["content"] == "héllo" and "revision" not in read
    listing = await play.v2("GET", "/workspace/files?list=ada")
    assert [(e["name"], e["type"]) for e in listing["entries"]] == [
        ("notes.txt", "file"),
        ("playthrough-1", "directory"),
    ]
    root_listing = await play.v2("GET", "/workspace/files?list=")
    assert [e["name"] for e in root_listing["entries"]] == ["ada"]
    status, body = await play.raw("GET", "/workspace/files?path=ada/missing.txt")
    assert (status, body["code"]) == (404, "PLAY_PATH_NOT_FOUND")
    (play.root / "bin.dat").write_bytes(b"\xff\xfe")
    status, body = await play.raw("GET", "/workspace/files?path=bin.dat")
    assert (status, body["code"]) == (400, "PLAY_FILE_NOT_UTF8")


async def test_file_size_limit(play: Play) -> None:
    await play.bind()
    big = "x" * ((1 << 20) + 1)
    status, body = await play.raw("PUT", "/workspace/files?path=big.txt", {"content": big})
    assert (status, body["code"]) == (413, "PLAY_FILE_TOO_LARGE")
    assert not (play.root / "big.txt").exists()
    # Exactly 1 MiB of characters that JSON escapes six-fold still fits the body limit.
    escaped = "\x01" * (1 << 20)
    await play.write("ctrl.txt", escaped)
    assert (play.root / "ctrl.txt").stat().st_size == 1 << 20


async def test_workspace_scope(play: Play) -> None:
    bound = await play.bind()
    scope = bound["workspaceScope"]
    await play.write("a.txt", "1", expectedWorkspaceScope=scope)
    # Parsed values are compared, not bytes.
    spaced = json.dumps(json.loads(scope), indent=1)
    await play.write("a.txt", "2", expectedWorkspaceScope=spaced)
    status, body = await play.raw(
        "PUT", "/workspace/files?path=a.txt", {"content": "3", "expectedWorkspaceScope": 7}
    )
    assert (status, body["code"]) == (400, "PLAY_WORKSPACE_SCOPE_INVALID")
    other = json.dumps(["other", str(play.root)])
    status, body = await play.raw(
        "PUT", "/workspace/files?path=a.txt", {"content": "3", "expectedWorkspaceScope": other}
    )
    assert (status, body["code"]) == (409, "PLAY_WORKSPACE_CHANGED")
    assert (play.root / "a.txt").read_text() == "2"


async def test_managed_documents_need_revisions(play: Play) -> None:
    await play.bind()
    status, body = await play.raw(
        "PUT", "/workspace/files?path=catalog.json", {"content": catalog()}
    )
    assert (status, body["code"]) == (400, "PLAY_FILE_REVISION_REQUIRED")
    status, body = await play.raw(
        "PUT",
        "/workspace/files?path=catalog.json",
        {"content": catalog(), "expectedRevision": "ABC"},
    )
    assert (status, body["code"]) == (400, "PLAY_FILE_REVISION_INVALID")
    created = await play.write("catalog.json", catalog(), expectedRevision=None)
    assert created["revision"] == sha(catalog())
    status, body = await play.raw(
        "PUT",
        "/workspace/files?path=catalog.json",
        {"content": catalog(), "expectedRevision": None},
    )
    assert (status, body["code"]) == (409, "PLAY_FILE_REVISION_CONFLICT")
    read = await play.read("catalog.json")
    assert read["revision"] == created["revision"] and read["content"] == catalog()
    row = {"id": "playthrough-1", "path": "ada/playthrough-1/timeline.json", "title": "P 1"}
    updated = await play.write("catalog.json", catalog(row), expectedRevision=read["revision"])
    status, body = await play.raw(
        "PUT",
        "/workspace/files?path=catalog.json",
        {"content": catalog(), "expectedRevision": read["revision"]},
    )
    assert (status, body["code"]) == (409, "PLAY_FILE_REVISION_CONFLICT")
    assert (play.root / "catalog.json").read_text() == catalog(row)
    assert updated["revision"] == sha(catalog(row))
    # Exact bytes are stored: formatting is the client's.
    compact = json.dumps({"playthroughs": [row]}, separators=(",", ":"))
    done = await play.write("catalog.json", compact, expectedRevision=updated["revision"])
    assert (play.root / "catalog.json").read_text() == compact
    assert done["revision"] == sha(compact)


async def test_invalid_managed_documents_are_refused_unchanged(play: Play) -> None:
    await play.bind()
    await play.write("t/timeline.json", EMPTY_TIMELINE, expectedRevision=None)
    rev = sha(EMPTY_TIMELINE)
    bad = [
        '{"nodes": [], "focusSessionId": "s"}',
        '{"nodes": [{"id": "n", "kind": "greeting", "adoptedVariantId": "v", "variants": []}]}',
        '{"nodes": [], "extra": 1}',
        "not json",
    ]
    for content in bad:
        status, body = await play.raw(
            "PUT",
            "/workspace/files?path=t/timeline.json",
            {"content": content, "expectedRevision": rev},
        )
        assert (status, body["code"]) == (400, "PLAY_TIMELINE_INVALID"), content
    assert (play.root / "t" / "timeline.json").read_text() == EMPTY_TIMELINE
    status, body = await play.raw(
        "PUT",
        "/workspace/files?path=catalog.json",
        {"content": catalog({"id": "../x", "path": "a/timeline.json"}), "expectedRevision": None},
    )
    assert (status, body["code"]) == (400, "PLAY_CATALOG_INVALID")
    # A corrupt document on disk reads as invalid, never as content.
    (play.root / "t" / "timeline.json").write_text('{"nodes": 1}')
    status, body = await play.raw("GET", "/workspace/files?path=t/timeline.json")
    assert (status, body["code"]) == (400, "PLAY_TIMELINE_INVALID")


async def test_two_writers_same_revision_one_wins(play: Play) -> None:
    await play.bind()
    first = await play.write("catalog.json", catalog(), expectedRevision=None)
    rows = [
        {"id": f"playthrough-{i}", "path": f"ada/playthrough-{i}/timeline.json"} for i in (1, 2)
    ]
    results = await asyncio.gather(
        *(
            play.raw(
                "PUT",
                "/workspace/files?path=catalog.json",
                {"content": catalog(row), "expectedRevision": first["revision"]},
            )
            for row in rows
        )
    )
    statuses = sorted(status for status, _ in results)
    assert statuses == [200, 409]
    winner = next(rows[i] for i, (status, _) in enumerate(results) if status == 200)
    loser = next(body for status, body in results if status == 409)
    assert loser["code"] == "PLAY_FILE_REVISION_CONFLICT"
    assert (play.root / "catalog.json").read_text() == catalog(winner)


async def test_eight_writers_replaying_intents_each_land_once(play: Play) -> None:
    await play.bind()
    await play.write("catalog.json", catalog(), expectedRevision=None)
    tries: list[int] = []

    async def writer(i: int, max_tries: int) -> bool:
        for attempt in range(1, max_tries + 1):
            current = await play.read("catalog.json")
            doc = json.loads(current["content"])
            doc["playthroughs"].append(
                {"id": f"playthrough-{i}", "path": f"w{i}/playthrough-{i}/timeline.json"}
            )
            status, body = await play.raw(
                "PUT",
                "/workspace/files?path=catalog.json",
                {"content": json.dumps(doc), "expectedRevision": current["revision"]},
            )
            if status == 200:
                tries.append(attempt)
                return True
            assert body["code"] == "PLAY_FILE_REVISION_CONFLICT"
        return False

    landed = await asyncio.gather(*(writer(i, 16) for i in range(8)))
    assert all(landed)
    final = json.loads((play.root / "catalog.json").read_text())
    assert sorted(p["id"] for p in final["playthroughs"]) == sorted(
        f"playthrough-{i}" for i in range(8)
    )
    # A writer that gives up changed nothing: its intent is absent.
    before = (play.root / "catalog.json").read_text()
    stale = sha(catalog())
    status, body = await play.raw(
        "PUT",
        "/workspace/files?path=catalog.json",
        {"content": catalog(), "expectedRevision": stale},
    )
    assert (status, body["code"]) == (409, "PLAY_FILE_REVISION_CONFLICT")
    assert (play.root / "catalog.json").read_text() == before


async def test_method_not_allowed_where_the_path_exists(play: Play) -> None:
    for method, path in (
        ("GET", "/sessions"),
        ("POST", "/workspace"),
        ("DELETE", "/workspace/files"),
    ):
        status, body = await play.raw(method, path)
        assert (status, body["code"]) == (405, "PLAY_METHOD_NOT_ALLOWED"), (method, path)
