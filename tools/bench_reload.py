"""Reload time of the hello plugin (median of 20) and peak memory across those reloads.

Loads a copy of ``plugins/examples/hello`` as a drop-in plugin into a real host (loopback test
server), then reloads it 20 times, touching its source before each reload as an editor would.
Each reload is timed from the call to the first successful request served by the new generation.
Peak memory is tracemalloc's peak during the reloads (Python allocations) and the process's
resident-set growth.

    uv run --no-sync python tools/bench_reload.py [--reloads 20]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import resource
import shutil
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import aiohttp

REPO = Path(__file__).resolve().parents[1]
HELLO = REPO / "plugins" / "examples" / "hello" / "src" / "innkeeper_hello"


def _rss_kib() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


async def run(reloads: int) -> None:
    from innkeeper_core.testing import start_test_host

    tmp = Path(tempfile.mkdtemp(prefix="bench-reload-"))
    copy = tmp / "plugins" / "hello_copy"
    shutil.copytree(HELLO, copy)
    host = await start_test_host(tmp / "data")
    try:
        await host.load("hello_copy", str(copy))
        source = (copy / "__init__.py").read_text()
        # A plain client session: aiohttp's TestClient keeps every response until it closes,
        # which would show up as growth that is not the host's.
        session = aiohttp.ClientSession()
        url = host.client.make_url("/hello/x")
        async with session.get(url) as resp:
            await resp.read()
        gc.collect()
        rss_before = _rss_kib()
        times: list[float] = []
        peak = 0
        # Pass 1 times the reloads; pass 2 repeats them under tracemalloc for the memory peak
        # (tracing slows allocation, so it must not distort the timings).
        for traced in (False, True):
            if traced:
                tracemalloc.start()
            for i in range(reloads):
                (copy / "__init__.py").write_text(source.replace('"Hello"', f'"Hello{i}"'))
                start = time.perf_counter()
                row = await host.reload("hello_copy")
                async with session.get(url) as resp:
                    body = await resp.json()
                if not traced:
                    times.append(time.perf_counter() - start)
                assert row["state"] == "active", row["lastError"]
                assert body["greeting"] == f"Hello{i}, x!"
            if traced:
                peak = tracemalloc.get_traced_memory()[1]
                tracemalloc.stop()
        gc.collect()
        rss_after = _rss_kib()
        await session.close()
    finally:
        await host.close()
        shutil.rmtree(tmp, ignore_errors=True)
    ms = [t * 1000 for t in times]
    print(f"hello reloads: {reloads} timed, {reloads} traced")
    print(
        f"reload time median {statistics.median(ms):.2f} ms, p90 "
        f"{statistics.quantiles(ms, n=10)[-1]:.2f} ms, max {max(ms):.2f} ms"
    )
    print(f"tracemalloc peak during reloads: {peak / 1024:.0f} KiB")
    print(
        f"resident set: {rss_before} KiB before, {rss_after} KiB after "
        f"({rss_after - rss_before:+d} KiB)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reloads", type=int, default=20)
    args = parser.parse_args()
    asyncio.run(run(args.reloads))
    return 0


if __name__ == "__main__":
    sys.exit(main())
