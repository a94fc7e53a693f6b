"""``innkeeper import <SillyTavern folder>``: everything in one command, idempotent, resumable,
chats as playthroughs whose first real turn carries the imported context."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from play_harness import Play
from st_folder import CORPUS, TINY_PNG, build, chat_lines, many_cards

from innkeeper_hostapi.commands import CommandEnvironment
from innkeeper_tavern.face.cli.import_export import export_main, import_main
from innkeeper_tavern.features.migration import chats
from innkeeper_tavern.features.migration.ledger import Ledger
from innkeeper_tavern.pure.formats.png import read_card_text

NO_SERVER = "http://127.0.0.1:9"
TRIM_SIM = json.loads(
    (CORPUS / "prolix-oc-st-presets/regex/regex-trim_sim_blocks.json").read_text()
)["scriptName"]
V1 = "/pmp-dsh-tavern/api/v1"


def env_for(data_dir: Path, base_url: str = NO_SERVER) -> CommandEnvironment:
    return CommandEnvironment(data_dir=str(data_dir), base_url=base_url)


def report(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return doc


def test_offline_folder_import_is_idempotent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    st = build(tmp_path / "st", big_chat=40)
    env = env_for(tmp_path / "data")
    code = import_main([str(st), "--json"], env)
    first = report(capsys)
    s = first["summary"]
    assert s["character"]["imported"] == 2 and s["world-book"]["imported"] == 2
    assert s["preset"]["imported"] == 2 and s["persona"]["imported"] == 2
    # An environment that cannot start a host (the CLI's can) refuses chats, with the reason.
    assert s["chat"]["refused"] == 3 and code == 1
    # The global regex script is attached to both imported presets.
    assert s["regex"]["imported"] == 2
    for preset in (tmp_path / "data/plugins/tavern/presets").glob("preset-*.json"):
        raw = json.loads(preset.read_text())["source"]["raw"]
        names = [x["scriptName"] for x in raw["extensions"]["regex_scripts"]]
        assert names[:2] == ["trim", TRIM_SIM]  # global scripts first, as ST runs them
    unsupported = {i["source"] for i in first["items"] if i["status"] == "unsupported"}
    assert "themes/" in unsupported and "group chats/" not in unsupported
    # Groups, like chats, need a host.
    assert s["group"]["refused"] == 1 and s["group-chat"]["refused"] == 1
    # Seraphina's linked world (extensions.world = "Eldoria") is her standalone book relation.
    root = tmp_path / "data" / "plugins" / "tavern"
    bindings = json.loads((root / "resource-world-book-bindings.json").read_text())
    card = next(i["id"] for i in first["items"] if i["source"].endswith("Seraphina.png"))
    book = next(i["id"] for i in first["items"] if i["source"] == "worlds/Eldoria.json")
    assert bindings["character"][card] == [book]
    # Mira's persona lorebook is her user's world-book relation.
    toaru = next(i["id"] for i in first["items"] if i["source"] == "worlds/Toaru.json")
    mira = next(i["id"] for i in first["items"] if i["source"].endswith(": Mira"))
    users_bound = json.loads((root / "user-world-book-bindings.json").read_text())
    assert users_bound["user"][mira] == [toaru]
    # The persona with an avatar carries it as a data URI.
    users = [json.loads(p.read_text()) for p in (root / "users").glob("user-*.json")]
    assert any(str(u.get("avatar", "")).startswith("data:image/png;base64,") for u in users)
    # A second run imports nothing new.
    import_main([str(st), "--json"], env)
    second = report(capsys)["summary"]
    for kind in ("character", "world-book", "preset", "persona", "regex"):
        assert second[kind]["imported"] == 0 and second[kind]["duplicate"] == 2, kind
    assert len(list((root / "characters").glob("character-*.json"))) == 2
    # --dry-run writes nothing and reports the same.
    assert import_main([str(st), "--dry-run", "--json"], env) == 1
    assert report(capsys)["summary"]["character"]["duplicate"] == 2


def test_human_report_and_usage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    st = build(tmp_path / "st", big_chat=4)
    assert import_main([str(st), "--offline"], env_for(tmp_path / "data")) == 1
    out = capsys.readouterr()
    assert out.err.splitlines()[0].startswith("importing into the data directory ")
    assert "skipped (duplicate)" in out.out and "group chats/1700000000.jsonl" in out.out
    assert import_main([str(tmp_path), "--json"], env_for(tmp_path / "data")) == 2


async def test_online_folder_import_chats_resume_and_context(
    play: Play, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    st = build(tmp_path / "st")
    env = env_for(tmp_path / "cli-data")
    argv = [str(st), "--json", "--server", play.host.origin]
    # A dry run reports everything it would import and writes nothing (no workspace bound).
    assert await asyncio.to_thread(import_main, [*argv, "--dry-run"], env) == 0
    dry = report(capsys)
    assert dry["dryRun"] and dry["summary"]["chat"]["imported"] == 3
    assert (await play.v2("GET", "/workspace"))["selected"] is False
    assert (await play.v1("GET", "/characters"))["characters"] == []
    # A first run interrupted after the worlds: only the worlds are in the ledger.
    (st / "characters").rename(tmp_path / "held")
    await asyncio.to_thread(import_main, argv, env)
    partial = report(capsys)["summary"]
    assert partial["world-book"]["imported"] == 2 and "character" not in partial
    (tmp_path / "held").rename(st / "characters")
    code = await asyncio.to_thread(import_main, argv, env)
    doc = report(capsys)
    s = doc["summary"]
    assert code == 0, [i for i in doc["items"] if i["status"] == "refused"]
    assert s["world-book"]["duplicate"] == 2 and s["character"]["imported"] == 2
    assert s["chat"]["imported"] == 3
    # The group imported during the interrupted run (its cards missing then) gains them now.
    # Its chat, stored then but not playable without members, becomes a playthrough now.
    assert s["group"]["imported"] == 1 and s["group-chat"]["imported"] == 1
    (group,) = (await play.v1("GET", "/groups"))["groups"]
    assert [(m["name"], m["muted"]) for m in group["members"]] == [
        ("Seraphina", False),
        ("Coding Sensei", True),
    ]
    # Again: nothing new, and the catalog has each chat once.
    assert await asyncio.to_thread(import_main, argv, env) == 0
    again = report(capsys)["summary"]
    assert all(v["imported"] == 0 for v in again.values()), again
    catalog = json.loads((await play.read("catalog.json"))["content"])
    groups = [r for r in catalog["playthroughs"] if "groupId" in r["ext"]["pmpDshTavern"]]
    assert len(catalog["playthroughs"]) == 4 and len(groups) == 1  # 3 chats, 1 group chat
    row = next(r for r in catalog["playthroughs"] if r["title"].startswith("Seraphina - "))
    ext = row["ext"]["pmpDshTavern"]
    context = json.loads((await play.read(ext["importContextPath"]))["content"])
    assert context["schemaVersion"] == 1 and len(context["qa"]) == 3
    assert context["source"]["chatName"] == row["title"]
    assert context["source"]["createDate"] == "2024-05-01@10h00m00s"
    assert context["source"]["brokenLines"] == [4]
    assert context["source"]["systemMessages"][0]["text"] == "narrator note"
    assert context["qa"][0]["swipes"] == ["discarded 0"]
    assert context["source"]["greetingSwipes"] == ["Another greeting."]
    long_row = next(r for r in catalog["playthroughs"] if r["title"] == "long")
    long_ctx = json.loads(
        (await play.read(long_row["ext"]["pmpDshTavern"]["importContextPath"]))["content"]
    )
    assert len(long_ctx["qa"]) + long_ctx["source"]["omittedQa"] == 2500
    # The original chat is kept verbatim beside the context.
    base = row["path"].rsplit("/", 1)[0]
    original = (await play.read(f"{base}/original-001.jsonl"))["content"]
    chat = st / "chats" / "default_Seraphina" / f"{row['title']}.jsonl"
    assert original == chat.read_text()
    # The chat's user_name (Mira) is the persona of its session.
    sid = ext["rootSessionId"]
    persona = await play.v1("GET", f"/user-selection?sessionId={sid}")
    assert persona["user"]["name"] == "Mira"
    # The first real turn carries the imported context; the second does not.
    await play.v2("POST", f"/sessions/{sid}/user-message", {"text": "hello again"}, 202)
    await play.idle(sid)
    await play.v2("POST", f"/sessions/{sid}/user-message", {"text": "and then?"}, 202)
    await play.idle(sid)
    data = await play.v2("GET", f"/sessions/{sid}/messages")
    systems = [m["text"] for m in data["messages"] if m["role"] == "system"]
    carrying = [t for t in systems if "<imported-playthrough-context" in t]
    assert len(carrying) == 1 and "answer 2" in carrying[0]
    users = [m["text"] for m in data["messages"] if m["role"] == "user"]
    assert users == ["hello again", "and then?"]  # never forged as history


def _library(data_dir: Path) -> dict[str, list[str]]:
    root = data_dir / "plugins" / "tavern"
    out: dict[str, list[str]] = {}
    for folder in ("characters", "world-books"):
        names = [json.loads(p.read_text())["name"] for p in (root / folder).glob("*-*.json")]
        out[folder] = sorted(names)
    bindings = json.loads((root / "resource-world-book-bindings.json").read_text())
    out["bound"] = sorted(str(len(v)) for v in bindings.get("character", {}).values())
    return out


def test_killed_import_resumes_to_the_same_state(tmp_path: Path) -> None:
    """SIGKILL the first run halfway; the re-run ends with what one clean run gives."""
    st = many_cards(tmp_path / "st", 60)
    killed = tmp_path / "killed"
    script = (
        "import sys; from innkeeper_hostapi.commands import CommandEnvironment as E; "
        "from innkeeper_tavern.face.cli.import_export import import_main as m; "
        f"sys.exit(m([{str(st)!r}, '--offline', '--json'], E(data_dir={str(killed)!r}, "
        f"base_url={NO_SERVER!r})))"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.DEVNULL)
    ledger = killed / "plugins" / "tavern" / "migration-ledger.jsonl"

    def done() -> int:
        try:
            return ledger.read_text().count('"op": "done"')
        except OSError:
            return 0

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None and done() < 20:
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done_before = done()
    assert 1 <= done_before < 61, "the run was not interrupted halfway"
    assert import_main([str(st), "--offline"], env_for(killed)) == 0
    clean = tmp_path / "clean"
    assert import_main([str(st), "--offline"], env_for(clean)) == 0
    assert _library(killed) == _library(clean)
    assert len(_library(clean)["characters"]) == 60 and _library(clean)["bound"] == ["1"] * 60


def _st_documents(folder: Path) -> dict[str, Any]:
    """Every card (its ``chara`` JSON), world and preset of an exported folder, by file name."""
    docs: dict[str, Any] = {}
    for path in sorted((folder / "characters").iterdir()):
        payload = read_card_text(path.read_bytes()).payloads["chara"]
        docs[f"characters/{path.name}"] = json.loads(payload)
    for sub in ("worlds", "OpenAI Settings"):
        for path in sorted((folder / sub).iterdir()):
            docs[f"{sub}/{path.name}"] = json.loads(path.read_text())
    return docs


def _stored(data_dir: Path, folder: str) -> dict[str, Any]:
    root = data_dir / "plugins" / "tavern" / folder
    out: dict[str, Any] = {}
    for path in root.glob("*-*.json"):
        doc = json.loads(path.read_text())
        for key in ("id", "createdAt", "updatedAt", "source", "warnings"):  # import notes
            doc.pop(key, None)
        out[doc["name"]] = doc
    return out


def test_export_then_import_gives_the_same_library(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    st = build(tmp_path / "st", big_chat=4)
    first, second = tmp_path / "first", tmp_path / "second"
    import_main([str(st), "--offline"], env_for(first))
    out1, out2 = tmp_path / "out1", tmp_path / "out2"
    assert export_main(["sillytavern", "--out", str(out1)], env_for(first)) == 0
    assert sorted(p.name for p in (out1 / "characters").iterdir()) == [
        "Coding Sensei.png",
        "Seraphina.png",
    ]
    backup = json.loads((out1 / "personas.json").read_text())
    assert sorted(backup["personas"].values()) == ["Mira", "李 Scholar"]
    assert (out1 / "User Avatars" / "Mira.png").read_bytes() == TINY_PNG
    capsys.readouterr()
    assert import_main([str(out1), "--offline", "--json"], env_for(second)) == 0
    summary = report(capsys)["summary"]
    assert summary["character"]["imported"] == 2 and summary["persona"]["imported"] == 2
    assert export_main(["sillytavern", "--out", str(out2)], env_for(second)) == 0
    assert _st_documents(out1) == _st_documents(out2)
    for folder in ("characters", "world-books", "presets"):
        assert _stored(first, folder) == _stored(second, folder), folder
    users = sorted(
        (u["name"], u["description"], u.get("avatar"))
        for u in (
            json.loads(p.read_text()) for p in (second / "plugins/tavern/users").glob("user-*.json")
        )
    )
    assert [u[:2] for u in users] == [
        ("Mira", "A wandering herbalist."),
        ("李 Scholar", "读书人。"),
    ]
    assert users[0][2] is not None and users[0][2].startswith("data:image/png;base64,")


def test_an_import_killed_before_its_ledger_entry_is_not_duplicated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The kill lands after the library stored a card and before ``done`` was written."""
    st = many_cards(tmp_path / "st", 3)
    data = tmp_path / "data"
    assert import_main([str(st), "--offline"], env_for(data)) == 0
    ledger = data / "plugins" / "tavern" / "migration-ledger.jsonl"
    lines = ledger.read_text().splitlines()
    cut = next(i for i, ln in enumerate(lines) if '"kind": "character"' in ln and "done" in ln)
    ledger.write_text("\n".join(lines[:cut]) + "\n")  # the last card's done entry is lost…
    (st / "characters" / "card0001.json").unlink()
    (st / "characters" / "card0002.json").unlink()  # …and the run stopped there
    capsys.readouterr()
    assert import_main([str(st), "--offline", "--json"], env_for(data)) == 0
    summary = report(capsys)["summary"]
    assert summary["character"] == {"imported": 0, "duplicate": 1, "refused": 0, "unsupported": 0}
    assert len(list((data / "plugins" / "tavern" / "characters").glob("character-*"))) == 3


def test_a_chat_over_the_workspace_file_limit_keeps_its_newest_qa_and_whole_original() -> None:
    lines = chat_lines("Ada", 3000)
    lines[4] = lines[4].replace("question 1", "長" * 300_000)  # one line of ~900 KB
    text = "\n".join(lines) + "\n"
    chat = chats.parse_chat(text)
    parts = chats.split_original(text)
    assert "".join(parts) == text
    assert all(len(p.encode()) <= chats.CHUNK_BYTES for p in parts)
    encoded = chats.encode_context(
        chats.context_document(chat, chat_name="big", original_parts=len(parts))
    )
    doc = json.loads(encoded)
    assert len(encoded.encode()) <= chats.MAX_WORKSPACE_FILE_BYTES
    assert doc["source"]["omittedQa"] > 0
    assert len(doc["qa"]) + doc["source"]["omittedQa"] == 3000
    assert doc["qa"][-1]["assistant"] == "answer 2999"  # the newest are kept


def test_a_refused_card_is_reported_and_not_recovered_later(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    st = many_cards(tmp_path / "st", 1)
    (st / "characters" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 30)
    data = tmp_path / "data"
    assert import_main([str(st), "--offline", "--json"], env_for(data)) == 1
    items = report(capsys)["items"]
    refused = [i for i in items if i["status"] == "refused"]
    assert [i["source"] for i in refused] == ["characters/broken.png"]
    assert "CHARACTER_PNG_INVALID" in refused[0]["detail"]
    ledger = Ledger(data / "plugins" / "tavern")
    assert ledger.pending() == []  # refused: nothing for a later run to settle
    ledger.close()
