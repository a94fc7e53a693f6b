#!/usr/bin/env python3
"""The hot paths of issue 32 in one run: world-book activation and a turn's own cost.

Prints, in order:

1. **World books** (``tools/bench_worldbook.py``'s report): dense, sparse and no-match full
   activation vs our matcher alone vs pyahocorasick vs SillyTavern's scan loop in Node; the
   matcher's build vs pyahocorasick's; an edit then the next activation (in process, a book
   edited on disk and, unless ``--no-http``, over HTTP).
2. **A turn's host cost** (``tools/bench_story.py``'s concurrent run): a real server (every
   built-in plugin, the synthetic provider with no delay, so a turn's wall time is host time),
   the corpus preset and card, a 10,000-entry book bound; ``--sessions`` sessions x
   ``--turns`` turns played one after another and then all at once: turns/s, median and p95
   latency from the prompt to the ``turn/end`` frame on the session's SSE stream, the server's
   CPU per turn and its event loop's share. Every turn is acknowledged only once on disk (the
   store's fsync). With ``--against DIR`` (another checkout, e.g. ``git archive <commit> | tar
   -x -C DIR``) the same run first measures that tree (its ``*/src`` folders on
   ``PYTHONPATH``) and prints this tree's figures as ratios to it.
3. **Where the time goes**: the same sequential turns under cProfile
   (``tools/profiled_serve.py``): the ten functions with the most cumulative and the most own
   time per turn, on the event loop's thread and on the others (the store's writer and read
   pool, ``to_thread`` work). The profiler slows the turns: read shares, not times.
4. **Beyond one process**: the concurrent sessions split over two server processes (each its
   own data directory: one data directory takes one server, see ``docs/operations.md``)
   against one process, same client, same run: whether more processes would lift turns/s on
   this machine.

Nothing here asserts a timing: read the numbers. Takes a few minutes (``--no-node``,
``--no-http`` and ``--no-split`` shorten it).

    uv run --no-sync python tools/bench_hotpaths.py [--repeat 15] [--sessions 20] [--turns 5]
        [--against /tmp/base] [--no-node] [--no-http] [--no-split]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pstats
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_story
import bench_worldbook

#: Source roots of a checkout, in the order the host resolves its packages.
SOURCE_ROOTS = (
    "hostapi/src",
    "core/src",
    "plugins/tavern/src",
    "plugins/assembler/src",
    "plugins/webui/src",
)


def _story_args(sessions: int, turns: int, *, profile: bool = False) -> argparse.Namespace:
    return argparse.Namespace(
        concurrent=sessions, concurrent_turns=turns, malloc_arena_max=None, profile=profile
    )


async def _turn_cost(
    sessions: int, turns: int, tmp: Path, *, tree: Path | None = None, profile: bool = False
) -> tuple[bench_story.ConcurrentResults, dict[str, tuple[pstats.Stats, pstats.Stats]]]:
    """:func:`bench_story.measure_concurrent`, its servers running ``tree``'s sources when
    given (the servers inherit ``PYTHONPATH``)."""
    await asyncio.to_thread(tmp.mkdir, parents=True, exist_ok=True)
    saved = os.environ.get("PYTHONPATH")
    if tree is not None:
        os.environ["PYTHONPATH"] = os.pathsep.join(str(tree / r) for r in SOURCE_ROOTS)
    try:
        results, profiles = await bench_story.measure_concurrent(
            _story_args(sessions, turns, profile=profile), tmp
        )
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    return results, profiles


def _figures(results: bench_story.ConcurrentResults, mode: str) -> dict[str, float]:
    elapsed, latencies, cpu_s, loop_s = results[mode]
    n = len(latencies)
    return {
        "turns/s": n / elapsed,
        "median ms": statistics.median(latencies) * 1000,
        "cpu ms/turn": cpu_s / n * 1000,
        "loop cpu ms/turn": loop_s / n * 1000,
    }


def _print_ratios(ours: bench_story.ConcurrentResults, base: bench_story.ConcurrentResults) -> None:
    print("\nthis tree / --against tree (same run; turns/s above 1 and times below 1 are better)")
    names = list(_figures(ours, "sequential"))
    print(f"{'mode':>10} | " + " | ".join(f"{n:>16}" for n in names))
    for mode in ("sequential", "concurrent"):
        a, b = _figures(ours, mode), _figures(base, mode)
        print(f"{mode:>10} | " + " | ".join(f"{'x%.2f' % (a[n] / b[n]):>16}" for n in names))


async def _split(processes: int, sessions: int, turns: int, tmp: Path) -> tuple[float, float]:
    """``sessions`` sessions played at once, spread over ``processes`` servers (each with its
    own data directory and the same imports): turns/s and server CPU ms per turn (all)."""
    rng = random.Random(23)
    servers = [bench_story.Server(tmp / f"split{processes}-{i}", None) for i in range(processes)]
    try:
        async with aiohttp.ClientSession() as http:
            stories: list[bench_story.Story] = []
            for index, server in enumerate(servers):
                await server.wait_ready(http)
                client = bench_story.Client(http, server.origin)
                profile = await client.profile(rng)
                warm = bench_story.Story(client, await client.session(profile, "warm"))
                await warm.open()
                await warm.turn(bench_story.user_text(rng))
                await warm.close()
                for i in range(index, sessions, processes):
                    story = bench_story.Story(client, await client.session(profile, f"s{i}"))
                    await story.open()
                    stories.append(story)

            async def play(story: bench_story.Story) -> int:
                for _ in range(turns):
                    await story.turn(bench_story.user_text(rng))
                return turns

            cpu = sum(s.cpu() for s in servers)
            start = time.perf_counter()
            played = sum(await asyncio.gather(*map(play, stories)))
            elapsed = time.perf_counter() - start
            cpu = sum(s.cpu() for s in servers) - cpu
            for story in stories:
                await story.close()
    finally:
        for server in servers:
            server.stop()
    return played / elapsed, cpu / played * 1000


async def _turns(args: argparse.Namespace, tmp: Path) -> None:
    n, k = args.sessions, args.turns
    base = None
    if args.against is not None:
        print(f"\n== a turn's host cost, --against {args.against}")
        base, _ = await _turn_cost(n, k, tmp / "against", tree=args.against)
        bench_story.print_concurrent(n, k, base)
    print("\n== a turn's host cost, this tree")
    ours, _ = await _turn_cost(n, k, tmp / "ours")
    bench_story.print_concurrent(n, k, ours)
    median = _figures(ours, "sequential")["median ms"]
    print(f"median host time per turn (one session at a time): {median:.1f} ms (goal: under 10)")
    if base is not None:
        _print_ratios(ours, base)

    print("\n== where a turn's time goes (sequential turns under cProfile)")
    _, profiles = await _turn_cost(n, k, tmp / "profiled", profile=True)
    loop, workers = profiles["sequential"]
    bench_story.print_profile("the event loop's thread", loop, n * k)
    bench_story.print_profile("the other threads", workers, n * k)

    if not args.no_split:
        print(f"\n== {n} sessions at once: one server process vs two (each its own data dir)")
        one = await _split(1, n, k, tmp)
        two = await _split(2, n, k, tmp)
        cores = os.cpu_count() or 1
        print(f"{'processes':>9} | {'turns/s':>7} | {'cpu ms/turn':>11}   ({cores} cores)")
        for label, (rate, cpu) in (("1", one), ("2", two)):
            print(f"{label:>9} | {rate:7.2f} | {cpu:11.1f}")
        print(f"two processes / one: x{two[0] / one[0]:.2f} turns/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=15, help="world-book rounds")
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--turns", type=int, default=5, help="turns per session")
    parser.add_argument(
        "--against", type=Path, default=None, help="another checkout to measure first"
    )
    parser.add_argument("--no-node", action="store_true", help="skip SillyTavern's loop")
    parser.add_argument("--no-http", action="store_true", help="skip the edit over HTTP")
    parser.add_argument("--no-split", action="store_true", help="skip the two-process run")
    parser.add_argument("--no-worldbook", action="store_true", help="skip the world-book figures")
    args = parser.parse_args()
    if not args.no_worldbook:
        print("== world books (tools/bench_worldbook.py)")
        bench_worldbook.report(args.repeat, node=not args.no_node, http=not args.no_http)
    with tempfile.TemporaryDirectory(prefix="innkeeper-bench-hotpaths-") as tmp:
        asyncio.run(_turns(args, Path(tmp)))


if __name__ == "__main__":
    main()
