"""The host a command starts in its own process (``CommandEnvironment.local_host``): the same
routes and guard as a server, no socket, plugins loaded and unloaded with it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from innkeeper_core.cli import command_environment
from innkeeper_core.config import HostConfig
from innkeeper_hostapi.commands import CommandEnvironment, HostClientError


def _env(tmp_path: Path) -> CommandEnvironment:
    return command_environment(HostConfig(data_dir=str(tmp_path / "data"), port=9))


async def test_requests_meet_the_server_routes_and_guard(tmp_path: Path) -> None:
    host = await _env(tmp_path).local_host()
    try:
        assert host.label.startswith(f"data directory {tmp_path / 'data'}")
        health = await host.request("GET", "/healthz")
        assert health.status == 200
        created = await host.request(
            "POST", "/host/api/sessions", body=json.dumps({"title": "from a command"}).encode()
        )
        assert created.status == 201, created.body
        session_id = json.loads(created.body)["session"]["id"]
        listed = json.loads((await host.request("GET", "/host/api/sessions")).body)
        assert session_id in [s["header"]["id"] for s in listed["sessions"]]
        # The guard still applies: a foreign Origin is refused like over loopback.
        foreign = await host.request(
            "POST", "/host/api/sessions", body=b"{}", headers={"Origin": "http://evil.example"}
        )
        assert foreign.status == 403 and json.loads(foreign.body)["code"] == "ORIGIN_FORBIDDEN"
        missing = await host.request("GET", "/no/such/route")
        assert missing.status == 404 and json.loads(missing.body)["ok"] is False
        # An event stream never ends: refused with a clear error instead of hanging.
        with pytest.raises(HostClientError, match="event stream"):
            await host.request("GET", f"/host/api/sessions/{session_id}/events")
        plugins = json.loads((await host.request("GET", "/host/api/plugins")).body)["plugins"]
        assert {p["name"] for p in plugins} >= {"tavern", "assembler"}
        assert all(p["state"] == "active" for p in plugins)
    finally:
        modules = dict(sys.modules)
        await host.close()
    # Unloading purged the plugins' modules; the process's own module objects are back.
    assert sys.modules.get("innkeeper_tavern.face.cli.import_export") is modules.get(
        "innkeeper_tavern.face.cli.import_export"
    )
    with pytest.raises(HostClientError, match="stopped"):
        await host.request("GET", "/healthz")
    # The session is durable: the next host (or server) on the data directory sees it.
    again = await _env(tmp_path).local_host()
    try:
        listed = json.loads((await again.request("GET", "/host/api/sessions")).body)
        assert session_id in [s["header"]["id"] for s in listed["sessions"]]
    finally:
        await again.close()


async def test_an_environment_without_a_host_says_so(tmp_path: Path) -> None:
    env = CommandEnvironment(data_dir=str(tmp_path), base_url="http://127.0.0.1:9")
    with pytest.raises(HostClientError, match="without a host"):
        await env.local_host()
