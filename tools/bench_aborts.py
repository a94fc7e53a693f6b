"""``/healthz`` latency while 1,000 clients abort uploads, against the same server idle.

Starts a real server (``innkeeper serve``, every built-in plugin, temporary data directory, a
free loopback port) in a subprocess, then measures ``GET /healthz`` round trips:

1. idle (the baseline, same run, same server);
2. while ``--clients`` concurrent clients each repeatedly open a connection, send the headers
   and part of a JSON upload (``Content-Length`` 60,000, 1,000 bytes sent) and close it;
3. while the same clients send the same uploads whole (a refused 1 KB body, answer read): the
   cost of the traffic itself, so the abort phase can be compared with it;
4. while the same number of clients hold stalled uploads open (one byte of the body sent).

It prints median and p95 latency per phase, their ratios to idle (issue 19's goal: within 2×),
how many aborts were made and how much the server log grew (at the default INFO level an
aborted upload logs nothing).

    uv run --no-sync python tools/bench_aborts.py [--clients 1000] [--seconds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def upload_head(port: int, length: int) -> bytes:
    return (
        f"POST /host/api/sessions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Origin: http://127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()


async def probe(session: aiohttp.ClientSession, url: str, seconds: float) -> list[float]:
    """Sequential ``/healthz`` round trips (milliseconds) for ``seconds``."""
    samples: list[float] = []
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        started = time.perf_counter()
        async with session.get(url) as resp:
            await resp.read()
            assert resp.status == 200, resp.status
        samples.append((time.perf_counter() - started) * 1000)
        await asyncio.sleep(0.005)
    return samples


async def aborter(port: int, stop: asyncio.Event, counter: list[int]) -> None:
    head = upload_head(port, 60_000) + b'{"title": "' + b"x" * 1000
    while not stop.is_set():
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.01)
            continue
        writer.write(head)
        with contextlib.suppress(OSError):
            await writer.drain()
        writer.transport.abort()  # no FIN handshake: the upload just stops
        counter[0] += 1
        await asyncio.sleep(0)


async def completer(port: int, stop: asyncio.Event, counter: list[int]) -> None:
    """The same traffic finished: a whole (refused) upload whose answer is read."""
    body = b'{"title": ' + b"1" * 1000
    head = upload_head(port, len(body)) + body
    while not stop.is_set():
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.01)
            continue
        writer.write(head)
        with contextlib.suppress(OSError):
            await writer.drain()
            await reader.read(4096)
        writer.transport.abort()
        counter[0] += 1
        await asyncio.sleep(0)


async def staller(port: int, stop: asyncio.Event) -> None:
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return
    writer.write(upload_head(port, 100) + b"{")
    await writer.drain()
    with contextlib.suppress(OSError, asyncio.CancelledError):
        await stop.wait()
    writer.transport.abort()
    del reader


def summary(name: str, samples: list[float], idle: list[float] | None) -> str:
    median = statistics.median(samples)
    p95 = statistics.quantiles(samples, n=20)[-1] if len(samples) >= 20 else max(samples)
    line = f"{name:<28} n={len(samples):>5}  median {median:7.2f} ms  p95 {p95:7.2f} ms"
    if idle is not None:
        line += (
            f"  ratio median {median / statistics.median(idle):5.2f}x"
            f"  p95 {p95 / statistics.quantiles(idle, n=20)[-1]:5.2f}x"
        )
    return line


async def load(kind: str, port: int, clients: int, seconds: float) -> None:
    """The load side (its own process, so the probe's latency is the server's, not ours)."""
    stop = asyncio.Event()
    counter = [0]
    if kind == "abort":
        tasks = [asyncio.create_task(aborter(port, stop, counter)) for _ in range(clients)]
    elif kind == "complete":
        tasks = [asyncio.create_task(completer(port, stop, counter)) for _ in range(clients)]
    else:
        tasks = [asyncio.create_task(staller(port, stop)) for _ in range(clients)]
    await asyncio.sleep(seconds)
    stop.set()
    await asyncio.gather(*tasks)
    print(counter[0], flush=True)


def start_load(kind: str, port: int, clients: int, seconds: float) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--load",
            kind,
            "--port",
            str(port),
            "--clients",
            str(clients),
            "--seconds",
            str(seconds),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )


async def measure(port: int, clients: int, seconds: float, log: Path) -> None:
    url = f"http://127.0.0.1:{port}/healthz"
    async with aiohttp.ClientSession() as session:
        await probe(session, url, 0.5)  # warm-up
        idle = await probe(session, url, seconds)
        print(summary("idle (baseline)", idle, None))

        log_before = await asyncio.to_thread(os.path.getsize, log)
        loader = start_load("abort", port, clients, seconds + 1.5)
        await asyncio.sleep(1.0)
        busy = await probe(session, url, seconds)
        out, _ = await asyncio.to_thread(loader.communicate)
        print(summary(f"{clients} clients aborting", busy, idle))
        await asyncio.sleep(1.0)
        grown = await asyncio.to_thread(os.path.getsize, log) - log_before
        print(f"  aborted uploads: {out.strip()}; server log grew by {grown} bytes")

        loader = start_load("complete", port, clients, seconds + 1.5)
        await asyncio.sleep(1.0)
        finished = await probe(session, url, seconds)
        out, _ = await asyncio.to_thread(loader.communicate)
        print(summary(f"{clients} clients, whole uploads", finished, idle))
        print(f"  whole (refused) uploads: {out.strip()}")
        print(
            "  aborting vs whole uploads: median "
            f"{statistics.median(busy) / statistics.median(finished):5.2f}x"
        )

        loader = start_load("stall", port, clients, seconds + 2.0)
        await asyncio.sleep(1.5)
        stalled = await probe(session, url, seconds)
        await asyncio.to_thread(loader.communicate)
        print(summary(f"{clients} stalled uploads", stalled, idle))
        after = await probe(session, url, min(seconds, 2.0))
        print(summary("idle again", after, idle))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--load", choices=("abort", "complete", "stall"), help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.load:
        asyncio.run(load(args.load, args.port, args.clients, args.seconds))
        return 0
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="innkeeper-bench-aborts-") as tmp:
        log = Path(tmp) / "server.log"
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env.pop("INNKEEPER_SUPERVISED", None)
        command = [
            sys.executable,
            "-m",
            "innkeeper_core",
            "serve",
            "--port",
            str(port),
            "--data-dir",
            str(Path(tmp) / "data"),
        ]
        with log.open("wb") as out:
            server = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=1):
                        break
                except OSError:
                    if time.monotonic() > deadline or server.poll() is not None:
                        print(log.read_text()[-4000:])
                        return 1
                    time.sleep(0.2)
            asyncio.run(measure(port, args.clients, args.seconds, log))
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
