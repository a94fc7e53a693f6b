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


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    base: str
    log: Path

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
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env.pop("INNKEEPER_SUPERVISED", None)
        command = [sys.executable, "-m", "innkeeper_core", "serve", "--port", str(port), *args]
        with log.open("wb") as out:
            process = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        server = Server(process, f"http://127.0.0.1:{port}", log)
        servers.append(server)
        server.wait_until(lambda: server.get("/healthz")["ok"], STARTUP_SECONDS, "server start")
        return server

    yield start
    for server in servers:
        if server.process.poll() is None:
            os.killpg(server.process.pid, signal.SIGTERM)
            try:
                server.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(server.process.pid, signal.SIGKILL)
                server.process.wait()
