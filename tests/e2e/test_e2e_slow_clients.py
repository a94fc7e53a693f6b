"""Issue 19 items 6 and 7 against the real server (``innkeeper serve``, not the test server).

A client that disconnects mid-upload is one short debug line (no traceback, nothing at INFO);
a stalled body is answered 408 after ``--body-idle-timeout``; one peer cannot hold more than
``--max-pending-bodies-per-peer`` unfinished bodies (the next is 429 at once).
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any
from urllib.parse import urlsplit

import pytest

pytestmark = pytest.mark.slow


def _upload_head(port: int, length: int) -> bytes:
    return (
        f"POST /host/api/sessions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Origin: http://127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()


def _port(server: Any) -> int:
    port = urlsplit(server.base).port
    assert port is not None
    return port


def _connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    return sock


def test_aborted_uploads_are_one_debug_line_each(start_server: Any) -> None:
    os.environ["INNKEEPER_LOG_LEVEL"] = "DEBUG"
    try:
        server = start_server()
    finally:
        del os.environ["INNKEEPER_LOG_LEVEL"]
    port = _port(server)
    before = server.log.read_text()
    aborts = 50
    for _ in range(aborts):
        sock = _connect(port)
        sock.sendall(_upload_head(port, 60_000) + b'{"title": "' + b"x" * 1000)
        time.sleep(0.01)
        sock.close()

    def logged() -> int:
        return server.log.read_text().count("client went away")

    server.wait_until(lambda: logged() >= aborts, 10, "one debug line per aborted upload")
    assert server.get("/healthz")["ok"] is True
    added = server.log.read_text()[len(before) :]
    assert "Traceback" not in added
    assert " ERROR " not in added and " WARNING " not in added
    lines = [line for line in added.splitlines() if "client went away" in line]
    assert len(lines) == aborts
    assert all(" DEBUG " in line and len(line) < 200 for line in lines)


def test_aborted_uploads_log_nothing_at_info(start_server: Any) -> None:
    server = start_server()
    port = _port(server)
    before = server.log.stat().st_size
    for _ in range(30):
        sock = _connect(port)
        sock.sendall(_upload_head(port, 60_000) + b"{")
        sock.close()
    time.sleep(0.5)
    assert server.get("/healthz")["ok"] is True
    assert server.log.stat().st_size == before


def test_stalled_body_is_408_after_the_idle_timeout(start_server: Any) -> None:
    server = start_server("--body-idle-timeout", "1")
    port = _port(server)
    sock = _connect(port)
    started = time.monotonic()
    sock.sendall(_upload_head(port, 100) + b"{")
    answer = sock.recv(4096)
    waited = time.monotonic() - started
    sock.close()
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert b'"code":"BODY_TIMEOUT"' in answer
    assert 0.9 <= waited < 8, waited


def test_pending_bodies_per_peer_are_capped(start_server: Any) -> None:
    server = start_server("--max-pending-bodies-per-peer", "5", "--body-idle-timeout", "30")
    port = _port(server)
    held = []
    for _ in range(5):
        sock = _connect(port)
        sock.sendall(_upload_head(port, 100) + b"{")
        held.append(sock)
    time.sleep(0.3)  # the five are reading their bodies
    extra = _connect(port)
    extra.sendall(_upload_head(port, 100) + b"{")
    answer = extra.recv(4096)
    extra.close()
    assert answer.startswith(b"HTTP/1.1 429"), answer[:200]
    assert b"TOO_MANY_PENDING_BODIES" in answer and b"Retry-After: 1" in answer
    assert server.get("/healthz")["ok"] is True  # reads are not bodies: still served
    for sock in held:
        sock.close()
    # Once they are gone, uploads are admitted again.
    server.wait_until(lambda: _admitted(port), 10, "admission after the stalled clients left")


def _admitted(port: int) -> bool:
    sock = _connect(port)
    body = b'{"title": "after"}'
    sock.sendall(_upload_head(port, len(body)) + body)
    answer = sock.recv(4096)
    sock.close()
    return answer.startswith(b"HTTP/1.1 201")
