#!/usr/bin/env python3
"""Long stories: does a turn's cost, the server's memory and the data on disk grow with the story?

Starts a real server (``innkeeper serve``, every built-in plugin loaded) in a subprocess on a free
loopback port with a temporary data directory, imports over HTTP the corpus preset
"Lucid Loom v2.8", the corpus world book "The Long Reclamation", a generated 10,000-entry world
book and the corpus card "Pxansatu", binds them and a user to a session, and plays ``--turns``
turns through ``POST /prompt`` with the synthetic provider (no delay, so a turn's wall time is
host time). A turn is timed from the prompt request to its ``turn/end`` frame on the session's
SSE stream.

Printed at turns 20, 200, 2,000 (those not above ``--turns``) and at the last turn:

* host time per turn (median wall time of the 10 turns up to the mark) and the server's CPU time
  per turn (mean over the same turns; unlike wall time it does not move with other load on the
  machine), each with its ratio to turn 20; a linear fit over all turns gives the extrapolated
  times at turn 2,000 when fewer were played;
* the server's RSS and its ratio to turn 20;
* durable bytes per turn (database and files, after a passive WAL checkpoint) between marks vs
  the new text of those turns (user + reply characters, UTF-8 bytes): the goal is at most 2x;
* what the turn actually sent (KiB: the synthetic provider's ``promptTokens`` are a quarter of
  the characters of the request's messages) and the server's CPU time per KiB sent, with its
  ratio to turn 20: with the preset's own budget (a million tokens, never reached) the request
  grows with the story, so the work should follow what is sent (a flat ratio).

``--context-tokens N`` plays the same story a second time (fresh server and data directory) with
the preset's ``openai_max_context`` set to ``N`` (a realistic window: 32000, 128000), so the
Assembler's history trim applies and what is sent stops growing; both runs are printed. The goal
turn 2,000 <= 1.2x turn 20 applies to the bounded run.

``--concurrent 20`` then plays ``--concurrent-turns`` turns in each of 20 fresh sessions at once
and the same number one after another (the baseline, same run), and prints turns/s, median and
p95 latency, the server's CPU time per turn (all its threads) and that of its event loop's thread
alone (the single loop's ceiling is 1 / that many turns a second). ``--profile`` runs that server
under cProfile (``tools/profiled_serve.py``, only while those turns play) and prints, per mode,
for the event loop's thread and for the others, the ten functions with the most cumulative and
the most own time per turn; its turn times carry the profiler's own cost, so time a run without
it. ``--malloc-arena-max N`` runs the server with ``MALLOC_ARENA_MAX=N``.
``--reply-chars N`` pads the synthetic replies to N characters (``[provider]
synthetic_reply_chars``), so durable growth can be read against roleplay-length replies.

    uv run --no-sync python tools/bench_story.py [--turns 300] [--context-tokens 32000]
        [--concurrent 20] [--concurrent-turns 5] [--profile] [--malloc-arena-max 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pstats
import random
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

import aiohttp
import psutil

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "sillytavern-corpus"
PRESETS = CORPUS / "prolix-oc-st-presets"
PRESET = PRESETS / "presets" / "Lucid Loom v2.8.json"
BOOK = PRESETS / "worldbooks" / "The Long Reclamation.json"
CARD = PRESETS / "cards" / "Pxansatu.json"
GENERATED_ENTRIES = 10_000
WORDS = [f"word{i}" for i in range(4_000)]
MARKS = (20, 200, 2_000)
WINDOW = 10
API = "/pmp-dsh-tavern/api/v1"


def generated_book(rng: random.Random) -> bytes:
    entries = {
        str(i): {
            "uid": i,
            "key": [f"lore{i}", f"topic{i % 997}x{i % 13}"],
            "content": f"Lore {i}: " + " ".join(rng.choice(WORDS) for _ in range(15)),
            "order": rng.randint(0, 200),
            "position": i % 2,
        }
        for i in range(GENERATED_ENTRIES)
    }
    return json.dumps({"entries": entries}).encode()


def user_text(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(40)]
    if rng.random() < 0.3:
        words.append(f"lore{rng.randrange(GENERATED_ENTRIES)}")
    return " ".join(words)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def durable_bytes(data_dir: Path) -> int:
    """Bytes under ``data_dir`` after a passive checkpoint moved the WAL into the database;
    WAL and shared-memory files are not counted (their size is reused, not grown)."""
    for db in data_dir.rglob("*.sqlite3"):
        conn = sqlite3.connect(db, timeout=5)
        try:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        finally:
            conn.close()
    return sum(
        p.stat().st_size
        for p in data_dir.rglob("*")
        if p.is_file() and not p.name.endswith(("-wal", "-shm"))
    )


class Server:
    """``innkeeper serve`` in a subprocess; stopped (SIGTERM, then kill) by :meth:`stop`."""

    def __init__(
        self,
        data_dir: Path,
        arena_max: int | None,
        reply_chars: int = 0,
        profile_out: Path | None = None,
    ) -> None:
        self.port = free_port()
        self.origin = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ)
        if arena_max is not None:
            env["MALLOC_ARENA_MAX"] = str(arena_max)
        entry = ["-m", "innkeeper_core"]
        self.profile_out = profile_out
        if profile_out is not None:
            entry = [str(Path(__file__).with_name("profiled_serve.py"))]
            env["INNKEEPER_PROFILE_OUT"] = str(profile_out)
        command = [sys.executable, *entry, "serve", "--port", str(self.port)]
        if reply_chars:
            data_dir.mkdir(parents=True, exist_ok=True)
            config = data_dir.parent / f"{data_dir.name}.toml"
            config.write_text(f"[provider]\nsynthetic_reply_chars = {reply_chars}\n")
            command += ["--config", str(config)]
        self.proc = subprocess.Popen(
            [*command, "--data-dir", str(data_dir)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.ps = psutil.Process(self.proc.pid)

    def cpu(self) -> float:
        """CPU seconds the server used so far (user + system): host work, whatever else the
        machine runs."""
        times = self.ps.cpu_times()
        return float(times.user + times.system)

    def loop_cpu(self) -> float:
        """CPU seconds of the server's main thread, the one that runs the event loop (the
        writer thread, the read pool and ``to_thread`` work are the rest of :meth:`cpu`)."""
        for thread in self.ps.threads():
            if thread.id == self.proc.pid:
                return float(thread.user_time + thread.system_time)
        return 0.0

    def rss(self) -> int:
        rss: int = self.ps.memory_info().rss
        return rss

    async def wait_ready(self, http: aiohttp.ClientSession) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("the server exited during start-up")
            try:
                async with http.get(self.origin + "/host/api/sessions") as resp:
                    if resp.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.2)
        raise RuntimeError("the server did not start within 60 s")

    def profile_start(self) -> None:
        """Open the server's profile window (``tools/profiled_serve.py``), if it has one."""
        if self.profile_out is not None:
            self.profile_out.unlink(missing_ok=True)
            Path(f"{self.profile_out}.workers").unlink(missing_ok=True)
            self.proc.send_signal(signal.SIGUSR1)

    async def profile_stop(self) -> tuple[pstats.Stats, pstats.Stats] | None:
        """Close the window and read what the server dumped: the event loop's thread and the
        other threads' work."""
        if self.profile_out is None:
            return None
        self.proc.send_signal(signal.SIGUSR2)
        deadline = time.monotonic() + 60
        while not self.profile_out.exists():
            if time.monotonic() > deadline:
                raise RuntimeError("the server wrote no profile")
            await asyncio.sleep(0.1)
        workers = Path(f"{self.profile_out}.workers")
        return pstats.Stats(str(self.profile_out)), pstats.Stats(str(workers))

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Client:
    def __init__(self, http: aiohttp.ClientSession, origin: str) -> None:
        self.http = http
        self.origin = origin

    async def call(self, method: str, path: str, body: Any = None, **kw: Any) -> Any:
        headers = {"Origin": self.origin}
        if body is not None and not isinstance(body, bytes):
            kw["json"] = body
        elif body is not None:
            kw["data"] = body
            headers["Content-Type"] = "application/json"
        async with self.http.request(method, self.origin + path, headers=headers, **kw) as resp:
            data = await resp.json()
            if resp.status >= 400:
                raise RuntimeError(f"{method} {path}: {resp.status} {data}")
            return data

    async def profile(
        self, rng: random.Random, context_tokens: int | None = None
    ) -> dict[str, Any]:
        """Import the profile; ``context_tokens`` replaces the preset's ``openai_max_context``."""
        content = PRESET.read_text(encoding="utf-8")
        if context_tokens is not None:
            raw = json.loads(content)
            raw["openai_max_context"] = context_tokens
            content = json.dumps(raw)
        preset = await self.call("POST", f"{API}/import", {"content": content})
        card = await self.call(
            "POST", f"{API}/characters/import", CARD.read_bytes(), params={"filename": CARD.name}
        )
        books = [
            await self.call(
                "POST",
                f"{API}/world-books/import",
                BOOK.read_bytes(),
                params={"filename": BOOK.name},
            ),
            await self.call(
                "POST",
                f"{API}/world-books/import",
                generated_book(rng),
                params={"filename": "generated.json"},
            ),
        ]
        user = await self.call("POST", f"{API}/users", {"name": "Ada", "description": "A ranger."})
        return {
            "preset": preset["preset"]["id"],
            "card": card["character"]["id"],
            "books": [b["worldBook"]["id"] for b in books],
            "user": user["user"]["id"],
        }

    async def session(self, profile: dict[str, Any], title: str) -> str:
        created = await self.call("POST", "/host/api/sessions", {"title": title})
        sid: str = created["session"]["id"]
        await self.call("POST", f"{API}/select", {"id": profile["preset"], "sessionId": sid})
        await self.call(
            "POST",
            f"{API}/character-selection",
            {"sessionId": sid, "characterCardId": profile["card"]},
        )
        await self.call(
            "POST", f"{API}/user-selection", {"sessionId": sid, "userId": profile["user"]}
        )
        await self.call(
            "POST",
            f"{API}/world-book-selection",
            {"sessionId": sid, "worldBookIds": profile["books"]},
        )
        return sid


class Story:
    """One session played turn by turn, its SSE stream open throughout."""

    def __init__(self, client: Client, sid: str) -> None:
        self.client = client
        self.sid = sid
        self.stream: aiohttp.ClientResponse | None = None
        self.replies: list[int] = []
        #: Characters each turn's request sent (the synthetic provider's estimate x 4).
        self.sent: list[int] = []

    async def open(self) -> None:
        self.stream = await self.client.http.get(
            f"{self.client.origin}/host/api/sessions/{self.sid}/events",
            timeout=aiohttp.ClientTimeout(total=None, sock_read=None),
        )

    async def close(self) -> None:
        if self.stream is not None:
            self.stream.close()

    async def turn(self, text: str) -> float:
        """Seconds from the prompt to the turn's ``turn/end`` frame."""
        assert self.stream is not None
        start = time.perf_counter()
        await self.client.call(
            "POST", f"/host/api/sessions/{self.sid}/prompt", {"text": text, "mode": "queue"}
        )
        event = ""
        data: list[str] = []
        async for raw in self.stream.content:
            line = raw.decode().rstrip("\n")
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
            elif not line:
                if event == "assistant/message":
                    body = json.loads("".join(data))["data"]
                    self.replies.append(sum(len(b["text"].encode()) for b in body["content"]))
                    self.sent.append(4 * body["usage"]["promptTokens"])
                if event == "turn/end":
                    return time.perf_counter() - start
                event, data = "", []
        raise RuntimeError("the event stream ended")


def fit_at(xs: list[int], ys: list[float], at: int) -> float:
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    var = sum((x - mean_x) ** 2 for x in xs)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / var
    return mean_y + slope * (at - mean_x)


class Row(NamedTuple):
    """The figures at one mark."""

    turn: int
    wall_s: float
    cpu_s: float
    rss: int
    grown: int
    text: int
    sent_kib: float


async def play_story(
    args: argparse.Namespace, tmp: Path, context_tokens: int | None
) -> tuple[list[Row], list[float], list[float]]:
    """Play ``args.turns`` turns in one session; returns the rows at the marks and each
    turn's wall and CPU seconds."""
    rng = random.Random(18)
    data_dir = tmp / f"story-{context_tokens or 'preset'}"
    server = Server(data_dir, args.malloc_arena_max, args.reply_chars)
    try:
        async with aiohttp.ClientSession() as http:
            await server.wait_ready(http)
            client = Client(http, server.origin)
            profile = await client.profile(rng, context_tokens)
            story = Story(client, await client.session(profile, "bench-story"))
            await story.open()
            marks = sorted({m for m in MARKS if m <= args.turns} | {args.turns})
            times: list[float] = []
            new_text: list[int] = []
            rows: list[Row] = []
            last_bytes, last_turn = durable_bytes(data_dir), 0
            cpu: list[float] = []
            for turn in range(1, args.turns + 1):
                text = user_text(rng)
                before = server.cpu()
                times.append(await story.turn(text))
                cpu.append(server.cpu() - before)
                new_text.append(len(text.encode()) + story.replies[-1])
                if turn in marks:
                    now = durable_bytes(data_dir)
                    grown = (now - last_bytes) / (turn - last_turn)
                    text_per_turn = statistics.fmean(new_text[last_turn:turn])
                    rows.append(
                        Row(
                            turn,
                            statistics.median(times[-WINDOW:]),
                            statistics.fmean(cpu[-WINDOW:]),
                            server.rss(),
                            round(grown),
                            round(text_per_turn),
                            statistics.fmean(story.sent[-WINDOW:]) / 1024,
                        )
                    )
                    last_bytes, last_turn = now, turn
                    label = context_tokens or "preset"
                    print(
                        f"  [{label}] turn {turn}: {rows[-1].wall_s * 1000:.1f} ms", file=sys.stderr
                    )
            await story.close()
    finally:
        server.stop()
    return rows, times, cpu


def print_story(
    args: argparse.Namespace,
    context_tokens: int | None,
    rows: list[Row],
    times: list[float],
    cpu: list[float],
) -> None:
    arena = args.malloc_arena_max
    budget = f"openai_max_context={context_tokens}" if context_tokens else "the preset's budget"
    reply = f"replies of {args.reply_chars} chars" if args.reply_chars else "echo replies"
    print(
        f"\nstory: {args.turns} turns, {budget}, {reply}, "
        f"MALLOC_ARENA_MAX={arena if arena else 'unset'}"
    )
    print(
        f"{'turn':>6} | {'wall ms':>8} | {'x t20':>6} | {'cpu ms':>7} | {'x t20':>6} | "
        f"{'RSS MiB':>8} | {'x t20':>6} | {'bytes/turn':>10} | {'text/turn':>9} | {'x text':>6} | "
        f"{'sent KiB':>8} | {'cpu us/KiB':>10} | {'x t20':>6}"
    )
    base = rows[0]
    base_per_kib = base.cpu_s / base.sent_kib
    for row in rows:
        per_kib = row.cpu_s / row.sent_kib
        print(
            f"{row.turn:>6} | {row.wall_s * 1000:8.1f} | {row.wall_s / base.wall_s:6.2f} | "
            f"{row.cpu_s * 1000:7.1f} | {row.cpu_s / base.cpu_s:6.2f} | "
            f"{row.rss / 2**20:8.1f} | {row.rss / base.rss:6.2f} | "
            f"{row.grown:>10} | {row.text:>9} | {row.grown / row.text:6.2f} | "
            f"{row.sent_kib:8.1f} | {per_kib * 1e6:10.1f} | {per_kib / base_per_kib:6.2f}"
        )
    if 40 <= args.turns < 2_000:
        xs = list(range(21, args.turns + 1))
        for label, ys, first in (("wall", times, base.wall_s), ("cpu", cpu, base.cpu_s)):
            at = fit_at(xs, ys[20:], 2_000)
            print(
                f"linear fit of {label} time over turns 21..{args.turns}: turn 2000 ~ "
                f"{at * 1000:.1f} ms (x{at / first:.2f} turn 20)"
            )


def print_profile(mode: str, stats: pstats.Stats, turns: int) -> None:
    """The ten functions with the most cumulative and the most own time, per turn."""
    # pstats keeps its table in an undocumented attribute: (calls, primitive calls, own seconds,
    # cumulative seconds, callers) per (file, line, function).
    table: dict[tuple[str, int, str], tuple[int, int, float, float, object]]
    table = stats.stats  # type: ignore[attr-defined]
    total = sum(row[2] for row in table.values())
    print(f"\nprofile of the server, {mode}: {total / turns * 1000:.2f} ms CPU/turn (profiled)")

    def name(key: tuple[str, int, str]) -> str:
        path, line, func = key
        if path == "~":
            return func
        parts = Path(path).parts
        short = "/".join(parts[-2:]) if len(parts) > 1 else path
        return f"{short}:{line}({func})"

    for label, column in (("cumulative", 3), ("own", 2)):
        print(f"  top 10 by {label} time (ms/turn, calls/turn)")
        top = sorted(table.items(), key=lambda item: item[1][column], reverse=True)[:10]
        for key, row in top:
            print(f"    {row[column] / turns * 1000:8.3f} {row[0] / turns:8.1f}  {name(key)}")


#: Per mode: elapsed seconds, each turn's latency, server CPU seconds, event-loop CPU seconds.
ConcurrentResults = dict[str, tuple[float, list[float], float, float]]


async def measure_concurrent(
    args: argparse.Namespace, tmp: Path
) -> tuple[ConcurrentResults, dict[str, tuple[pstats.Stats, pstats.Stats]]]:
    """Play ``args.concurrent`` sessions x ``args.concurrent_turns`` turns one after another and
    then at once; the figures per mode and, with ``args.profile``, the server's profiles."""
    rng = random.Random(19)
    profile_out = tmp / "turns.prof" if args.profile else None
    server = Server(tmp / "concurrent", args.malloc_arena_max, profile_out=profile_out)
    profiles: dict[str, tuple[pstats.Stats, pstats.Stats]] = {}
    results: ConcurrentResults = {}
    try:
        async with aiohttp.ClientSession() as http:
            await server.wait_ready(http)
            client = Client(http, server.origin)
            profile = await client.profile(rng)
            n, k = args.concurrent, args.concurrent_turns

            async def stories(prefix: str) -> list[Story]:
                out = [
                    Story(client, await client.session(profile, f"{prefix}{i}")) for i in range(n)
                ]
                for each in out:
                    await each.open()
                return out

            async def play(story: Story) -> list[float]:
                return [await story.turn(user_text(rng)) for _ in range(k)]

            # Warm-up: the first turn compiles the 10,000-entry book's matcher.
            warm = (await stories("warm"))[0]
            await warm.turn(user_text(rng))
            for mode in ("sequential", "concurrent"):
                group = await stories(mode)
                server.profile_start()
                cpu, loop_cpu = server.cpu(), server.loop_cpu()
                start = time.perf_counter()
                if mode == "sequential":
                    latencies = [t for story in group for t in await play(story)]
                else:
                    latencies = [t for ts in await asyncio.gather(*map(play, group)) for t in ts]
                results[mode] = (
                    time.perf_counter() - start,
                    latencies,
                    server.cpu() - cpu,
                    server.loop_cpu() - loop_cpu,
                )
                stats = await server.profile_stop()
                if stats is not None:
                    profiles[mode] = stats
                for story in group:
                    await story.close()
    finally:
        server.stop()
    return results, profiles


def print_concurrent(n: int, k: int, results: ConcurrentResults) -> None:
    """The table of :func:`measure_concurrent`'s figures."""
    print(f"\n{n} sessions x {k} turns (after one warm-up turn)")
    print(
        f"{'mode':>10} | {'turns/s':>7} | {'median ms':>9} | {'p95 ms':>7} | "
        f"{'cpu ms/turn':>11} | {'loop cpu ms/turn':>16}"
    )
    for mode, (elapsed, latencies, cpu_s, loop_s) in results.items():
        latencies = sorted(latencies)
        p95 = latencies[min(len(latencies) - 1, round(0.95 * (len(latencies) - 1)))]
        print(
            f"{mode:>10} | {len(latencies) / elapsed:7.2f} | "
            f"{statistics.median(latencies) * 1000:9.1f} | {p95 * 1000:7.1f} | "
            f"{cpu_s / len(latencies) * 1000:11.1f} | {loop_s / len(latencies) * 1000:16.1f}"
        )
    seq, conc = (len(results[m][1]) / results[m][0] for m in ("sequential", "concurrent"))
    print(f"concurrent / sequential throughput: x{conc / seq:.2f}")


async def play_concurrent(args: argparse.Namespace, tmp: Path) -> None:
    results, profiles = await measure_concurrent(args, tmp)
    n, k = args.concurrent, args.concurrent_turns
    print_concurrent(n, k, results)
    for mode, (loop, workers) in profiles.items():
        print_profile(f"{mode}, the event loop's thread", loop, n * k)
        print_profile(f"{mode}, the other threads", workers, n * k)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=60, help="turns of the long story (0: skip)")
    parser.add_argument("--concurrent", type=int, default=0, help="sessions played at once")
    parser.add_argument("--concurrent-turns", type=int, default=5)
    parser.add_argument("--malloc-arena-max", type=int, default=None)
    parser.add_argument(
        "--context-tokens",
        type=int,
        default=None,
        help="also play the story with the preset's openai_max_context set to this",
    )
    parser.add_argument(
        "--reply-chars",
        type=int,
        default=0,
        help="synthetic replies padded to this many characters (roleplay-length replies)",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="profile the server's event loop over the --concurrent turns (tools/profiled_serve.py)"
        " and print its top 10 functions; the profiler slows the turns, so time without it",
    )
    parser.add_argument("--keep", type=Path, default=None, help="keep the data directories here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="innkeeper-bench-story-") as tmp:
        root = args.keep or Path(tmp)
        if args.turns:
            budgets = [None] if args.context_tokens is None else [None, args.context_tokens]
            results = [(b, *await play_story(args, root, b)) for b in budgets]
            for budget, rows, times, cpu in results:
                print_story(args, budget, rows, times, cpu)
        if args.concurrent:
            await play_concurrent(args, root)


if __name__ == "__main__":
    asyncio.run(main())
