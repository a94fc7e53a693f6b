"""Sources registered by two plugins are placed by a strategy, in module order."""

from __future__ import annotations

import pytest

from innkeeper_hostapi.assembly import (
    PROMPT_SOURCES,
    TAVERN_REQUEST_SOURCES,
    Module,
    Strategy,
)
from innkeeper_hostapi.testing import RunningHost

from .conftest import ASM, Api

ALPHA = """[
    Contribution(key="rules", text="Alpha rules."),
    Contribution(key="aside", text="Alpha aside."),
]"""
BETA = '[Contribution(key="world", text="Beta world.")]'


async def test_two_plugins_sources_placed_by_strategy(
    innkeeper_host: RunningHost, api: Api
) -> None:
    await innkeeper_host.load("assembler", "innkeeper_assembler.plugin")
    await innkeeper_host.load("alpha", api.source_plugin("alpha", "alpha.notes", ALPHA))
    # The legacy alias is the very same registry.
    await innkeeper_host.load(
        "beta", api.source_plugin("beta", "beta.world", BETA, key="TAVERN_REQUEST_SOURCES")
    )
    assert innkeeper_host.get(PROMPT_SOURCES) is innkeeper_host.get(TAVERN_REQUEST_SOURCES)
    listed = await api.call("GET", ASM + "/sources")
    assert listed["protocol"] == 1
    assert [(s["id"], s["owner"]) for s in listed["sources"]] == [
        ("alpha.notes", "alpha"),
        ("beta.world", "beta"),
    ]

    session = await api.new_session()
    strategy = Strategy(
        id="two-sources",
        name="Two sources",
        modules=(Module(source="beta.world"), Module(source="alpha.notes", keys=("rules",))),
    )
    await api.use(session, strategy)
    await api.turn(session, "Hello")

    (request,) = api.provider.requests
    assert [(m.role, m.content) for m in request.messages] == [
        ("system", "Beta world.\n\nAlpha rules."),
        ("user", "Hello"),
    ]

    # A session without a snapshot is untouched by the Assembler.
    other = await api.new_session()
    await api.turn(other, "Plain")
    assert [m.content for m in api.provider.requests[-1].messages] == ["Plain"]


async def test_duplicate_source_names_both_owners(innkeeper_host: RunningHost, api: Api) -> None:
    await innkeeper_host.load("assembler", "innkeeper_assembler.plugin")
    await innkeeper_host.load("alpha", api.source_plugin("alpha", "shared.id", ALPHA))
    status = await innkeeper_host.load("beta", api.source_plugin("beta", "shared.id", BETA))
    assert status["state"] == "failed"
    assert "'alpha'" in status["lastError"] and "'beta'" in status["lastError"]
    assert "already registered" in status["lastError"]


async def test_missing_or_failing_source_never_fails_the_turn(
    innkeeper_host: RunningHost, api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    await innkeeper_host.load("assembler", "innkeeper_assembler.plugin")
    broken = api.plugin(
        "broken",
        """
        from innkeeper_hostapi import hookimpl
        from innkeeper_hostapi.assembly import PROMPT_SOURCES

        class Broken:
            id = "broken.source"
            async def render(self, request):
                raise RuntimeError("secret prompt body must not be logged")

        @hookimpl
        def innkeeper_plugin_setup(ctx):
            ctx.get(PROMPT_SOURCES).register(ctx, Broken())
        """,
    )
    await innkeeper_host.load("broken", broken)
    await innkeeper_host.load("alpha", api.source_plugin("alpha", "alpha.notes", ALPHA))
    session = await api.new_session()
    strategy = Strategy(
        id="s",
        name="s",
        modules=(
            Module(source="broken.source"),
            Module(source="nobody.registered.this"),
            Module(source="alpha.notes"),
        ),
    )
    await api.use(session, strategy)
    preview = await api.assembler.preview(session)
    assert [d.code for d in preview.diagnostics] == [
        "ASSEMBLER_SOURCE_FAILED",
        "ASSEMBLER_SOURCE_MISSING",
    ]
    await api.turn(session, "Hi")
    (request,) = api.provider.requests
    assert request.messages[0].content == "Alpha rules.\n\nAlpha aside."
    assert "RuntimeError" in caplog.text and "secret prompt body" not in caplog.text

    # Unloading a source plugin removes its source: later requests simply lack it.
    await innkeeper_host.unload("alpha")
    assert [s.id for s in innkeeper_host.get(PROMPT_SOURCES).sources()] == ["broken.source"]
    await api.turn(session, "Again")
    assert api.provider.requests[-1].messages[0].role == "user"
