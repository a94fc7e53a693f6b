"""The Tavern side: the Assembler version check at setup and Tavern's sources."""

from __future__ import annotations

import contextlib
import json
import logging
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from innkeeper_core.testing import start_test_host
from innkeeper_hostapi.assembly import PROMPT_SOURCES, Module, Strategy
from innkeeper_hostapi.testing import RunningHost
from innkeeper_tavern.features.prompt_sources.link import assembler_compatible

from .conftest import Api

CORPUS = Path(__file__).resolve().parents[4] / "shared" / "sillytavern-corpus"
ST = CORPUS / "sillytavern-repo" / "staging-1ac6780"
V1 = "/pmp-dsh-tavern/api/v1"
LeakCheck = Callable[[], contextlib.AbstractAsyncContextManager[None]]

FAKE_ASSEMBLER = """
from innkeeper_hostapi import hookimpl
from innkeeper_hostapi.assembly import PROMPT_ASSEMBLER


class Fake:
    version = {version!r}
    protocol = 1


@hookimpl
def innkeeper_plugin_setup(ctx):
    ctx.provide(PROMPT_ASSEMBLER, Fake)
"""

DEPTH_BOOK = {
    "entries": {
        "0": {
            "uid": 0,
            "key": ["bell"],
            "content": "The bell tower is cracked.",
            "constant": True,
            "position": 4,
            "depth": 1,
            "role": 1,
            "order": 100,
        },
    }
}


@pytest.mark.parametrize(
    ("version", "ok"),
    [
        ("1.1.3", True),
        ("1.1.12", True),
        ("1.1.3+build.5", True),
        ("1.1.2", False),
        ("1.2.0", False),
        ("2.1.3", False),
        ("1.1.4-beta.1", False),
        ("1.1", False),
        (113, False),
        (None, False),
    ],
)
def test_tilde_range(version: object, ok: bool) -> None:
    assert assembler_compatible(version) is ok


async def test_incompatible_assembler_refuses_to_mount(
    innkeeper_host: RunningHost, api: Api, leak_check: LeakCheck
) -> None:
    async with leak_check():
        fake = api.plugin("fakeasm", FAKE_ASSEMBLER.format(version="1.2.0"))
        await innkeeper_host.load("fakeasm", fake)
        status = await innkeeper_host.load("tavern", "innkeeper_tavern.plugin")
        assert status["state"] == "failed"
        error = status["lastError"]
        assert "TAVERN_ASSEMBLER_INCOMPATIBLE" in error
        assert "~1.1.3" in error and "'1.2.0'" in error
        await innkeeper_host.unload("tavern")
        await innkeeper_host.unload("fakeasm")


async def test_absent_assembler_mounts_compatibility_only(
    innkeeper_host: RunningHost, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        status = await innkeeper_host.load("tavern", "innkeeper_tavern.plugin")
    assert status["state"] != "failed"
    assert "TAVERN_ASSEMBLER_MISSING" in caplog.text


async def test_absent_assembler_refuses_when_required(tmp_path: Path) -> None:
    host = await start_test_host(tmp_path / "data", plugins={"tavern": {"require_assembler": True}})
    try:
        status = await host.load("tavern", "innkeeper_tavern.plugin")
        assert status["state"] == "failed"
        assert "TAVERN_ASSEMBLER_MISSING" in status["lastError"]
        await host.unload("tavern")
        assert (await host.load("assembler", "innkeeper_assembler.plugin"))["state"] != "failed"
        assert (await host.load("tavern", "innkeeper_tavern.plugin"))["state"] != "failed"
    finally:
        await host.close()


async def _post(api: Api, path: str, data: bytes, ctype: str) -> Any:
    resp = await api.host.client.post(
        V1 + path, data=data, headers={"Origin": api.host.origin, "Content-Type": ctype}
    )
    body = await resp.json()
    assert resp.status == 201, body
    return body


async def test_tavern_sources_placed_by_the_advanced_backend(
    innkeeper_host: RunningHost, api: Api
) -> None:
    await innkeeper_host.load("assembler", "innkeeper_assembler.plugin")
    status = await innkeeper_host.load("tavern", "innkeeper_tavern.plugin")
    assert status["state"] != "failed"
    sources = innkeeper_host.get(PROMPT_SOURCES).sources()
    assert sorted((s.id, s.owner) for s in sources) == [
        ("tavern.import-context", "tavern"),
        ("tavern.mvu/state", "tavern"),
        ("tavern.profile", "tavern"),
    ]

    preset_doc = (ST / "presets_openai_Default.json").read_text()
    preset = (await api.call("POST", V1 + "/import", {"content": preset_doc, "name": "D"}, 201))[
        "preset"
    ]["id"]
    name = urllib.parse.quote("default_Seraphina.png")
    card = (
        await _post(
            api,
            f"/characters/import?filename={name}",
            (ST / "default_Seraphina.png").read_bytes(),
            "image/png",
        )
    )["character"]["id"]
    book = (
        await _post(
            api,
            "/world-books/import?filename=bell.json",
            json.dumps(DEPTH_BOOK).encode(),
            "application/json",
        )
    )["worldBook"]["id"]
    session = await api.new_session()
    await api.call("POST", V1 + "/select", {"id": preset, "sessionId": session})
    await api.call(
        "POST", V1 + "/character-selection", {"sessionId": session, "characterCardId": card}
    )
    await api.call(
        "POST", V1 + "/world-book-selection", {"sessionId": session, "worldBookIds": [book]}
    )

    strategy = Strategy(
        id="tavern-advanced",
        name="Tavern, advanced",
        backend="advanced",
        modules=(Module(source="tavern.profile"),),
    )
    await api.use(session, strategy)

    preview = await api.assembler.preview(session, pending_input="Hello")
    assert not preview.rejected, preview.diagnostics
    roles = [(m.role, m.content[:40]) for m in preview.messages]
    # The greeting is an assistant message where the chat starts; the @depth lore is a user
    # message one message before the end; both are request-only.
    assert roles[1][0] == "assistant" and roles[1] != roles[-1]
    assert roles[-2] == ("user", "The bell tower is cracked.")
    assert roles[-1] == ("user", "Hello")
    assert preview.request_only == (1, len(roles) - 2)

    await api.turn(session, "Hello")
    sent = api.provider.requests[-1].messages
    assert [(m.role, m.content) for m in sent[-2:]] == [
        ("user", "The bell tower is cracked."),
        ("user", "Hello"),
    ]
    # The placed greeting is the card's first message, as an assistant message.
    assert any(m.role == "assistant" and m.content == preview.messages[1].content for m in sent)
    assert sent[0].role == "system" and preview.messages[0].content in sent[0].content
    # Only the Assembler's placement is sent: the loader leaves its compatibility profile out.
    # The one host section added is rp:policy (binding the card entered RP: rpFollowCharacter).
    policy = (await api.call("GET", V1 + "/rp-policy"))["policy"]["text"]
    assert sent[0].content == preview.messages[0].content + "\n\n" + policy
    events = await api.events(session)
    (assembly,) = [e["data"] for e in events if e["data"]["type"] == "request/assembly"]
    assert [e["content"] for e in assembly["entries"] if e["ref"] is None] == [
        preview.messages[1].content,
        "The bell tower is cracked.",
    ]


async def test_assembler_loaded_or_reloaded_after_tavern_gets_its_sources(
    innkeeper_host: RunningHost, leak_check: LeakCheck
) -> None:
    async with leak_check():
        await innkeeper_host.load("tavern", "innkeeper_tavern.plugin")  # compatibility-only
        await innkeeper_host.load("assembler", "innkeeper_assembler.plugin")
        assert sorted(s.id for s in innkeeper_host.get(PROMPT_SOURCES).sources()) == [
            "tavern.import-context",
            "tavern.mvu/state",
            "tavern.profile",
        ]
        await innkeeper_host.reload("assembler")  # a new, empty registry
        assert sorted(s.id for s in innkeeper_host.get(PROMPT_SOURCES).sources()) == [
            "tavern.import-context",
            "tavern.mvu/state",
            "tavern.profile",
        ]
        await innkeeper_host.reload("tavern")  # disposed and registered again, once
        assert sorted(s.id for s in innkeeper_host.get(PROMPT_SOURCES).sources()) == [
            "tavern.import-context",
            "tavern.mvu/state",
            "tavern.profile",
        ]
        await innkeeper_host.unload("assembler")
        await innkeeper_host.unload("tavern")


def test_tavern_items_land_at_their_st_positions() -> None:
    """A preset with relative, in-chat and post-history prompts at several roles and depths,
    placed by the advanced backend around a four-message chat."""
    from innkeeper_assembler.placement import ModuleItems, build_plan, project
    from innkeeper_hostapi.providers import ChatMessage
    from innkeeper_tavern.features.prompt_profile.profile import AssemblyInput
    from innkeeper_tavern.features.prompt_render import LoreEntry, RenderRequest, render
    from innkeeper_tavern.features.prompt_sources.sources import contributions
    from innkeeper_tavern.pure.formats.macros import MacroEnv
    from innkeeper_tavern.pure.formats.preset import parse_preset

    def p(identifier: str, content: str = "", **extra: Any) -> dict[str, Any]:
        return {"identifier": identifier, "name": identifier, "content": content, **extra}

    prompts = [
        p("main", "Main."),
        p("chatHistory", marker=True),
        p("worldInfoBefore", marker=True),
        p("d1u", "In-chat d1 user.", injection_position=1, injection_depth=1, role="user"),
        p(
            "d0a",
            "In-chat d0 assistant.",
            injection_position=1,
            injection_depth=0,
            role="assistant",
        ),
        p("d3s", "In-chat d3 system.", injection_position=1, injection_depth=3),
        p("jailbreak", "Post-history system."),
        p("after-user", "Post-history user.", role="user"),
    ]
    order = ["main", "worldInfoBefore", "d1u", "chatHistory", "d0a", "d3s", "jailbreak"]
    order.append("after-user")
    preset = parse_preset(
        {
            "prompts": prompts,
            "prompt_order": [
                {
                    "character_id": 100001,
                    "order": [{"identifier": o, "enabled": True} for o in order],
                }
            ],
        }
    )
    lore = (
        LoreEntry("b:1", "Lore before.", position="before", rank=0),
        LoreEntry(
            "b:2", "Lore at depth 2.", position="at_depth", depth=2, role="assistant", rank=1
        ),
    )
    env = MacroEnv(char="C", user="U")
    given = AssemblyInput(
        preset_id="p",
        preset=preset,
        character=None,
        user=None,
        lore=lore,
        include_greeting=False,
        prefer_system_prompt=True,
        prefer_post_history=True,
        macro_env=env,
        seed=1,
    )
    rendered = render(RenderRequest(preset=preset, lore=lore, env=env, seed=1))
    items = contributions(given, rendered.parts)
    keys = {i.key: i for i in items}
    assert keys["lore:worldInfoBefore"].rank == 0
    module = Module(source="tavern.profile")
    strategy = Strategy(id="t", name="t", backend="advanced", modules=(module,))
    plan = build_plan(strategy, [ModuleItems(module, items)])
    history = (
        ChatMessage(role="user", content="u1"),
        ChatMessage(role="assistant", content="a1"),
        ChatMessage(role="user", content="u2"),
        ChatMessage(role="assistant", content="a2"),
    )
    built = (ChatMessage(role="system", content=plan.system_text), *history)
    sent, _ = project(built, plan.carriers)
    assert [(m.role, m.content) for m in sent] == [
        ("system", "Main.\n\nLore before."),
        ("user", "u1"),
        ("system", "In-chat d3 system."),
        ("assistant", "a1"),
        ("assistant", "Lore at depth 2."),
        ("user", "u2"),
        ("user", "In-chat d1 user."),
        ("assistant", "a2"),
        ("assistant", "In-chat d0 assistant."),
        ("system", "Post-history system."),
        ("user", "Post-history user."),
    ]


async def test_strategy_applied_helper(innkeeper_host: RunningHost, api: Api) -> None:
    from innkeeper_hostapi.assembly import PROMPT_ASSEMBLER
    from innkeeper_tavern.features.prompt_sources.link import strategy_applied

    class Ctx:
        def get_optional(self, key: Any) -> Any:
            try:
                return innkeeper_host.get(key)
            except LookupError:
                return None

    ctx: Any = Ctx()
    assert strategy_applied(ctx, "any") is False  # no Assembler
    await innkeeper_host.load("assembler", "innkeeper_assembler.plugin")
    session = await api.new_session()
    assert strategy_applied(ctx, session) is False
    assert strategy_applied(ctx, None) is False
    await api.use(session, Strategy(id="s", name="s"))
    assert strategy_applied(ctx, session) is True
    assert innkeeper_host.get(PROMPT_ASSEMBLER).applied(session) is not None
