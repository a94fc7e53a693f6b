"""Helpers of the RP-mode tests (on ``pythonpath`` like :mod:`tavern_harness`): a plugin with
tools of each risk (``look`` waits on a gate so a turn stays open), and readers of the RP view
and the session's sandbox events."""

from __future__ import annotations

import asyncio
import sys
import textwrap
from pathlib import Path
from typing import Any

from tavern_harness import TavernApi

from innkeeper_hostapi.testing import RunningHost

TOOLS = """
import asyncio
from innkeeper_hostapi import hookimpl

STATE = {"calls": [], "started": None, "gate": None}

@hookimpl
def innkeeper_plugin_setup(ctx):
    async def look(call):
        STATE["calls"].append(("look", call.sandbox_mode))
        STATE["started"].set()
        await STATE["gate"].wait()
        return "a quiet room"

    async def bash(call):
        STATE["calls"].append(("bash", call.sandbox_mode))
        return "ran"

    async def note(call):
        STATE["calls"].append(("note", call.sandbox_mode))
        return "noted"

    schema = {"type": "object"}
    ctx.add_tool("look", "Look around.", schema, look, risk="read-only")
    ctx.add_tool("bash", "Run a command.", schema, bash, risk="danger-full-access")
    ctx.add_tool("note", "Write a note.", schema, note, risk="workspace-write")
"""


def tools_state() -> dict[str, Any]:
    state: dict[str, Any] = sys.modules["innkeeper_plugins.rptools"].STATE
    return state


async def load_rp_host(host: RunningHost, plugins: Path) -> TavernApi:
    """Load the Tavern plugin and the tools plugin (written under ``plugins``)."""
    await host.load("tavern", "innkeeper_tavern.plugin")
    folder = plugins / "rptools"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "__init__.py").write_text(textwrap.dedent(TOOLS))
    await host.load("rptools", str(folder))
    state = tools_state()
    state["started"], state["gate"] = asyncio.Event(), asyncio.Event()
    return TavernApi(host)


async def mode(api: TavernApi, session: str) -> dict[str, Any]:
    """``GET /rp-mode``'s ``rp`` document."""
    data: dict[str, Any] = (await api.v1("GET", f"/rp-mode?sessionId={session}"))["rp"]
    return data


async def sandbox_modes(api: TavernApi, session: str) -> list[str]:
    """The ``mode`` of every ``sandbox/mode`` event of the session, oldest first."""
    events = await api.events(session)
    return [e["data"]["mode"] for e in events if e["data"]["type"] == "sandbox/mode"]


async def card(api: TavernApi, name: str = "Ada") -> str:
    """A new character card's id."""
    body = {"name": name, "firstMessage": f"Hello from {name}."}
    created = await api.v1("POST", "/characters", body, 201)
    card_id: str = created["character"]["id"]
    return card_id


async def bind(api: TavernApi, session: str, card_id: str | None) -> None:
    """Bind (or with ``None`` unbind) the session's character card."""
    body = {"sessionId": session, "characterCardId": card_id}
    await api.v1("POST", "/character-selection", body)


async def open_turn(api: TavernApi, session: str) -> dict[str, Any]:
    """Start a turn that stays open inside its first step (``look`` waits on the gate; set
    ``state["gate"]`` to let it finish). Returns the tools plugin's state."""
    from innkeeper_core.providers.synthetic import SyntheticReply

    state = tools_state()
    api.provider.enqueue(SyntheticReply.calling(("look", {})), "Done.")
    await api.send(session, "Look")
    await asyncio.wait_for(state["started"].wait(), 10)
    return state
