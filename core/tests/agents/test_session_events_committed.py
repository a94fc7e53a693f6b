"""``session/events-committed``: every committed event reaches plugin listeners once, in commit
order, after it is durable; a failing listener does not stop the others; a listener may append."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import Any

from innkeeper_hostapi.agents import SESSIONS
from innkeeper_hostapi.sessions import SessionTitle
from innkeeper_hostapi.testing import RunningHost
from innkeeper_hostapi.tools import TOOL_POLICY

from .conftest import Api, eventually

WATCHER = """
from innkeeper_hostapi import hookimpl
from innkeeper_hostapi.agents import SESSION_EVENTS_COMMITTED
from innkeeper_hostapi.sessions import SandboxMode, event_type
from innkeeper_hostapi.tools import TOOL_POLICY

SEEN = []
FAILED = []

@hookimpl
def innkeeper_plugin_setup(ctx):
    async def broken(commit):
        FAILED.append(commit.session_id)
        raise RuntimeError("a broken listener")

    async def record(commit):
        SEEN.append((commit.session_id, [(e.seq, event_type(e.data)) for e in commit.events]))
        for event in commit.events:
            # React by appending: a loosened sandbox is tightened again at once.
            if isinstance(event.data, SandboxMode) and event.data.mode == "danger-full-access":
                await ctx.get(TOOL_POLICY).set(commit.session_id, sandbox_mode="read-only")

    ctx.on(SESSION_EVENTS_COMMITTED, broken)
    ctx.on(SESSION_EVENTS_COMMITTED, record)
"""


def watcher() -> Any:
    return sys.modules["innkeeper_plugins.watcher"]


async def delivered(seen: list[Any], count: Callable[[], int]) -> None:
    """Wait until every committed event has been delivered (delivery is asynchronous)."""

    async def done() -> bool:
        return sum(len(events) for _, events in seen) >= count()

    await eventually(done, "every event delivered")


async def test_every_commit_reaches_listeners_once_in_order(
    innkeeper_host: RunningHost, api: Api, plugin_dir: Callable[[str, str], str]
) -> None:
    await innkeeper_host.load("watcher", plugin_dir("watcher", WATCHER))
    seen = watcher().SEEN
    session = await api.new_session()
    api.provider.enqueue("Hello there.")
    await api.prompt(session, "Hi")
    await api.idle(session)
    events = await api.events(session)
    await delivered(seen, lambda: len(events))
    mine = [item for sid, batch in seen if sid == session for item in batch]
    assert mine == [(e["seq"], e["data"]["type"]) for e in events]
    # The turn's first transaction (turn/start, claim, user/message) is one commit.
    first = next(batch for sid, batch in seen if sid == session and batch[0][1] == "turn/start")
    assert [t for _, t in first][:3] == ["turn/start", "agent/inbox/spliced", "user/message"]
    assert watcher().FAILED  # the failing listener ran first, and the next one still did


async def test_a_listener_may_append_in_reaction(
    innkeeper_host: RunningHost, api: Api, plugin_dir: Callable[[str, str], str]
) -> None:
    await innkeeper_host.load("watcher", plugin_dir("watcher", WATCHER))
    session = await api.new_session()
    await innkeeper_host.get(SESSIONS).append(session, SessionTitle(title="named"))
    await innkeeper_host.get(TOOL_POLICY).set(session, sandbox_mode="danger-full-access")
    policy = innkeeper_host.get(TOOL_POLICY)

    async def tightened() -> bool:
        return (await policy.effective(session)).sandbox_mode == "read-only"

    await eventually(tightened, "the listener's reaction")
    types = [e["data"]["type"] for e in await api.events(session)]
    modes = [e["data"]["mode"] for e in await api.events(session) if "mode" in e["data"]]
    assert modes == ["danger-full-access", "read-only"]
    # The reaction (permission/preset + sandbox/mode, one commit) came right after.
    assert types[-4:] == ["permission/preset", "sandbox/mode", "permission/preset", "sandbox/mode"]


async def test_unloading_stops_delivery(
    innkeeper_host: RunningHost, api: Api, plugin_dir: Callable[[str, str], str]
) -> None:
    await innkeeper_host.load("watcher", plugin_dir("watcher", WATCHER))
    seen = watcher().SEEN
    await innkeeper_host.unload("watcher")
    session = await api.new_session()
    await innkeeper_host.get(SESSIONS).append(session, SessionTitle(title="unseen"))
    await asyncio.sleep(0.05)
    assert [sid for sid, _ in seen if sid == session] == []
