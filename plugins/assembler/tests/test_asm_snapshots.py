"""Applied strategies are per-session snapshots: later edits and other applications never
change a session that already has one; snapshots survive a restart of the plugin."""

from __future__ import annotations

from innkeeper_hostapi.assembly import Module, Strategy
from innkeeper_hostapi.testing import RunningHost

from .conftest import ASM, Api

ITEMS = '[Contribution(key="a", text="A."), Contribution(key="b", text="B.")]'


async def test_snapshots_are_per_session(innkeeper_host: RunningHost, api: Api) -> None:
    await innkeeper_host.load("assembler", "innkeeper_assembler.plugin")
    await innkeeper_host.load("src", api.source_plugin("src", "test.src", ITEMS))
    first, second = await api.new_session(), await api.new_session()
    assembler = api.assembler
    await assembler.put_strategy(
        Strategy(id="s", name="v1", modules=(Module(source="test.src", keys=("a",)),))
    )
    applied = await assembler.apply(first, "s")
    assert applied is not None and applied.strategy.revision == 1

    # Edit the strategy, apply it to the second session, then apply another strategy there.
    edited = await assembler.put_strategy(
        Strategy(id="s", name="v2", modules=(Module(source="test.src", keys=("b",)),))
    )
    assert edited.revision == 2
    await assembler.apply(second, "s")
    await assembler.put_strategy(Strategy(id="other", name="o", modules=()))
    await assembler.apply(second, "other")
    await assembler.delete_strategy("s")

    snapshot = assembler.applied(first)
    assert snapshot is not None and snapshot.strategy.name == "v1"
    assert snapshot.strategy.revision == 1
    await api.turn(first, "Hi")
    assert api.provider.requests[-1].messages[0].content == "A."

    # The snapshots are durable: a fresh generation of the plugin reads them back.
    await innkeeper_host.reload("assembler")
    reread = api.assembler.applied(first)
    assert reread == snapshot
    data = await api.call("GET", f"{ASM}/sessions/{second}/strategy")
    assert data["applied"]["strategy"]["id"] == "other"

    # Clearing goes back to the no-strategy path.
    await api.call("DELETE", f"{ASM}/sessions/{first}/strategy")
    await api.turn(first, "Again")
    assert api.provider.requests[-1].messages[0].role == "user"


async def test_apply_errors(innkeeper_host: RunningHost, api: Api) -> None:
    await innkeeper_host.load("assembler", "innkeeper_assembler.plugin")
    session = await api.new_session()
    missing = await api.call(
        "PUT", f"{ASM}/sessions/{session}/strategy", {"strategyId": "nope"}, 404
    )
    assert missing["code"] == "STRATEGY_NOT_FOUND"
    await api.call("PUT", f"{ASM}/strategies/s", {"id": "s", "name": "s"})
    gone = await api.call("PUT", f"{ASM}/sessions/ghost/strategy", {"strategyId": "s"}, 404)
    assert gone["code"] == "SESSION_NOT_FOUND"
    bad = await api.call("PUT", f"{ASM}/strategies/s", {"id": "other", "name": "s"}, 400)
    assert bad["code"] == "STRATEGY_INVALID"
    await api.call("PUT", f"{ASM}/strategies/s", {"id": "s", "name": "s", "extra": 1}, 400)
    await api.call("GET", f"{ASM}/strategies/none", status=404)
    listed = await api.call("GET", f"{ASM}/strategies")
    assert [s["id"] for s in listed["strategies"]] == ["s"]
    caps = await api.call("GET", f"{ASM}/capabilities")
    assert caps["version"] == "1.1.3" and caps["protocol"] == 1


async def test_forks_inherit_the_parents_snapshot(innkeeper_host: RunningHost, api: Api) -> None:
    await innkeeper_host.load("assembler", "innkeeper_assembler.plugin")
    await innkeeper_host.load("src", api.source_plugin("src", "test.src", ITEMS))
    parent = await api.new_session()
    await api.use(parent, Strategy(id="s", name="s", modules=(Module(source="test.src"),)))
    await api.turn(parent, "Hi")
    seq = (await api.events(parent))[-1]["seq"]
    child = (await api.call("POST", f"/host/api/sessions/{parent}/fork", {"atEventId": seq}, 201))[
        "session"
    ]["id"]
    grandchild = (
        await api.call("POST", f"/host/api/sessions/{child}/fork", {"atEventId": seq}, 201)
    )["session"]["id"]
    await api.turn(grandchild, "Swipe")  # its parent never ran: the chain is walked
    assert api.provider.requests[-1].messages[0].content == "A.\n\nB."
    inherited = api.assembler.applied(grandchild)
    parent_snapshot = api.assembler.applied(parent)
    assert inherited is not None and parent_snapshot is not None
    assert (inherited.sha256, inherited.applied_at) == (
        parent_snapshot.sha256,
        parent_snapshot.applied_at,
    )
    # Not linked afterwards.
    await api.assembler.put_strategy(Strategy(id="other", name="o", modules=()))
    await api.assembler.apply(parent, "other")
    snapshot = api.assembler.applied(grandchild)
    assert snapshot is not None and snapshot.strategy.id == "s"
