"""Unloading leaves no trace, the projector slot included."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import pytest

from innkeeper_hostapi import ServiceNotFound
from innkeeper_hostapi.assembly import PROMPT_ASSEMBLER, Module, Strategy
from innkeeper_hostapi.testing import RunningHost

from .conftest import Api

OTHER_PROJECTOR = """
from innkeeper_hostapi import hookimpl
from innkeeper_hostapi.agents import REQUEST_PROJECTOR


class Other:
    name = "other"

    async def project(self, turn, messages):
        return None


@hookimpl
def innkeeper_plugin_setup(ctx):
    ctx.claim_slot(REQUEST_PROJECTOR, Other())
"""


LeakCheck = Callable[[], contextlib.AbstractAsyncContextManager[None]]


async def test_unload_leaves_no_trace(
    innkeeper_host: RunningHost, api: Api, leak_check: LeakCheck
) -> None:
    session = await api.new_session()
    async with leak_check():
        await innkeeper_host.load("assembler", "innkeeper_assembler.plugin")
        items = '[Contribution(key="d", text="Deep.", placement=AtDepth(depth=1))]'
        await innkeeper_host.load("src", api.source_plugin("src", "test.src", items))
        await api.use(
            session,
            Strategy(id="a", name="a", backend="advanced", modules=(Module(source="test.src"),)),
        )
        await api.turn(session, "Hi")
        assert [m.content for m in api.provider.requests[-1].messages] == ["Deep.", "Hi"]
        # The slot is held: another projector cannot claim it meanwhile.
        status = await innkeeper_host.load("other", api.plugin("other", OTHER_PROJECTOR))
        assert status["state"] == "failed" and "assembler" in status["lastError"]
        await innkeeper_host.unload("other")
        await innkeeper_host.unload("src")
        await innkeeper_host.unload("assembler")
    # The slot is free again and requests go out unprojected.
    await innkeeper_host.load("other", api.plugin("other", OTHER_PROJECTOR))
    await innkeeper_host.unload("other")
    await api.turn(session, "Again")
    assert [m.content for m in api.provider.requests[-1].messages] == [
        "Hi",
        "Synthetic reply to: Hi",
        "Again",
    ]


async def test_source_plugin_outliving_the_assembler(
    innkeeper_host: RunningHost, api: Api, leak_check: LeakCheck
) -> None:
    async with leak_check():
        await innkeeper_host.load("assembler", "innkeeper_assembler.plugin")
        items = '[Contribution(key="a", text="A.")]'
        await innkeeper_host.load("src", api.source_plugin("src", "test.src", items))
        await innkeeper_host.unload("assembler")  # the registry goes first
        await innkeeper_host.unload("src")  # its stale disposer is harmless
    with pytest.raises(ServiceNotFound):
        innkeeper_host.get(PROMPT_ASSEMBLER)
