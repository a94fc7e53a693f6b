"""Route dispatch overhead: the host's reloadable route table against aiohttp's own router.

Runs one server process with two apps side by side (same middlewares): on one port a trivial
route served through the catch-all route table holding 500 other plugin routes; on the other the
same handler registered directly on aiohttp's router. This process is the load generator (a
second process on loopback); rounds alternate between the two so drift hits both equally.

    uv run --no-sync python tools/bench_routes.py [--seconds 3] [--rounds 5] [--concurrency 32]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import aiohttp
from aiohttp import web

OTHER_ROUTES = 500
TARGET = "/bench/items/{item_id}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def _table_handler(request: web.Request) -> web.StreamResponse:
    from innkeeper_hostapi import json_response, path_params

    return json_response({"ok": True, "id": path_params(request)["item_id"]})


async def _direct_handler(request: web.Request) -> web.StreamResponse:
    from innkeeper_hostapi import json_response

    return json_response({"ok": True, "id": request.match_info["item_id"]})


def serve(table_port: int, direct_port: int) -> None:
    from innkeeper_core.app import CONTAINER, create_app
    from innkeeper_core.config import HostConfig
    from innkeeper_core.http.problems import problem_middleware

    data = tempfile.mkdtemp(prefix="bench-routes-")
    table_app = create_app(HostConfig(data_dir=data, port=table_port), load_plugins=False)
    container = table_app[CONTAINER]
    routes = container.registries().routes
    for i in range(OTHER_ROUTES):
        template = f"/api/v{i % 5}/resource{i}/{{item_id}}" if i % 2 else f"/plugin{i}/status"
        routes.add("GET", template, _table_handler, owner="bench", max_body=0, accepts=())
    routes.add("GET", TARGET, _table_handler, owner="bench", max_body=0, accepts=())

    guard = container.guard()
    chain = container.registries().middlewares
    direct_app = web.Application(
        middlewares=[problem_middleware, guard.middleware, chain.middleware]
    )
    direct_app.router.add_get(TARGET, _direct_handler)

    async def main() -> None:
        runners = []
        for app, port in ((table_app, table_port), (direct_app, direct_port)):
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", port).start()
            runners.append(runner)
        print("ready", flush=True)
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        await stop.wait()
        for runner in runners:
            await runner.cleanup()

    asyncio.run(main())


async def _load(url: str, seconds: float, concurrency: int) -> float:
    connector = aiohttp.TCPConnector(limit=concurrency)
    count = 0
    async with aiohttp.ClientSession(connector=connector) as session:
        deadline = time.perf_counter() + seconds

        async def worker() -> None:
            nonlocal count
            while time.perf_counter() < deadline:
                async with session.get(url) as resp:
                    await resp.read()
                    if resp.status != 200:
                        raise RuntimeError(f"unexpected status {resp.status}")
                count += 1

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - start
    return count / elapsed


def micro(iterations: int = 200_000) -> None:
    """In-process lookup cost: the table's resolve with 501 routes vs aiohttp's own router."""
    import timeit

    from aiohttp.test_utils import make_mocked_request

    from innkeeper_core.http.routes import RouteTable

    table = RouteTable()
    for i in range(OTHER_ROUTES):
        template = f"/api/v{i % 5}/resource{i}/{{item_id}}" if i % 2 else f"/plugin{i}/status"
        table.add("GET", template, _table_handler, owner="bench", max_body=0, accepts=())
    table.add("GET", TARGET, _table_handler, owner="bench", max_body=0, accepts=())
    router = web.UrlDispatcher()
    router.add_get(TARGET, _direct_handler)
    request = make_mocked_request("GET", "/bench/items/42")

    def table_lookup() -> object:
        return table.resolve("GET", "/bench/items/42")

    loop = asyncio.new_event_loop()

    async def resolve_many(n: int) -> float:
        start = time.perf_counter()
        for _ in range(n):
            await router.resolve(request)
        return time.perf_counter() - start

    table_s = min(timeit.repeat(table_lookup, number=iterations, repeat=5))
    router_s = min(loop.run_until_complete(resolve_many(iterations)) for _ in range(5))
    loop.close()
    per = 1e9 / iterations
    print(
        f"lookup, in process: table (501 routes) {table_s * per:.0f} ns, "
        f"aiohttp router (1 route) {router_s * per:.0f} ns per request"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--serve", nargs=2, type=int, help=argparse.SUPPRESS)
    parser.add_argument("--micro", action="store_true", help="only the in-process lookup cost")
    args = parser.parse_args()
    pin = (os.cpu_count() or 1) >= 2 and hasattr(os, "sched_setaffinity")
    if args.serve:
        if pin:
            os.sched_setaffinity(0, {0})
        serve(*args.serve)
        return 0
    if args.micro:
        micro()
        return 0
    if pin:
        os.sched_setaffinity(0, {1})

    table_port, direct_port = _free_port(), _free_port()
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(table_port), str(direct_port)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        if server.stdout.readline().strip() != "ready":
            raise RuntimeError("benchmark server did not start")
        urls = {
            "table": f"http://127.0.0.1:{table_port}/bench/items/42",
            "direct": f"http://127.0.0.1:{direct_port}/bench/items/42",
        }
        results: dict[str, list[float]] = {"table": [], "direct": []}
        for url in urls.values():  # warm-up
            asyncio.run(_load(url, 0.5, args.concurrency))
        for _ in range(args.rounds):
            for name, url in urls.items():
                results[name].append(asyncio.run(_load(url, args.seconds, args.concurrency)))
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=10)

    table = statistics.median(results["table"])
    direct = statistics.median(results["direct"])
    rounds = {k: [round(r) for r in v] for k, v in results.items()}
    print(f"cpus: {os.cpu_count()}, concurrency {args.concurrency}, ", end="")
    print(f"{args.rounds} rounds x {args.seconds}s, server pinned to cpu 0, client to cpu 1")
    print(f"route table ({OTHER_ROUTES + 1} routes): {table:9.0f} req/s  rounds={rounds['table']}")
    print(f"aiohttp router (1 route):      {direct:9.0f} req/s  rounds={rounds['direct']}")
    overhead = 100 * (1 - table / direct)
    print(f"table / direct throughput ratio: {table / direct:.3f}  (overhead {overhead:+.1f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
