"""The v1 selection routes over real HTTP: shapes, validation, isolation and the 409 rule."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest

from innkeeper_hostapi.agents import AGENTS
from innkeeper_hostapi.testing import RunningHost
from innkeeper_tavern.state.session_bindings.model import CharacterOptions, Selection

from .conftest import PLUGIN_ID, Tavern, write_plugin


async def test_preset_catalog_global_and_per_session_selection(tavern: Tavern) -> None:
    p1, p2 = await tavern.preset("One"), await tavern.preset("Two")
    a, b = await tavern.new_session(), await tavern.new_session()

    listing = await tavern.v1("GET", "/presets")
    assert {p["id"] for p in listing["presets"]} == {p1, p2}
    assert listing["selectedId"] is None

    assert (await tavern.v1("POST", "/select", {"id": p1}))["selected"] == {"id": p1, "name": "One"}
    assert (await tavern.v1("GET", "/presets"))["selectedId"] == p1
    assert tavern.store.global_preset.selected_id == p1
    # An unbound session shows what it would freeze: the current default.
    assert (await tavern.v1("GET", f"/presets?sessionId={a}"))["selectedId"] == p1
    assert not tavern.store.has(a)

    await tavern.v1("POST", "/select", {"id": p2, "sessionId": a})
    assert (await tavern.v1("GET", f"/presets?sessionId={a}"))["selectedId"] == p2
    assert (await tavern.v1("GET", f"/presets?sessionId={b}"))["selectedId"] == p1  # isolated
    assert (await tavern.v1("GET", "/presets"))["selectedId"] == p1  # global untouched

    cleared = await tavern.v1("POST", "/select", {"id": None, "sessionId": a})
    assert cleared["selected"] is None
    assert tavern.store.get(a).preset_id is None
    await tavern.v1("POST", "/select", {"id": None})
    assert (await tavern.v1("GET", "/presets?sessionId="))["selectedId"] is None

    missing = await tavern.v1("POST", "/select", {"id": "preset-nope"}, status=404)
    assert missing["code"] == "PRESET_NOT_FOUND"
    bad = await tavern.v1("POST", "/select", {"id": p1, "extra": 1}, status=400)
    assert bad["code"] == "INVALID_BODY"
    assert (await tavern.v1("POST", "/select", {}, status=400))["code"] == "INVALID_BODY"


async def test_character_selection(tavern: Tavern) -> None:
    card = await tavern.character("Lyra", greetings=3)
    session = await tavern.new_session()
    empty = await tavern.v1("GET", f"/character-selection?sessionId={session}")
    assert empty == {"ok": True, "selection": None, "character": None}

    bound = await tavern.v1(
        "POST",
        "/character-selection",
        {"sessionId": session, "characterCardId": card, "character": {"greetingIndex": 2}},
    )
    assert bound["selection"] == {
        "characterCardId": card,
        "character": {
            "greetingIndex": 2,
            "preferCharacterSystemPrompt": True,
            "preferCharacterPostHistory": True,
        },
    }
    assert bound["character"]["id"] == card and bound["character"]["name"] == "Lyra"
    assert bound["character"]["sourceFormat"] is not None
    assert await tavern.v1("GET", f"/character-selection?sessionId={session}") == bound
    assert tavern.store.get(session).character == CharacterOptions(
        greeting_index=2, prefer_character_system_prompt=True, prefer_character_post_history=True
    )

    no_options = await tavern.v1(
        "POST", "/character-selection", {"sessionId": session, "characterCardId": card}
    )
    assert no_options["selection"]["character"]["greetingIndex"] == 0

    for character, code in [
        ({"greetingIndex": 3}, "CHARACTER_SELECTION_INVALID"),
        ({"greetingIndex": -1}, "INVALID_BODY"),
        ({"greetingIndex": True}, "INVALID_BODY"),
        ({"avatarOverride": "x"}, "INVALID_BODY"),
        ({"preferCharacterSystemPrompt": "no"}, "INVALID_BODY"),
    ]:
        body = {"sessionId": session, "characterCardId": card, "character": character}
        assert (await tavern.v1("POST", "/character-selection", body, 400))["code"] == code
    missing = await tavern.v1(
        "POST",
        "/character-selection",
        {"sessionId": session, "characterCardId": "character-nope"},
        status=404,
    )
    assert missing["code"] == "CHARACTER_NOT_FOUND"
    assert tavern.store.get(session).character_card_id == card  # failures wrote nothing

    unbound = await tavern.v1(
        "POST", "/character-selection", {"sessionId": session, "characterCardId": None}
    )
    assert unbound["selection"] is None
    assert tavern.store.get(session).character == CharacterOptions()


async def test_user_selection(tavern: Tavern) -> None:
    user = await tavern.user("Reader")
    session = await tavern.new_session()
    assert (await tavern.v1("GET", f"/user-selection?sessionId={session}"))["user"] is None
    bound = await tavern.v1("POST", "/user-selection", {"sessionId": session, "userId": user})
    assert bound["selection"] == {"userId": user}
    assert bound["user"] == {"id": user, "name": "Reader", "description": "d"}
    assert await tavern.v1("GET", f"/user-selection?sessionId={session}") == bound

    body = {"sessionId": session, "userId": "user-nope"}
    assert (await tavern.v1("POST", "/user-selection", body, 404))["code"] == "USER_NOT_FOUND"
    body = {"sessionId": session}  # userId is required (null unbinds)
    assert (await tavern.v1("POST", "/user-selection", body, 400))["code"] == "INVALID_BODY"
    cleared = await tavern.v1("POST", "/user-selection", {"sessionId": session, "userId": None})
    assert cleared == {"ok": True, "selection": None, "user": None}


async def test_world_book_selection(tavern: Tavern) -> None:
    b1, b2 = await tavern.world_book("Alpha"), await tavern.world_book("Beta")
    session = await tavern.new_session()
    assert await tavern.v1("GET", "/world-book-selection") == {
        "ok": True,
        "selection": {"worldBookIds": []},
        "worldBooks": [],
    }
    bound = await tavern.v1(
        "POST", "/world-book-selection", {"sessionId": session, "worldBookIds": [b2, b1, b2]}
    )
    assert bound["selection"] == {"worldBookIds": [b2, b1]}  # de-duplicated, order kept
    assert [(b["id"], b["name"]) for b in bound["worldBooks"]] == [(b2, "Beta"), (b1, "Alpha")]
    assert await tavern.v1("GET", f"/world-book-selection?sessionId={session}") == bound

    too_many = {"sessionId": session, "worldBookIds": [f"b{i}" for i in range(101)]}
    err = await tavern.v1("POST", "/world-book-selection", too_many, 400)
    assert err["code"] == "WORLD_BOOK_SELECTION_INVALID"
    err = await tavern.v1(
        "POST", "/world-book-selection", {"sessionId": session, "worldBookIds": [b1, ""]}, 400
    )
    assert err["code"] == "WORLD_BOOK_SELECTION_INVALID"
    err = await tavern.v1(
        "POST", "/world-book-selection", {"sessionId": session, "worldBookIds": [b1, "wb-x"]}, 404
    )
    assert err["code"] == "WORLD_BOOK_NOT_FOUND"
    assert tavern.store.get(session).world_book_ids == (b2, b1)

    # A book deleted behind the selection's back reads as missing until clearResource runs.
    await tavern.resources.delete_world_book(b1)
    view = await tavern.v1("GET", f"/world-book-selection?sessionId={session}")
    assert view["worldBooks"][1] == {"id": b1, "missing": True}
    assert await tavern.store.clear_resource("world-book", b1) == [session]
    view = await tavern.v1("GET", f"/world-book-selection?sessionId={session}")
    assert view["selection"] == {"worldBookIds": [b2]}


async def test_session_id_checks_and_unknown_sessions(tavern: Tavern) -> None:
    preset = await tavern.preset("P")
    for path in ("/presets", "/character-selection", "/user-selection", "/world-book-selection"):
        err = await tavern.v1("GET", f"{path}?sessionId=__proto__", status=400)
        assert err["code"] == "SESSION_ID_INVALID"
    writes = [
        ("/select", {"id": preset, "sessionId": "../x"}),
        ("/character-selection", {"sessionId": "x" * 201, "characterCardId": None}),
        ("/user-selection", {"sessionId": "a b", "userId": None}),
        ("/world-book-selection", {"sessionId": "-lead", "worldBookIds": []}),
    ]
    for path, body in writes:
        assert (await tavern.v1("POST", path, body, 400))["code"] == "SESSION_ID_INVALID"
    unknown = "0b7c54f4-0000-4000-8000-000000000000"
    writes = [
        ("/select", {"id": preset, "sessionId": unknown}),
        ("/character-selection", {"sessionId": unknown, "characterCardId": None}),
        ("/user-selection", {"sessionId": unknown, "userId": None}),
        ("/world-book-selection", {"sessionId": unknown, "worldBookIds": []}),
    ]
    for path, body in writes:
        assert (await tavern.v1("POST", path, body, 404))["code"] == "SESSION_NOT_FOUND"
    assert len(tavern.store) == 0
    # Reads of an unknown session answer the defaults and store nothing.
    await tavern.v1("POST", "/select", {"id": preset})
    assert (await tavern.v1("GET", f"/presets?sessionId={unknown}"))["selectedId"] == preset
    assert len(tavern.store) == 0


RUNNING_RULES = [
    ("/select", "PRESET_AGENT_RUNNING"),
    ("/character-selection", "CHARACTER_AGENT_RUNNING"),
    ("/user-selection", "USER_AGENT_RUNNING"),
    ("/world-book-selection", "WORLD_BOOK_AGENT_RUNNING"),
]


@pytest.mark.parametrize(("path", "code"), RUNNING_RULES)
async def test_running_agent_blocks_the_session_write(tavern: Tavern, path: str, code: str) -> None:
    preset, card = await tavern.preset("P"), await tavern.character("C")
    user, book = await tavern.user("U"), await tavern.world_book("W")
    bodies: dict[str, dict[str, Any]] = {
        "/select": {"id": preset},
        "/character-selection": {"characterCardId": card},
        "/user-selection": {"userId": user},
        "/world-book-selection": {"worldBookIds": [book]},
    }
    session = await tavern.new_session()
    tavern.enqueue_slow_reply()
    await tavern.prompt(session)
    agents = tavern.host.get(AGENTS)
    for _ in range(100):
        if agents.is_running(session):
            break
        await asyncio.sleep(0.005)
    assert agents.is_running(session)
    frozen = tavern.store.get(session)
    body = {"sessionId": session, **bodies[path]}

    err = await tavern.v1("POST", path, body, status=409)
    assert err["code"] == code and err["ok"] is False
    assert tavern.store.get(session) == frozen  # nothing written
    # Reads and the global default stay available while the turn runs.
    await tavern.v1("GET", f"/presets?sessionId={session}")
    await tavern.v1("POST", "/select", {"id": preset})
    # Another session is not blocked.
    other = await tavern.new_session()
    await tavern.v1("POST", path, {**body, "sessionId": other})

    await tavern.idle(session)
    await tavern.v1("POST", path, body)
    assert tavern.store.get(session) != frozen


async def test_unloading_leaves_no_trace(
    innkeeper_host: RunningHost,
    leak_check: Callable[[], AbstractAsyncContextManager[None]],
    tmp_path: Path,
) -> None:
    async with leak_check():
        await innkeeper_host.load(PLUGIN_ID, write_plugin(tmp_path))
        tavern = Tavern(innkeeper_host)
        session = await tavern.new_session()
        await tavern.v1("POST", "/select", {"id": None, "sessionId": session})
        await innkeeper_host.unload(PLUGIN_ID)
    resp = await innkeeper_host.client.get("/pmp-dsh-tavern/api/v1/presets")
    assert resp.status == 404
    # The selection survived on disk and is read back by the next generation.
    await innkeeper_host.load(PLUGIN_ID, write_plugin(tmp_path))
    assert Tavern(innkeeper_host).store.get(session) == Selection()
    assert Tavern(innkeeper_host).store.has(session)
    await innkeeper_host.unload(PLUGIN_ID)


WITH_RESOURCE_ROUTES = """
from innkeeper_hostapi import hookimpl
from innkeeper_tavern.face.routes import V1_PREFIX, v1_routes
from innkeeper_tavern.face.routes.session_bindings import install_session_selections
from innkeeper_tavern.state.resources import TavernResources

STATE = {}


@hookimpl
async def innkeeper_plugin_setup(ctx):
    resources = TavernResources(ctx.data_dir, logger=ctx.logger)
    await resources.open()
    for route in v1_routes(resources):
        ctx.add_route(
            route.method,
            V1_PREFIX + route.path,
            route.handler,
            name=route.name,
            max_body=route.max_body,
            accepts=route.accepts,
        )
    STATE["store"] = await install_session_selections(ctx, resources, preset_catalog=False)
    STATE["ctx"] = ctx
"""


async def test_selection_routes_mount_beside_the_resource_routes(
    innkeeper_host: RunningHost, tmp_path: Path
) -> None:
    import sys
    import textwrap

    from innkeeper_tavern.face.routes.session_bindings import selected_preset_id

    folder = tmp_path / "plugins" / "both"
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text(textwrap.dedent(WITH_RESOURCE_ROUTES))
    status = await innkeeper_host.load("both", str(folder))
    assert status["state"] == "active", status
    state = sys.modules["innkeeper_plugins.both"].STATE
    tavern = Tavern(innkeeper_host)
    created = await tavern.call("POST", "/pmp-dsh-tavern/api/v1/presets", {"name": "P"}, 201)
    preset = created["preset"]["id"]
    session = await tavern.new_session()
    await tavern.v1("POST", "/select", {"id": preset, "sessionId": session})
    assert await selected_preset_id(state["ctx"], state["store"], session) == preset
    assert await selected_preset_id(state["ctx"], state["store"], None) is None
    await innkeeper_host.unload("both")


async def test_store_limits_answer_over_http(tmp_path: Path, start_host: Any) -> None:
    _, tavern = await start_host(
        tmp_path / "data", plugins={"selplug": {"max_session_selections": 1}}
    )
    first, second = await tavern.new_session(), await tavern.new_session()
    await tavern.v1("POST", "/user-selection", {"sessionId": first, "userId": None})
    err = await tavern.v1("POST", "/user-selection", {"sessionId": second, "userId": None}, 409)
    assert err["code"] == "SESSION_SELECTION_LIMIT_REACHED"
    assert not tavern.store.has(second)
    # No session: empty views, never an error.
    for path in ("/character-selection", "/user-selection"):
        assert (await tavern.v1("GET", path))["selection"] is None


async def test_a_bad_session_cap_fails_plugin_setup(tmp_path: Path) -> None:
    from innkeeper_core.testing import start_test_host

    host = await start_test_host(
        tmp_path / "data", plugins={"selplug": {"max_session_selections": 4097}}
    )
    try:
        status = await host.load(PLUGIN_ID, write_plugin(tmp_path))
        assert status["state"] == "failed"
        assert "max_session_selections" in str(status["lastError"])
    finally:
        await host.close()
