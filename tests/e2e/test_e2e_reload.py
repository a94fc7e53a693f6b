"""The real server with ``--reload`` picks up an edited plugin without restarting."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from .conftest import REPO

HELLO_SOURCE = REPO / "plugins" / "examples" / "hello" / "src" / "innkeeper_hello"

pytestmark = pytest.mark.slow


def test_edit_hello_copy_and_see_change_over_http(tmp_path: Path, start_server: Any) -> None:
    plugins = tmp_path / "plugins"
    copy = plugins / "hello_copy"
    shutil.copytree(HELLO_SOURCE, copy)
    server = start_server(
        "--reload",
        "--data-dir",
        str(tmp_path / "data"),
        "--plugin-dir",
        str(plugins),
        "--block",
        "hello",
    )
    pid = server.get("/healthz")["pid"]
    assert server.get("/hello/Ada")["greeting"] == "Hello, Ada!"

    init = copy / "__init__.py"
    init.write_text(
        init.read_text().replace('DEFAULT_GREETING = "Hello"', 'DEFAULT_GREETING = "Howdy"')
    )

    server.wait_until(
        lambda: server.get("/hello/Ada")["greeting"] == "Howdy, Ada!", 20, "the reloaded greeting"
    )
    assert server.get("/healthz")["pid"] == pid  # reloaded in place, no restart
    rows = {p["name"]: p for p in server.get("/host/api/plugins")["plugins"]}
    assert rows["hello_copy"]["state"] == "active"
    assert rows["hello_copy"]["generation"] == 2

    # A syntax error keeps the previous generation serving and is reported.
    init.write_text(init.read_text() + "\ndef broken(:\n")
    server.wait_until(
        lambda: (
            {p["name"]: p for p in server.get("/host/api/plugins")["plugins"]}["hello_copy"][
                "state"
            ]
            == "failed"
        ),
        20,
        "the failed reload to be reported",
    )
    assert server.get("/hello/Ada")["greeting"] == "Howdy, Ada!"
    assert server.get("/healthz")["pid"] == pid


def test_host_source_change_restarts_the_server(
    tmp_path: Path, start_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    host_sources = tmp_path / "host-src"
    host_sources.mkdir()
    (host_sources / "module.py").write_text("VALUE = 1\n")
    monkeypatch.setenv("INNKEEPER_RESTART_PATHS", str(host_sources))
    server = start_server("--reload", "--data-dir", str(tmp_path / "data"), "--block", "hello")
    pid = server.get("/healthz")["pid"]
    (host_sources / "module.py").write_text("VALUE = 2\n")
    server.wait_until(
        lambda: server.get("/healthz")["pid"] != pid, 30, "the server to restart in a new process"
    )
    assert server.process.poll() is None  # the supervisor itself keeps running
