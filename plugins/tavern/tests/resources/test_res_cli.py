"""``innkeeper import`` / ``innkeeper export``: offline through the stores, online through a
running server with the request token, and never offline behind a running server's back."""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
from pathlib import Path
from typing import Any

import pytest

from innkeeper_hostapi.commands import CommandEnvironment
from innkeeper_tavern.face.cli.import_export import export_main, import_main
from innkeeper_tavern.features.migration.output import render_table, safe_file_name
from innkeeper_tavern.pure.formats.png import read_card_text

CORPUS = Path(__file__).resolve().parents[5] / "shared" / "sillytavern-corpus"
#: Nothing listens on port 9 of loopback in the test environment: "no server running".
NO_SERVER = "http://127.0.0.1:9"


def env_for(data_dir: Path, base_url: str = NO_SERVER) -> CommandEnvironment:
    return CommandEnvironment(data_dir=str(data_dir), base_url=base_url)


def rows(output: str) -> dict[str, tuple[str, str]]:
    """FILE → (RESULT, KIND) from the printed table."""
    table: dict[str, tuple[str, str]] = {}
    for line in output.splitlines()[2:]:
        parts = line.split("  ")
        parts = [p.strip() for p in parts if p.strip()]
        if len(parts) >= 3 and parts[0] in ("imported", "skipped"):
            table[Path(parts[2]).name] = (parts[0], parts[1])
    return table


def test_offline_import_of_the_whole_corpus(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data_dir = tmp_path / "data"
    code = import_main([str(CORPUS)], env_for(data_dir))
    out = capsys.readouterr()
    table = rows(out.out)
    assert code == 0, out
    assert table["default_Seraphina.png"] == ("imported", "character")
    assert table["Pxansatu.json"] == ("imported", "character")
    assert table["Lucid Loom v2.8.json"] == ("imported", "preset")
    assert table["OpenAI_Default.settings.json"] == ("imported", "preset")
    assert table["The Long Reclamation.json"] == ("imported", "world-book")
    assert table["settings.json"] == ("skipped", "-")
    assert table["regex-trim_sim_blocks.json"] == ("skipped", "-")
    assert "12 imported, 6 skipped" in out.out
    root = data_dir / "plugins" / "tavern"
    assert len(list((root / "characters").glob("character-*.json"))) == 5
    assert len(list((root / "presets").glob("preset-*.json"))) == 4
    assert len(list((root / "world-books").glob("world-book-*.json"))) == 3
    preset_names = {
        json.loads(p.read_text())["name"] for p in (root / "presets").glob("preset-*.json")
    }
    assert "Lucid Loom v2.8" in preset_names


def test_offline_export_round_trips(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data_dir = tmp_path / "data"
    cards = tmp_path / "cards"
    cards.mkdir()
    for name in ("tag-1.0.0/Aqua.png", "staging-1ac6780/default_Seraphina.png"):
        shutil.copy(CORPUS / "sillytavern-repo" / name, cards)
    assert import_main([str(cards)], env_for(data_dir)) == 0
    capsys.readouterr()
    out = tmp_path / "out"
    assert export_main(["characters", "--all", "--out", str(out)], env_for(data_dir)) == 0
    exported = sorted(p.name for p in out.iterdir())
    assert exported == ["Aqua.png", "Seraphina.png"]
    for path in out.iterdir():
        assert {"chara", "ccv3"} <= set(read_card_text(path.read_bytes()).keywords)
    assert (
        export_main(
            ["characters", "--all", "--out", str(out), "--format", "json"], env_for(data_dir)
        )
        == 0
    )
    assert sorted(p.name for p in out.glob("*.json")) == ["Aqua.json", "Seraphina.json"]
    # Re-importing the exports gives the same cards again.
    capsys.readouterr()
    again = tmp_path / "again"
    assert import_main([str(out)], env_for(again)) == 0
    assert "4 imported, 0 skipped" in capsys.readouterr().out
    # Usage and unknown ids.
    assert export_main(["characters", "--out", str(out)], env_for(data_dir)) == 2
    assert export_main(["presets", "preset-nope", "--out", str(out)], env_for(data_dir)) == 1


def test_rejected_and_missing_files_fail_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 30)
    code = import_main([str(bad), str(tmp_path / "nope.json")], env_for(tmp_path / "data"))
    output = capsys.readouterr().out
    assert code == 1
    assert "CHARACTER_PNG_INVALID" in output
    assert "no such file or folder" in output


async def test_online_import_and_export_use_the_running_server(
    innkeeper_host: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    await innkeeper_host.load("tavern", "innkeeper_tavern.plugin")
    env = env_for(tmp_path / "innkeeper-data", innkeeper_host.origin)
    files = [
        str(CORPUS / "sillytavern-content" / "default_CodingSensei.png"),
        str(CORPUS / "prolix-oc-st-presets" / "presets" / "StoryWeaver v1.1.json"),
        str(CORPUS / "sillytavern-repo" / "staging-1ac6780" / "Eldoria.json"),
    ]
    # --server overrides the configured address (here: one where nothing listens).
    elsewhere = env_for(tmp_path / "innkeeper-data")
    argv = ["--online", "--server", innkeeper_host.origin, *files]
    code = await asyncio.to_thread(import_main, argv, elsewhere)
    output = capsys.readouterr()
    assert code == 0, output
    assert "into the server" in output.err
    v1 = "/pmp-dsh-tavern/api/v1"
    chars = await (await innkeeper_host.client.get(f"{v1}/characters")).json()
    assert [c["name"] for c in chars["characters"]] == ["Coding Sensei"]
    presets = await (await innkeeper_host.client.get(f"{v1}/presets")).json()
    assert [p["name"] for p in presets["presets"]] == ["StoryWeaver v1.1"]
    # The server holds the writer lock: offline mode refuses instead of writing behind it.
    code = await asyncio.to_thread(import_main, ["--offline", *files], env)
    assert code == 1
    assert "in use by another process" in capsys.readouterr().err
    out = tmp_path / "out"
    code = await asyncio.to_thread(export_main, ["presets", "--all", "--out", str(out)], env)
    assert code == 0
    assert [p.name for p in out.iterdir()] == ["StoryWeaver v1.1.json"]
    assert "prompts" in json.loads((out / "StoryWeaver v1.1.json").read_text())
    await innkeeper_host.unload("tavern")


def test_online_mode_needs_a_server(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert import_main(["--online", str(tmp_path)], env_for(tmp_path)) == 1
    assert "no server answers" in capsys.readouterr().err


def test_an_empty_path_is_a_usage_error_not_the_current_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``innkeeper import "$DIR"`` with DIR unset must not import whatever lies under the cwd."""
    card = CORPUS / "sillytavern-content" / "default_CodingSensei.png"
    work = tmp_path / "cwd"
    work.mkdir()
    shutil.copy(card, work / "stray.png")
    monkeypatch.chdir(work)
    data_dir = tmp_path / "data"
    assert import_main([""], env_for(data_dir)) == 2
    assert import_main([str(card), " "], env_for(data_dir)) == 2
    assert "an empty path" in capsys.readouterr().err
    assert not (data_dir / "plugins" / "tavern" / "characters").exists()
    assert export_main(["characters", "--all", "--out", ""], env_for(data_dir)) == 2


def test_helpers() -> None:
    used: set[str] = set()
    assert safe_file_name("a/b:c.png", used) == "a_b_c.png"
    assert safe_file_name("a/b:c.png", used) == "a_b_c (2).png"
    assert safe_file_name("..", used) == "export"
    table = render_table([("x", "long value")], ("A", "B"))
    assert table.splitlines()[0] == "A  B"


async def test_import_finds_the_server_of_its_data_directory_on_any_port(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 10, item 1: the server records its address beside its writer lock; the CLI,
    configured for another port, still talks to it and says so on its first line."""
    from innkeeper_core.testing import start_test_host

    data = tmp_path / "innkeeper-data"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    host = await start_test_host(data, port=port)
    try:
        await host.load("tavern", "innkeeper_tavern.plugin")
        card = CORPUS / "sillytavern-content" / "default_CodingSensei.png"
        code = await asyncio.to_thread(import_main, [str(card)], env_for(data))  # port 9
        err = capsys.readouterr().err
        assert code == 0, err
        first = err.splitlines()[0]
        assert first == (
            f"importing 1 file(s) into the server at http://127.0.0.1:{port} "
            f"(data directory {data / 'plugins' / 'tavern'})"
        )
        chars = await (await host.client.get("/pmp-dsh-tavern/api/v1/characters")).json()
        assert [c["name"] for c in chars["characters"]] == ["Coding Sensei"]
    finally:
        await host.close()
    # The server is gone: the same command writes the data directory itself and says so.
    code = await asyncio.to_thread(import_main, [str(card)], env_for(data))
    first = capsys.readouterr().err.splitlines()[0]
    assert code == 0 and first.endswith("(no server is running on it)")
    assert not (data / "plugins" / "tavern" / ".writer.server.json").exists()


def test_the_same_card_file_twice_is_skipped_as_a_duplicate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    card = CORPUS / "sillytavern-content" / "default_CodingSensei.png"
    renamed = tmp_path / "copy of sensei.png"
    renamed.write_bytes(card.read_bytes())
    env = env_for(tmp_path / "data")
    cards = tmp_path / "data" / "plugins" / "tavern" / "characters"
    assert import_main([str(card)], env) == 0
    first = capsys.readouterr().out
    card_id = next(p.stem for p in cards.glob("character-*.json"))
    assert card_id in first
    # Again, under another name: same bytes, so skipped, naming the card it matched.
    assert import_main([str(renamed)], env) == 0
    out = capsys.readouterr().out
    assert rows(out)["copy of sensei.png"] == ("skipped", "character")
    assert f"duplicate of {card_id} (Coding Sensei)" in out
    assert "0 imported, 1 skipped (1 as duplicate)" in out
    assert len(list(cards.glob("character-*.json"))) == 1
    # The override imports a second copy.
    assert import_main([str(renamed), "--allow-duplicates"], env) == 0
    assert rows(capsys.readouterr().out)["copy of sensei.png"] == ("imported", "character")
    assert len(list(cards.glob("character-*.json"))) == 2


async def test_a_card_imported_through_the_server_is_a_duplicate_for_the_cli(
    innkeeper_host: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    await innkeeper_host.load("tavern", "innkeeper_tavern.plugin")
    card = CORPUS / "sillytavern-content" / "default_CodingSensei.png"
    resp = await innkeeper_host.client.post(
        "/pmp-dsh-tavern/api/v1/characters/import?filename=sensei.png",
        data=card.read_bytes(),
        headers={"Origin": innkeeper_host.origin, "Content-Type": "image/png"},
    )
    card_id = (await resp.json())["character"]["id"]
    env = env_for(tmp_path / "innkeeper-data", innkeeper_host.origin)
    argv = ["--online", str(card), str(card)]
    assert await asyncio.to_thread(import_main, argv, env) == 0
    out = capsys.readouterr().out
    assert out.count(f"duplicate of {card_id}") == 2
    listed = await (await innkeeper_host.client.get("/pmp-dsh-tavern/api/v1/characters")).json()
    assert len(listed["characters"]) == 1


def test_a_folder_import_skips_a_card_imported_loose_before(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    st = tmp_path / "st"
    (st / "characters").mkdir(parents=True)
    (st / "worlds").mkdir()
    card = CORPUS / "sillytavern-content" / "default_CodingSensei.png"
    (st / "characters" / "sensei.png").write_bytes(card.read_bytes())
    (st / "settings.json").write_text("{}")
    env = env_for(tmp_path / "data")
    assert import_main([str(card)], env) == 0
    capsys.readouterr()
    assert import_main([str(st), "--json"], env) == 0
    summary = json.loads(capsys.readouterr().out)["summary"]
    assert summary["character"]["duplicate"] == 1 and summary["character"]["imported"] == 0
