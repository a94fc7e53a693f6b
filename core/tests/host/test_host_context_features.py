"""Plugin middlewares, reverse routing, vetoing listeners, on_dispose and data directories."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from innkeeper_hostapi.testing import RunningHost

PluginWriter = Callable[[str, str], Path]

FEATURES = """
from innkeeper_hostapi import EventKey, HttpProblem, hookimpl, json_response, path_params

VETO = EventKey("features/veto")
DISPOSED = []

@hookimpl
def innkeeper_plugin_setup(ctx):
    async def tag(request, handler):
        response = await handler(request)
        response.headers["X-Features"] = "outer"
        return response

    async def inner(request, handler):
        if request.headers.get("X-Block"):
            raise HttpProblem(429, "FEATURES_BLOCKED", "blocked by middleware")
        return await handler(request)

    ctx.add_middleware(inner, order=10)
    ctx.add_middleware(tag, order=0)

    async def first(payload):
        payload.append("first")

    async def veto(payload):
        raise PermissionError("vetoed")

    async def never(payload):
        payload.append("never")

    ctx.on(VETO, first)
    ctx.on(VETO, veto)
    ctx.on(VETO, never)

    async def item(request):
        return json_response({"url": ctx.url_for("features.item", item_id="a b")})

    async def emit(request):
        seen = []
        try:
            await ctx.emit(VETO, seen)
        except PermissionError as exc:
            return json_response({"seen": seen, "error": str(exc)})
        return json_response({"seen": seen})

    async def data(request):
        return json_response({"dir": str(ctx.data_dir), "exists": ctx.data_dir.is_dir()})

    ctx.add_route("GET", "/features/items/{item_id}", item, name="features.item")
    ctx.add_route("GET", "/features/emit", emit)
    ctx.add_route("GET", "/features/data", data)
    ctx.on_dispose(lambda: DISPOSED.append(ctx.generation))
"""


async def test_context_features(innkeeper_host: RunningHost, write_plugin: PluginWriter) -> None:
    folder = write_plugin("features", FEATURES)
    await innkeeper_host.load("features", str(folder))
    client = innkeeper_host.client

    resp = await client.get("/features/items/x")
    assert resp.headers["X-Features"] == "outer"
    assert await resp.json() == {"url": "/features/items/a%20b"}

    resp = await client.get("/features/items/x", headers={"X-Block": "1"})
    assert resp.status == 429
    assert (await resp.json())["code"] == "FEATURES_BLOCKED"

    assert await (await client.get("/features/emit")).json() == {
        "seen": ["first"],
        "error": "vetoed",
    }

    body = await (await client.get("/features/data")).json()
    assert body["exists"] is True
    assert body["dir"].endswith("/plugins/features")

    import sys

    module = sys.modules["innkeeper_plugins.features"]
    await innkeeper_host.unload("features")
    assert module.DISPOSED == [1]
    resp = await client.get("/healthz")
    assert "X-Features" not in resp.headers  # the middlewares left with the plugin
