"""Unloading leaves the host as it was; records are durable across a reload."""

from __future__ import annotations

from typing import Any

from innkeeper_hostapi.testing import RunningHost

V3 = "/pmp-dsh-tavern/api/v3"


async def test_unload_leaves_no_trace(
    innkeeper_host: RunningHost, leak_check: Any, trace_helpers: Any
) -> None:
    async with leak_check():
        await innkeeper_host.load("tavern", "innkeeper_tavern.plugin")
        host = trace_helpers(innkeeper_host)
        ids = await host.bound_session()
        await host.prompt(ids["session"], "I raise the lantern.")
        index = await host.v3(f"/sessions/{ids['session']}/assemblies")
        assert len(index["assemblies"]) == 1
        await innkeeper_host.reload("tavern")
        again = await host.v3(f"/sessions/{ids['session']}/assemblies")
        assert again["assemblies"] == index["assemblies"]
        detail = await host.v3(f"/sessions/{ids['session']}/assemblies/t1-s1")
        assert detail["verification"]["status"] == "verified"
        await innkeeper_host.unload("tavern")
    for path in (f"/sessions/{ids['session']}/assemblies", "/capabilities"):
        resp = await innkeeper_host.client.get(V3 + path)
        assert resp.status == 404
