"""Loading, unloading and isolating plugins."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path

from innkeeper_hostapi.testing import RunningHost

PluginWriter = Callable[[str, str], Path]

PLUGIN_TEMPLATE = """
from aiohttp import web
from innkeeper_hostapi import AdapterSlot, EventKey, ServiceKey, hookimpl, json_response

KEY = ServiceKey("{pid}.service")
EVENT = EventKey("{pid}/event")
SLOT = AdapterSlot("{pid}.slot")

@hookimpl
def innkeeper_plugin_setup(ctx):
    ctx.provide(KEY, lambda: {{"owner": "{pid}"}})
    ctx.claim_slot(SLOT, object())

    async def listener(payload):
        pass

    ctx.on(EVENT, listener)

    async def forever():
        import asyncio
        await asyncio.Event().wait()

    ctx.spawn(forever(), name="idle")

    async def handler(request):
        return json_response({{"ok": True, "plugin": "{pid}", "service": ctx.get(KEY)["owner"]}})

    ctx.add_route("GET", "/{pid}/ping", handler, name="{pid}.ping")
"""


async def test_unloading_a_restores_the_snapshot_and_b_keeps_serving(
    innkeeper_host: RunningHost, write_plugin: PluginWriter
) -> None:
    path_a = write_plugin("alpha", PLUGIN_TEMPLATE.format(pid="alpha"))
    path_b = write_plugin("beta", PLUGIN_TEMPLATE.format(pid="beta"))
    empty = innkeeper_host.snapshot()
    await innkeeper_host.load("beta", str(path_b))
    before_a = innkeeper_host.snapshot()
    assert before_a != empty
    row = await innkeeper_host.load("alpha", str(path_a))
    assert row["state"] == "active"
    assert row["registered"]["routes"] == ["GET /alpha/ping"]

    resp = await innkeeper_host.client.get("/alpha/ping")
    assert (await resp.json())["plugin"] == "alpha"

    await innkeeper_host.unload("alpha")
    assert innkeeper_host.snapshot() == before_a
    resp = await innkeeper_host.client.get("/alpha/ping")
    assert resp.status == 404
    resp = await innkeeper_host.client.get("/beta/ping")
    assert await resp.json() == {"ok": True, "plugin": "beta", "service": "beta"}


async def test_setup_failing_halfway_leaves_nothing(
    innkeeper_host: RunningHost, write_plugin: PluginWriter
) -> None:
    path = write_plugin(
        "broken",
        """
        from innkeeper_hostapi import ServiceKey, hookimpl, json_response

        @hookimpl
        def innkeeper_plugin_setup(ctx):
            ctx.provide(ServiceKey("broken.service"), dict)

            async def handler(request):
                return json_response({})

            ctx.add_route("GET", "/broken", handler)
            raise RuntimeError("setup exploded")
        """,
    )
    before = innkeeper_host.snapshot()
    row = await innkeeper_host.load("broken", str(path))
    assert row["state"] == "failed"
    assert "setup exploded" in row["lastError"]
    assert row["registered"] == {}
    assert innkeeper_host.snapshot() == before
    resp = await innkeeper_host.client.get("/broken")
    assert resp.status == 404


async def test_import_error_is_reported_and_others_keep_running(
    innkeeper_host: RunningHost, write_plugin: PluginWriter
) -> None:
    good = write_plugin("good", PLUGIN_TEMPLATE.format(pid="good"))
    bad = write_plugin("bad", "import does_not_exist_anywhere\n")
    await innkeeper_host.load("good", str(good))
    row = await innkeeper_host.load("bad", str(bad))
    assert row["state"] == "failed"
    assert "does_not_exist_anywhere" in row["lastError"]
    resp = await innkeeper_host.client.get("/good/ping")
    assert resp.status == 200
    listing = await (await innkeeper_host.client.get("/host/api/plugins")).json()
    states = {p["name"]: p["state"] for p in listing["plugins"]}
    assert states == {"good": "active", "bad": "failed"}


async def test_hello_loads_from_its_entry_point_and_leaves_no_trace(
    innkeeper_host: RunningHost,
    leak_check: Callable[[], AbstractAsyncContextManager[None]],
) -> None:
    async with leak_check():
        row = await innkeeper_host.load("hello", "innkeeper_hello")
        assert row["state"] == "active"
        resp = await innkeeper_host.client.get("/hello/Ada")
        assert await resp.json() == {"ok": True, "greeting": "Hello, Ada!", "greeted": 1}
        resp = await innkeeper_host.client.post(
            "/hello/greetings", json={"name": "Bob"}, headers={"Origin": innkeeper_host.origin}
        )
        assert await resp.json() == {"ok": True, "greeting": "Hello, Bob!", "greeted": 2}
        await innkeeper_host.unload("hello")
