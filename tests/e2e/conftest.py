"""End-to-end helpers: run the real ``innkeeper`` server in a subprocess on a free port."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
STARTUP_SECONDS = 30.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def spawn(port: int, args: tuple[str, ...], log: Path) -> subprocess.Popen[bytes]:
    """Start ``innkeeper serve`` on ``port`` in its own process group, output added to ``log``."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("INNKEEPER_SUPERVISED", None)
    command = [sys.executable, "-m", "innkeeper_core", "serve", "--port", str(port), *args]
    with log.open("ab") as out:
        return subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the server's process group; SIGKILL it after 10 s."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    base: str
    log: Path
    port: int
    args: tuple[str, ...]

    def stop(self) -> None:
        """Shut the server down (its streams close); ``start`` brings it back on the same port."""
        stop(self.process)

    def start(self) -> None:
        """Start the server again with the same port, arguments and data directory."""
        self.process = spawn(self.port, self.args, self.log)
        self.wait_until(lambda: self.get("/healthz")["ok"], STARTUP_SECONDS, "server restart")

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.base + path, timeout=5) as resp:
            return json.loads(resp.read())

    def wait_until(self, predicate: Any, seconds: float, what: str) -> Any:
        deadline = time.monotonic() + seconds
        last: Any = None
        while time.monotonic() < deadline:
            try:
                last = predicate()
            except (urllib.error.URLError, ConnectionError, OSError):
                last = None
            if last:
                return last
            if self.process.poll() is not None:
                break
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what}; log:\n{self.log.read_text()[-4000:]}")


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator[Any]:
    servers: list[Server] = []

    def start(*args: str) -> Server:
        port = free_port()
        log = tmp_path / f"server-{port}.log"
        server = Server(spawn(port, args, log), f"http://127.0.0.1:{port}", log, port, args)
        servers.append(server)
        server.wait_until(lambda: server.get("/healthz")["ok"], STARTUP_SECONDS, "server start")
        return server

    yield start
    for server in servers:
        server.stop()
