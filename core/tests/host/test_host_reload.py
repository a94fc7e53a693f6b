"""Reloading plugins: no growth, old code collected, failures keep the old generation serving."""

from __future__ import annotations

import asyncio
import gc
import sys
import weakref
from collections.abc import Callable
from pathlib import Path

from innkeeper_hostapi.testing import RunningHost

PluginWriter = Callable[[str, str], Path]

VERSIONED = """
import asyncio
from innkeeper_hostapi import EventKey, ServiceKey, hookimpl, json_response
from . import helper

KEY = ServiceKey("counter.service")
EVENT = EventKey("counter/event")

@hookimpl
def innkeeper_plugin_setup(ctx):
    ctx.provide(KEY, lambda: {{"version": {version}}})

    async def listener(payload):
        pass

    ctx.on(EVENT, listener)

    async def idle():
        await asyncio.Event().wait()

    ctx.spawn(idle(), name="idle")

    async def handler(request):
        return json_response({{"version": helper.VERSION, "service": ctx.get(KEY)["version"]}})

    ctx.add_route("GET", "/counter", handler)
"""


def plugin_task_count() -> int:
    return sum(1 for t in asyncio.all_tasks() if t.get_name().startswith("plugin:"))


def write_versioned(write_plugin: PluginWriter, version: int) -> Path:
    folder = write_plugin("counter", VERSIONED.format(version=version))
    (folder / "helper.py").write_text(f"VERSION = {version}\n")
    return folder


async def test_twenty_reloads_grow_nothing_and_collect_old_modules(
    innkeeper_host: RunningHost, write_plugin: PluginWriter
) -> None:
    folder = write_versioned(write_plugin, 0)
    await innkeeper_host.load("counter", str(folder))
    baseline = innkeeper_host.snapshot()
    module_count = len(sys.modules)
    task_count = plugin_task_count()
    old_module = weakref.ref(sys.modules["innkeeper_plugins.counter"])
    old_helper = weakref.ref(sys.modules["innkeeper_plugins.counter.helper"])

    for version in range(1, 21):
        write_versioned(write_plugin, version)
        row = await innkeeper_host.reload("counter")
        assert row["state"] == "active", row["lastError"]
        resp = await innkeeper_host.client.get("/counter")
        assert await resp.json() == {"version": version, "service": version}

    gc.collect()
    assert old_module() is None
    assert old_helper() is None
    assert innkeeper_host.snapshot() == baseline
    assert len(sys.modules) == module_count
    assert plugin_task_count() == task_count == 1
    assert innkeeper_host.status("counter")["generation"] == 21


async def test_syntax_error_keeps_old_generation_serving(
    innkeeper_host: RunningHost, write_plugin: PluginWriter
) -> None:
    folder = write_versioned(write_plugin, 1)
    await innkeeper_host.load("counter", str(folder))
    (folder / "helper.py").write_text("VERSION = (\n")
    row = await innkeeper_host.reload("counter")
    assert row["state"] == "failed"
    assert "SyntaxError" in row["lastError"]
    assert row["serving"] is True
    resp = await innkeeper_host.client.get("/counter")
    assert await resp.json() == {"version": 1, "service": 1}

    write_versioned(write_plugin, 2)
    row = await innkeeper_host.reload("counter")
    assert row["state"] == "active"
    assert row["lastError"] is None
    assert await (await innkeeper_host.client.get("/counter")).json() == {
        "version": 2,
        "service": 2,
    }


async def test_failing_new_setup_restores_old_generation(
    innkeeper_host: RunningHost, write_plugin: PluginWriter
) -> None:
    folder = write_versioned(write_plugin, 1)
    await innkeeper_host.load("counter", str(folder))
    (folder / "__init__.py").write_text(
        "from innkeeper_hostapi import hookimpl\n"
        "@hookimpl\n"
        "def innkeeper_plugin_setup(ctx):\n"
        "    raise ValueError('new code is broken')\n"
    )
    row = await innkeeper_host.reload("counter")
    assert row["state"] == "failed"
    assert "new code is broken" in row["lastError"]
    assert row["serving"] is True
    assert await (await innkeeper_host.client.get("/counter")).json() == {
        "version": 1,
        "service": 1,
    }


async def test_requests_during_reload_get_503_with_retry_after(
    innkeeper_host: RunningHost, write_plugin: PluginWriter
) -> None:
    folder = write_plugin(
        "slow",
        """
        import asyncio
        from innkeeper_hostapi import hookimpl, json_response

        GATE = asyncio.Event()

        @hookimpl
        def innkeeper_plugin_setup(ctx):
            async def slow(request):
                await GATE.wait()
                return json_response({"ok": True})

            async def fast(request):
                return json_response({"ok": True})

            ctx.add_route("GET", "/slow", slow)
            ctx.add_route("GET", "/fast", fast)
        """,
    )
    await innkeeper_host.load("slow", str(folder))
    module = sys.modules["innkeeper_plugins.slow"]
    in_flight = asyncio.ensure_future(innkeeper_host.client.get("/slow"))
    await asyncio.sleep(0.05)
    reload = asyncio.ensure_future(innkeeper_host.reload("slow"))
    await asyncio.sleep(0.05)
    resp = await innkeeper_host.client.get("/fast")
    assert resp.status == 503
    assert resp.headers["Retry-After"] == "1"
    assert (await resp.json())["code"] == "PLUGIN_RELOADING"
    module.GATE.set()  # the drained request finishes on the old code
    assert (await in_flight).status == 200
    row = await reload
    assert row["state"] == "active"
    assert (await innkeeper_host.client.get("/fast")).status == 200
