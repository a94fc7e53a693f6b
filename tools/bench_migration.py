#!/usr/bin/env python3
"""Import a SillyTavern folder of N cards and N chats in one command, against N single imports.

A real host with the Tavern plugin runs on a loopback test server. The folder has N distinct JSON
cards (each linked to one world) and one chat per card (header, greeting and ``--turns`` QA pairs
with swipes). Measured:

* **folder**: one ``innkeeper import <folder> --server URL`` of everything;
* **baseline** (same run, a fresh host): N invocations, each importing a folder of one card and
  its chat — the sum of single imports, which is what a person does without the folder command
  (there is no single-chat import other than a one-chat folder).

Prints wall time, peak traced memory (``tracemalloc``; host and command share the process, so it
is the peak of both) and the ratios folder / baseline. No assertions about timings.

    uv run --no-sync python tools/bench_migration.py [--count 1000] [--turns 20]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import shutil
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from innkeeper_core.testing import start_test_host
from innkeeper_hostapi.commands import CommandEnvironment
from innkeeper_tavern.face.cli.import_export import import_main

ROOT = Path(__file__).resolve().parents[1]
WORLD = ROOT.parent / "shared" / "sillytavern-corpus" / "sillytavern-repo" / "staging-1ac6780"


def card(i: int) -> bytes:
    data = {
        "name": f"Card {i}",
        "description": "x" * 200,
        "first_mes": "Hello.",
        "extensions": {"world": "Eldoria"},
    }
    return json.dumps({"spec": "chara_card_v2", "spec_version": "2.0", "data": data}).encode()


def chat(i: int, turns: int) -> str:
    lines = [
        json.dumps(
            {
                "user_name": "Mira",
                "character_name": f"Card {i}",
                "create_date": "2024-05-01@10h00m00s",
                "chat_metadata": {},
            }
        )
    ]
    for n in range(turns):
        lines.append(json.dumps({"name": "Mira", "is_user": True, "mes": f"q{n} of {i}"}))
        lines.append(
            json.dumps(
                {
                    "name": f"Card {i}",
                    "is_user": False,
                    "mes": f"a{n}" * 20,
                    "swipes": ["other", f"a{n}" * 20],
                    "swipe_id": 1,
                }
            )
        )
    return "\n".join(lines) + "\n"


def write_folder(root: Path, items: range, turns: int) -> None:
    (root / "characters").mkdir(parents=True)
    (root / "worlds").mkdir()
    shutil.copy(WORLD / "Eldoria.json", root / "worlds")
    (root / "settings.json").write_text("{}")
    for i in items:
        (root / "characters" / f"card{i:05d}.json").write_bytes(card(i))
        (root / "chats" / f"card{i:05d}").mkdir(parents=True)
        (root / "chats" / f"card{i:05d}" / "chat.jsonl").write_text(chat(i, turns))


async def measure(tmp: Path, folders: list[Path]) -> tuple[float, int]:
    host = await start_test_host(tmp / "data")
    try:
        loaded = await host.load("tavern", "innkeeper_tavern.plugin")
        assert loaded["state"] != "failed", loaded
        env = CommandEnvironment(data_dir=str(tmp / "cli"), base_url="http://127.0.0.1:9")
        tracemalloc.start()
        started = time.perf_counter()
        for folder in folders:
            with (
                contextlib.redirect_stdout(io.StringIO()),
                contextlib.redirect_stderr(io.StringIO()),
            ):
                code = await asyncio.to_thread(
                    import_main, [str(folder), "--server", host.origin], env
                )
            assert code == 0, folder
        elapsed = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return elapsed, peak
    finally:
        await host.close()


async def main(count: int, turns: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-migration-") as name:
        tmp = Path(name)
        write_folder(tmp / "all", range(count), turns)
        singles = []
        for i in range(count):
            write_folder(tmp / f"one{i}", range(i, i + 1), turns)
            singles.append(tmp / f"one{i}")
        print(f"{count} cards + {count} chats ({turns} QA each)", flush=True)
        folder_time, folder_peak = await measure(tmp / "a", [tmp / "all"])
        # Printed as soon as measured: the singles take about twice as long.
        print(
            f"folder import : {folder_time:8.2f} s  peak {folder_peak / 2**20:7.1f} MiB", flush=True
        )
        base_time, base_peak = await measure(tmp / "b", singles)
    print(f"sum of singles: {base_time:8.2f} s  peak {base_peak / 2**20:7.1f} MiB")
    print(f"ratio time folder/singles: {folder_time / base_time:.2f}")
    print(f"ratio peak memory folder/singles: {folder_peak / base_peak:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=20)
    args = parser.parse_args()
    asyncio.run(main(args.count, args.turns))
    sys.exit(0)
