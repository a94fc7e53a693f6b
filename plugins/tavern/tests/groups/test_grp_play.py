"""Group playthroughs (docs/groups.md "Group playthroughs"): start one from a group, each reply
by its speaker (durable, in the messages route, kept by a branch), the request assembled as the
speaker with SillyTavern's group rules, rounds, "Let X speak", the next-speaker pick, stop."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio
from play_harness import Play

from innkeeper_hostapi.agents import AGENTS
from innkeeper_hostapi.providers import ChatMessage
from innkeeper_hostapi.testing import RunningHost

V1 = "/pmp-dsh-tavern/api/v1"


@pytest_asyncio.fixture
async def party(innkeeper_host: RunningHost, tmp_path: Path) -> AsyncIterator[Play]:
    """The Assembler (the default RP strategy) and the Tavern in a fresh host."""
    await innkeeper_host.load("assembler", "innkeeper_assembler.plugin")
    await innkeeper_host.load("tavern", "innkeeper_tavern.plugin")
    root = tmp_path / "workspace"
    root.mkdir()
    play = Play(innkeeper_host, root)
    await play.rp_follow(False)
    yield play


async def card(play: Play, name: str, **fields: Any) -> str:
    doc = await play.v1("POST", "/characters", {"name": name, **fields}, 201)
    card_id: str = doc["character"]["id"]
    return card_id


async def group(play: Play, members: list[str], **fields: Any) -> str:
    body = {"name": "Party", "members": [{"characterId": m} for m in members], **fields}
    doc = await play.v1("POST", "/groups", body, 201)
    group_id: str = doc["group"]["id"]
    return group_id


async def settle(play: Play, sid: str) -> dict[str, Any]:
    """Wait until the session's round is over (no turn, nothing queued or waiting)."""
    agents = play.host.get(AGENTS)
    for _ in range(400):
        await agents.wait_idle(sid)
        state: dict[str, Any] = await play.v2("GET", f"/sessions/{sid}/group")
        if not state["queued"] and not state["waiting"] and not agents.is_running(sid):
            return state
        await asyncio.sleep(0.01)
    raise AssertionError("the round did not end")


async def replies(play: Play, sid: str) -> list[tuple[str, str]]:
    doc = await play.v2("GET", f"/sessions/{sid}/messages?bodies=display")
    return [(m["speaker"]["name"], m["text"]) for m in doc["messages"] if m["role"] == "assistant"]


def texts(messages: list[ChatMessage]) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in messages]


async def test_a_list_round_answers_with_each_member_assembled_as_itself(party: Play) -> None:
    alice = await card(party, "Alice", description="Alice is a knight.", firstMessage="I am Alice.")
    bob = await card(party, "Bob", description="Bob is a bard.", firstMessage="Bob here.")
    gid = await group(party, [alice, bob], activationStrategy="list")
    started = await party.v2("POST", f"/groups/{gid}/playthroughs", {}, 201)
    sid = started["sessionId"]
    row = started["playthrough"]
    assert row["ext"]["pmpDshTavern"]["groupId"] == gid
    catalog = json.loads((await party.read("catalog.json"))["content"])
    assert [r["id"] for r in catalog["playthroughs"]] == [row["id"]]

    provider = party.provider
    provider.enqueue("Alice answers.", "Bob answers.")
    await party.v2("POST", f"/sessions/{sid}/user-message", {"text": "Hello there"}, 202)
    state = await settle(party, sid)
    assert await replies(party, sid) == [("Alice", "Alice answers."), ("Bob", "Bob answers.")]
    assert [s["name"] for s in state["speakers"].values()] == ["Alice", "Bob"]

    first, second = provider.requests[-2].messages, provider.requests[-1].messages
    # Swap mode: each request carries its speaker's card, never the other's.
    assert any("Alice is a knight." in m.content for m in first)
    assert not any("Bob is a bard." in m.content for m in first)
    assert any("Bob is a bard." in m.content for m in second)
    assert not any("Alice is a knight." in m.content for m in second)
    sent = texts(second)
    # The group chat opens with every member's greeting, named; the start prompt lists them.
    assert ("system", "[Start a new group chat. Group members: Alice, Bob]") in sent
    assert ("assistant", "Alice: I am Alice.") in sent and ("assistant", "Bob: Bob here.") in sent
    # Other members' replies carry their names; the player's do not (names_behavior 0).
    assert ("user", "Hello there") in sent
    assert ("assistant", "Alice: Alice answers.") in sent
    # The group nudge goes after the chat.
    assert sent[-1] == ("system", "[Write the next reply only as Bob.]")

    # "Let Alice speak": a turn without input, Alice's; then the pick for the next message.
    provider.enqueue("Alice again.")
    await party.v2("POST", f"/sessions/{sid}/group/reply", {"speakerId": alice}, 202)
    await settle(party, sid)
    await party.v2("POST", f"/sessions/{sid}/group/next-speaker", {"speakerId": bob})
    provider.enqueue("Bob alone.")
    await party.v2("POST", f"/sessions/{sid}/user-message", {"text": "And now?"}, 202)
    await settle(party, sid)
    # The player's pick answers the message instead of the strategy's round.
    assert (await replies(party, sid))[2:] == [("Alice", "Alice again."), ("Bob", "Bob alone.")]

    # A reply swipe keeps the replaced reply's speaker, and that speaker answers alone.
    doc = await party.v2("GET", f"/sessions/{sid}/messages")
    user_seq = next(m["seq"] for m in doc["messages"] if m["role"] == "user")
    alice_seq = next(m["seq"] for m in doc["messages"] if m["role"] == "assistant")
    swipe = await party.v2(
        "POST",
        f"/sessions/{sid}/branch",
        {
            "atEventId": user_seq - 1,
            "stateSource": {"sessionId": sid, "beforeReplyEventId": alice_seq},
        },
        201,
    )
    provider.enqueue("Alice, swiped.")
    await party.v2(
        "POST", f"/sessions/{swipe['sessionId']}/user-message", {"text": "Hello there"}, 202
    )
    await settle(party, swipe["sessionId"])
    assert await replies(party, swipe["sessionId"]) == [("Alice", "Alice, swiped.")]

    # A branch keeps the speakers of what it inherits.
    events = await party.events(sid)
    at = next(e["seq"] for e in events if e["data"]["type"] == "turn/end")
    child = (await party.v2("POST", f"/sessions/{sid}/branch", {"atEventId": at}, 201))["sessionId"]
    assert await replies(party, child) == [("Alice", "Alice answers.")]
    provider.enqueue("Bob in the branch.")
    await party.v2("POST", f"/sessions/{child}/group/reply", {}, 202)
    await settle(party, child)
    assert (await replies(party, child))[-1][0] in ("Alice", "Bob")


async def test_join_mode_sends_the_joined_cards_and_every_depth_prompt(party: Play) -> None:
    depth = {"prompt": "{{char}} whispers.", "depth": 1, "role": "system"}
    alice = await card(party, "Alice", description="Knight.", depthPrompt=depth)
    bob = await card(party, "Bob", description="Bard.", depthPrompt=depth)
    gid = await group(
        party,
        [alice, bob],
        activationStrategy="list",
        generationMode="join",
        joinPrefix="[<FIELDNAME> of {{char}}]",
    )
    sid = (await party.v2("POST", f"/groups/{gid}/playthroughs", {}, 201))["sessionId"]
    party.provider.enqueue("a", "b")
    await party.v2("POST", f"/sessions/{sid}/user-message", {"text": "Hi"}, 202)
    await settle(party, sid)
    sent = [m.content for m in party.provider.requests[-1].messages]
    joined = "[Description of Alice]\nKnight.\n[Description of Bob]\nBard."
    assert any(joined in c for c in sent), sent
    assert any("Alice whispers.\nBob whispers." in c for c in sent), sent


async def test_join_mode_reads_the_player_as_user_in_the_joined_cards(party: Play) -> None:
    alice = await card(
        party,
        "Alice",
        description="Alice guards {{user}}.",
        messageExample="<START>\n{{user}}: Who goes there?\n{{char}}: A friend.",
    )
    bob = await card(party, "Bob", description="Bob sings for {{user}}.")
    gid = await group(
        party,
        [alice, bob],
        activationStrategy="list",
        generationMode="join",
        joinSuffix="[{{char}} and {{user}}]",
    )
    user = await party.v1("POST", "/users", {"name": "Mira"}, 201)
    body = {"userId": user["user"]["id"]}
    sid = (await party.v2("POST", f"/groups/{gid}/playthroughs", body, 201))["sessionId"]
    party.provider.enqueue("a", "b")
    await party.v2("POST", f"/sessions/{sid}/user-message", {"text": "Hi"}, 202)
    await settle(party, sid)
    sent = texts(party.provider.requests[0].messages)
    joined = "Alice guards Mira.\n[Alice and Mira]\nBob sings for Mira.\n[Bob and Mira]"
    assert any(joined in c for _, c in sent), sent
    # The example dialogue's {{user}} lines are the player's: split into their own messages.
    assert ("system", "Mira: Who goes there?") in sent
    assert ("system", "Alice: A friend.\n[Alice and Mira]") in sent


async def test_errors_and_stop(party: Play) -> None:
    alice = await card(party, "Alice")
    bob = await card(party, "Bob")
    gid = await group(party, [alice, bob], activationStrategy="list", autoMode=True)
    status, body = await party.raw("POST", "/groups/nope/playthroughs", {})
    assert (status, body["code"]) == (404, "GROUP_NOT_FOUND")
    status, body = await party.raw("POST", f"/groups/{gid}/playthroughs", {"colour": 1})
    assert status == 400
    sid = (await party.v2("POST", f"/groups/{gid}/playthroughs", {}, 201))["sessionId"]
    status, body = await party.raw("POST", f"/sessions/{sid}/group/reply", {"speakerId": "someone"})
    assert (status, body["code"]) == (404, "GROUP_SPEAKER_UNKNOWN")
    solo = (await party.v2("POST", "/sessions", {}, 201))["sessionId"]
    status, body = await party.raw("POST", f"/sessions/{solo}/group/reply", {})
    assert (status, body["code"]) == (409, "GROUP_SESSION_NOT_GROUP")
    # Auto mode: after the round, another one waits the group's delay; stop ends the chain.
    await party.v2("POST", f"/sessions/{sid}/user-message", {"text": "Go"}, 202)
    agents = party.host.get(AGENTS)
    for _ in range(400):
        await agents.wait_idle(sid)
        state = await party.v2("GET", f"/sessions/{sid}/group")
        if state["waiting"] and not state["queued"]:
            break
        await asyncio.sleep(0.01)
    assert state["waiting"]
    stopped = await party.v2("POST", f"/sessions/{sid}/group/stop", {})
    assert stopped["stopped"] is True
    state = await settle(party, sid)
    assert len(await replies(party, sid)) == 2
