"""Write cost of one bind in ``session-selections.json``: the store against the ways to persist it.

``session-selections.json`` must hold the current state after every acknowledged write
(docs/prompt-assembly.md "Session selections"). This script times one bind (one session's
selection replaced) at ``--sessions`` stored sessions (default 10 and 1,000), each way measured
in the same process, on the same temporary folder, with fsync on:

- ``append`` (baseline: what the store did before): one fsynced JSON line of the change appended
  to ``session-selections.log``; the JSON file is stale until the log is folded;
- ``fold``: the same append, then the whole snapshot rewritten atomically and the log removed
  (a fold per write);
- ``rewrite``: the whole snapshot encoded and rewritten atomically (temp file, fsync, rename,
  folder fsync), no log;
- ``store``: ``SessionSelectionStore.set`` as built (validation, limits, the event-loop hop).

It prints the median per bind (ms) and the ratio to ``append``.

    nice -n 10 uv run --no-sync python tools/bench_selections.py [--sessions 10 1000] [--binds 200]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

from innkeeper_tavern.state.resources.atomic import atomic_write
from innkeeper_tavern.state.session_bindings.model import Selection, SessionRecord
from innkeeper_tavern.state.session_bindings.store import (
    SELECTIONS_FILE,
    SessionSelectionStore,
    encode_state,
)

NOW = "2026-01-01T00:00:00.000Z"
_encoder = msgspec.json.Encoder()


def selection(i: int, turn: int = 0) -> Selection:
    return Selection(
        preset_id=f"preset-{turn % 7}",
        character_card_id=f"card-{i:06d}",
        user_id="user-default",
        world_book_ids=(f"book-{i % 13}",),
    )


def state(count: int) -> dict[str, SessionRecord]:
    return {
        f"session-{i:06d}": SessionRecord(selection=selection(i), updated_at=NOW)
        for i in range(count)
    }


def append_line(path: Path, line: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def timed(binds: int, step: Callable[[int], None]) -> float:
    samples = []
    for turn in range(binds):
        started = time.perf_counter()
        step(turn)
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def strategies(folder: Path, count: int, binds: int) -> dict[str, float]:
    sessions = state(count)
    snapshot = folder / SELECTIONS_FILE
    log = folder / "session-selections.log"
    atomic_write(snapshot, encode_state(sessions))

    def change(turn: int) -> tuple[str, SessionRecord]:
        key = f"session-{turn % count:06d}"
        record = SessionRecord(selection=selection(turn % count, turn), updated_at=NOW)
        sessions[key] = record
        return key, record

    def append(turn: int) -> None:
        key, record = change(turn)
        append_line(log, _encoder.encode({"set": {key: record}}) + b"\n")

    def fold(turn: int) -> None:
        append(turn)
        atomic_write(snapshot, encode_state(sessions))
        log.unlink()

    def rewrite(turn: int) -> None:
        change(turn)
        atomic_write(snapshot, encode_state(sessions))

    results = {"append": timed(binds, append)}
    log.unlink()
    results["fold"] = timed(binds, fold)
    results["rewrite"] = timed(binds, rewrite)
    return results


async def store_bind(folder: Path, count: int, binds: int) -> float:
    store = SessionSelectionStore(folder, clock=lambda: NOW)
    await store.open()
    await store.set_many({key: record.selection for key, record in state(count).items()})
    samples = []
    for turn in range(binds):
        started = time.perf_counter()
        await store.set(f"session-{turn % count:06d}", selection(turn % count, turn))
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sessions", type=int, nargs="+", default=[10, 1000])
    parser.add_argument("--binds", type=int, default=200)
    args = parser.parse_args()
    print(f"{'sessions':>8} {'way':>8} {'ms/bind':>9} {'× append':>9}")
    for count in args.sessions:
        with tempfile.TemporaryDirectory() as raw:
            results = strategies(Path(raw), count, args.binds)
        with tempfile.TemporaryDirectory() as raw:
            results["store"] = asyncio.run(store_bind(Path(raw), count, args.binds))
        base = results["append"]
        for way, ms in results.items():
            print(f"{count:>8} {way:>8} {ms:>9.3f} {ms / base:>9.2f}")


if __name__ == "__main__":
    main()
