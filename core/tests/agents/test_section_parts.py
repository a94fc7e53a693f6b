"""A section renderer may contribute several named sections (``SectionPart``); the host records
every section of the assembly in ``system/message.sections`` with its byte span."""

from __future__ import annotations

import sys
from collections.abc import Callable

from innkeeper_hostapi.testing import RunningHost

from .conftest import Api

PARTS = """
from innkeeper_hostapi import hookimpl
from innkeeper_hostapi.agents import SYSTEM_PROMPT, SectionPart

MODE = {"value": "parts"}

@hookimpl
def innkeeper_plugin_setup(ctx):
    def profile(turn):
        if MODE["value"] == "bad":
            return ["not a part"]
        return [SectionPart("p:part:main", "Main é."), SectionPart("p:part:empty", ""),
                SectionPart("p:part:lore", "Lore.")]

    ctx.get(SYSTEM_PROMPT).section(ctx, "p:profile", 10, profile)
    ctx.get(SYSTEM_PROMPT).section(ctx, "p:after", 20, lambda turn: "After.")
"""


async def test_parts_are_sections_and_every_section_is_recorded(
    innkeeper_host: RunningHost, api: Api, plugin_dir: Callable[[str, str], str]
) -> None:
    await innkeeper_host.load("p", plugin_dir("p", PARTS))
    session = await api.new_session()
    await api.prompt(session, "Hi")
    await api.idle(session)
    events = await api.events(session)
    message = next(e["data"] for e in events if e["data"]["type"] == "system/message")
    text = message["content"][0]["text"]
    assert text == "Main é.\n\nLore.\n\nAfter."
    assert message["sections"] == [
        {"name": "p:part:main", "start": 0, "end": 8},  # "é" is two UTF-8 bytes
        {"name": "p:part:lore", "start": 10, "end": 15},
        {"name": "p:after", "start": 17, "end": 23},
    ]
    sent = api.provider.requests[-1].messages[0]
    assert (sent.role, sent.content) == ("system", text)


async def test_a_renderer_returning_something_else_fails_the_turn_with_its_name(
    innkeeper_host: RunningHost, api: Api, plugin_dir: Callable[[str, str], str]
) -> None:
    await innkeeper_host.load("p", plugin_dir("p", PARTS))
    sys.modules["innkeeper_plugins.p"].MODE["value"] = "bad"
    session = await api.new_session()
    await api.prompt(session, "Hi")
    await api.idle(session)
    events = await api.events(session)
    end = next(e["data"] for e in events if e["data"]["type"] == "turn/end")
    assert end["reason"]["kind"] == "error"
    assert not any(e["data"]["type"] == "request/header" for e in events)
