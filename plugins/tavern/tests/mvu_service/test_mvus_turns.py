"""Turns: the last completed reply applies once; greetings open a playthrough once."""

from __future__ import annotations

from typing import Any

from innkeeper_core.providers.synthetic import SyntheticReply

from .conftest import Mvu


async def test_a_turn_updates_the_sessions_state(mvu: Mvu) -> None:
    card = await mvu.card()
    session = await mvu.new_session(card)
    assert await mvu.stat(session) == {"hp": 100, "mood": "calm", "gold": 5, "bag": ["sword"]}
    await mvu.turn(session, SyntheticReply.with_mvu("The bell rings.", {"hp": 80}))
    record = await mvu.state(session)
    assert record["content"]["stat_data"]["hp"] == 80
    assert record["revision"] == 2
    assert record["instance"]["sessionId"] == session
    assert record["id"].startswith("mvu:instance-")
    assert record["templateId"] == f"mvu:character:{card}"


async def test_greeting_envelopes_initialize_the_opening_once(mvu: Mvu) -> None:
    card = await mvu.card(
        first_message="Hello <UpdateVariable>_.set('mood', 'greeted');</UpdateVariable>",
        greetings=("Hi <UpdateVariable>_.set('gold', 50);</UpdateVariable>",),
    )
    first = await mvu.new_session(card)
    assert (await mvu.stat(first))["mood"] == "greeted"
    second = await mvu.new_session()
    await mvu.select(second, card, greeting=1)
    stat = await mvu.stat(second)
    assert stat["gold"] == 50 and stat["mood"] == "calm"
    # Reading again (or a turn) never re-applies the greeting.
    await mvu.turn(first, SyntheticReply.with_mvu("ok", {"mood": "busy"}))
    assert (await mvu.stat(first))["mood"] == "busy"
    history = (
        await mvu.get(
            "/mvu/history",
            id=(await mvu.state(first))["id"],
            scope={"authority": "local", "sessionId": first},
        )
    )["history"]
    assert [h["kind"] for h in history] == ["initial", "reply"]


async def test_only_the_completed_turns_last_plain_reply_applies(mvu: Mvu) -> None:
    card = await mvu.card()
    session = await mvu.new_session(card)
    # A failing provider: the turn ends with an error; nothing applies.
    from innkeeper_hostapi.providers import ProviderError

    mvu.provider.enqueue(
        SyntheticReply(
            text="_.set('hp', 1); more words here",
            error=ProviderError("server", "boom"),
            error_after=3,
        )
    )
    await mvu.call("POST", f"/host/api/sessions/{session}/prompt", {"text": "x"}, 202)
    from innkeeper_hostapi.agents import AGENTS

    await mvu.host.get(AGENTS).wait_idle(session)
    assert (await mvu.stat(session))["hp"] == 100
    await mvu.turn(session, "_.set('hp', 42);")
    assert (await mvu.stat(session))["hp"] == 42
    state = mvu.service.document
    applied = state.applied[session]
    assert [a.outcome for a in applied.values()] == ["applied"]


async def test_replayed_turn_end_never_applies_twice(mvu: Mvu) -> None:
    card = await mvu.card()
    session = await mvu.new_session(card)
    await mvu.turn(session, "_.add('gold', 10);")
    assert (await mvu.stat(session))["gold"] == 15
    revision = (await mvu.state(session))["revision"]
    # The same TURN_ENDED again, and a full rescan from the start: no second application.
    await mvu.service.reconcile(session)
    doc = mvu.service.document
    watermark = doc.sessions[session]
    import msgspec

    doc.sessions[session] = msgspec.structs.replace(watermark, scanned_through=0)
    try:
        await mvu.service.reconcile(session)
    finally:
        pass
    assert (await mvu.stat(session))["gold"] == 15
    assert (await mvu.state(session))["revision"] == revision


async def test_sessions_without_mvu_cards_write_nothing(mvu: Mvu) -> None:
    session = await mvu.new_session()
    await mvu.turn(session, "_.set('hp', 1);")
    assert mvu.service.document.sessions == {}
    scope: dict[str, Any] = {"authority": "local", "sessionId": session}
    assert (await mvu.get("/mvu/resources", scope=scope))["resources"] == []


async def test_observers_see_body_free_facts_and_unload_leaves_no_trace(
    innkeeper_host: Any, leak_check: Any, tmp_path: Any
) -> None:
    from .conftest import PLUGIN_ID, write_plugin

    async with leak_check():
        await innkeeper_host.load(PLUGIN_ID, write_plugin(tmp_path))
        mvu = Mvu(innkeeper_host)
        seen: list[dict[str, Any]] = []
        dispose = mvu.service.observe(seen.append)
        card = await mvu.card()
        session = await mvu.new_session(card)
        await mvu.turn(session, "The end. _.set('hp', 1);")
        dispose()
        await mvu.turn(session, "_.set('hp', 2);")
        phases = [f["phase"] for f in seen]
        assert phases == ["completed", "started", "triggered", "applied", "completed"]
        assert seen[2]["detail"] == "assistant_message_committed"
        assert seen[3]["detail"] == "state-committed" and seen[3]["turn"] == 1
        assert not any("The end" in str(f) for f in seen)
        await innkeeper_host.unload(PLUGIN_ID)


async def test_a_broken_template_is_listed_with_its_source_error(mvu: Mvu) -> None:
    card = await mvu.card(initvar="hp: [100\nmood: :")
    session = await mvu.new_session(card)
    scope = {"authority": "local", "sessionId": session}
    (row,) = (await mvu.get("/mvu/resources", scope=scope))["resources"]
    assert row["id"] == f"mvu:character:{card}" and row["code"] == "MVU_SOURCE_ERROR"
    assert "MVU_SYNTAX" in row["sourceError"]
    # Nothing is allocated; the conversation goes on without MVU.
    mvu.provider.enqueue("_.set('hp', 1);")
    await mvu.call("POST", f"/host/api/sessions/{session}/prompt", {"text": "x"}, 202)
    from innkeeper_hostapi.agents import AGENTS

    await mvu.host.get(AGENTS).wait_idle(session)
    assert mvu.service.document.ledger.states == {}
    types = [e["data"]["type"] for e in await mvu.events(session)]
    assert "assistant/message" in types and types[-1] == "turn/end"


async def test_card_bound_after_the_agent_exists_still_opens_with_its_greeting(mvu: Mvu) -> None:
    from innkeeper_hostapi.agents import AGENTS

    card = await mvu.card(first_message="<UpdateVariable>_.set('mood', 'open');</UpdateVariable>")
    session = await mvu.new_session()
    await mvu.host.get(AGENTS).resolve_agent(session)
    await mvu.select(session, card)
    # The first request allocates the instance (its checkpoint) before any turn ended.
    await mvu.turn(session, "_.set('hp', 1);")
    stat = await mvu.stat(session)
    assert (stat["mood"], stat["hp"]) == ("open", 1)
    # A card bound after turns ended starts from its template, and old replies never replay.
    other = await mvu.card(
        name="Cid", first_message="<UpdateVariable>_.set('mood', 'cid');</UpdateVariable>"
    )
    await mvu.select(session, other)
    scope = {"authority": "local", "sessionId": session}
    rows = (await mvu.get("/mvu/resources", scope=scope))["resources"]
    cid = next(r for r in rows if r["templateId"] == f"mvu:character:{other}")
    record = (await mvu.get("/mvu/resource", id=cid["id"], scope=scope))["resource"]
    assert (record["content"]["stat_data"]["mood"], record["content"]["stat_data"]["hp"]) == (
        "calm",
        100,
    )
    # Switching back restores the first instance untouched.
    await mvu.select(session, card)
    await mvu.turn(session, "_.set('gold', 9);")
    first = next(r for r in rows if r["templateId"] == f"mvu:character:{card}")
    record = (await mvu.get("/mvu/resource", id=first["id"], scope=scope))["resource"]
    assert record["content"]["stat_data"]["gold"] == 9 and record["revision"] == 3


async def test_a_tool_step_reply_never_applies_only_the_last_reply_does(
    mvu: Mvu, innkeeper_host: Any
) -> None:
    from innkeeper_core.providers.synthetic import mvu_update_block
    from innkeeper_hostapi.providers import ChatToolCall
    from innkeeper_hostapi.tools import ToolInvocation

    async def look(call: ToolInvocation) -> str:
        return "a door"

    tools = innkeeper_host.plugins.registries.tools
    entry = tools.add(
        "test", "look", "Look.", {"type": "object"}, look, risk="read-only", timeout_s=None
    )
    try:
        card = await mvu.card()
        session = await mvu.new_session(card)
        # The first step's reply calls a tool and carries an update: it must not apply.
        mvu.provider.enqueue(
            SyntheticReply(
                text=f"I look around.\n{mvu_update_block({'hp': 1, 'gold': 99})}",
                tool_calls=(ChatToolCall(id="c1", name="look", arguments="{}"),),
                finish_reason="tool_calls",
            )
        )
        await mvu.turn(session, SyntheticReply.with_mvu("A door.", {"hp": 70}))
        record = await mvu.state(session)
        assert record["content"]["stat_data"]["hp"] == 70
        assert record["content"]["stat_data"]["gold"] == 5
        assert record["revision"] == 2  # one commit for the turn
    finally:
        await tools.remove(entry)
