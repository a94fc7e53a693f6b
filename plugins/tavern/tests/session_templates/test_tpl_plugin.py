"""The real Tavern plugin serves the template routes, and unloading it leaves no trace."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from innkeeper_hostapi.testing import RunningHost
from innkeeper_tavern.state.session_templates import SESSION_CONFIGURATIONS, SESSION_TEMPLATES

V1 = "/pmp-dsh-tavern/api/v1"


async def test_tavern_plugin_mounts_templates_and_unloads_cleanly(
    innkeeper_host: RunningHost,
    leak_check: Callable[[], AbstractAsyncContextManager[Any]],
) -> None:
    async with leak_check():
        status = await innkeeper_host.load("tavern", "innkeeper_tavern.plugin")
        assert status["state"] == "active", status
        headers = {"Origin": innkeeper_host.origin}
        resp = await innkeeper_host.client.post(
            V1 + "/session-templates", json={"name": "Blank"}, headers=headers
        )
        assert resp.status == 201, await resp.text()
        tid = (await resp.json())["template"]["id"]
        assert innkeeper_host.get(SESSION_TEMPLATES).selected_id == tid
        assert innkeeper_host.get(SESSION_CONFIGURATIONS).templates.find(tid) is not None
        resp = await innkeeper_host.client.post(
            V1 + "/session-configurations/preview",
            json={"source": {"mode": "template", "templateId": tid}},
            headers=headers,
        )
        assert (await resp.json())["available"] is True
        await innkeeper_host.unload("tavern")
    resp = await innkeeper_host.client.get(V1 + "/session-templates")
    assert resp.status == 404
