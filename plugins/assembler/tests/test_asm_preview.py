"""Preview shows what a request would send without calling a model or writing anything."""

from __future__ import annotations

from innkeeper_hostapi.assembly import Module, Strategy
from innkeeper_hostapi.testing import RunningHost

from .conftest import ASM, Api

ITEMS = """[
    Contribution(key="main", text="Main."),
    Contribution(key="lore", text="Lore at depth one.", placement=AtDepth(depth=1)),
]"""


async def test_preview_sends_nothing_and_matches_the_next_request(
    innkeeper_host: RunningHost, api: Api
) -> None:
    await innkeeper_host.load("assembler", "innkeeper_assembler.plugin")
    await innkeeper_host.load("src", api.source_plugin("src", "test.src", ITEMS))
    session = await api.new_session()
    await api.turn(session, "First")
    requests = len(api.provider.requests)
    strategy = {
        "id": "adv",
        "name": "Advanced",
        "backend": "advanced",
        "modules": [{"source": "test.src"}],
    }
    stored = await api.call("PUT", ASM + "/strategies/adv", strategy)
    assert stored["strategy"]["revision"] == 1
    await api.call("PUT", f"{ASM}/sessions/{session}/strategy", {"strategyId": "adv"})
    before = await api.events(session)

    data = await api.call("POST", ASM + "/preview", {"sessionId": session, "input": "Second"})
    preview = data["preview"]
    assert len(api.provider.requests) == requests  # no model call
    assert await api.events(session) == before  # nothing written
    messages = [(m["role"], m["content"]) for m in preview["messages"]]
    assert messages == [
        ("system", "Main."),
        ("user", "First"),
        ("assistant", "Synthetic reply to: First"),
        ("system", "Lore at depth one."),
        ("user", "Second"),
    ]
    assert preview["requestOnly"] == [3]
    assert preview["backend"] == "advanced" and preview["rejected"] is False

    # Sources were asked as a preview (they must not commit state).
    await api.turn(session, "Second")
    sent = [(m.role, m.content) for m in api.provider.requests[-1].messages]
    assert sent == messages  # the preview was exactly what the request then sent


async def test_preview_of_an_unapplied_strategy_and_of_no_session(
    innkeeper_host: RunningHost, api: Api
) -> None:
    await innkeeper_host.load("assembler", "innkeeper_assembler.plugin")
    await innkeeper_host.load("src", api.source_plugin("src", "test.src", ITEMS))
    session = await api.new_session()
    await api.assembler.put_strategy(
        Strategy(id="std", name="std", modules=(Module(source="test.src"),))
    )
    data = await api.call("POST", ASM + "/preview", {"sessionId": session, "strategyId": "std"})
    assert [m["content"] for m in data["preview"]["messages"]] == ["Main.\n\nLore at depth one."]
    assert api.assembler.applied(session) is None  # previewing applies nothing
    data = await api.call("POST", ASM + "/preview", {"strategyId": "std", "input": "Hi"})
    assert [m["role"] for m in data["preview"]["messages"]] == ["system", "user"]
    await api.call("POST", ASM + "/preview", {"sessionId": "nope", "strategyId": "std"}, 404)
    await api.call("POST", ASM + "/preview", {"strategyId": "missing"}, 404)
    await api.call("POST", ASM + "/preview", {"unknown": 1}, 400)
    assert api.provider.requests == []
