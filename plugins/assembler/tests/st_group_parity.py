"""Play the SillyTavern group reference scenarios (``st_fixtures/groups.json``) on Innkeeper.

The fixture comes from ``tools/st_harness/generate_group_requests.py`` (SillyTavern's own group
code and assembly; see the harness README). A scenario is one group playthrough: the corpus
preset (with the scenario's settings), the members' cards imported as :mod:`st_parity` imports
one card, a group with the scenario's muting, generation mode and join prefix/suffix, the user
Mira with or without a persona, the constant lore or none. Its script: each step is the player's
message answered by the member the player picks (``…/group/next-speaker``), or a reply without
input by a picked member (``…/group/reply``); the request the provider receives is the case.
Then the continue and impersonate requests (the Assembler's preview, as the last speaker). A
message matches when role, name and content digest are equal.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

from innkeeper_core.providers.synthetic import SyntheticProvider
from innkeeper_hostapi.agents import AGENTS, PROVIDER
from innkeeper_hostapi.testing import RunningHost

from .st_parity import ASM, V1, Outcome, Player, load, wire

V2: Final = "/pmp-dsh-tavern/api/v2"


class GroupPlayer(Player):
    """Plays group scenarios in one host (the Assembler and Tavern loaded)."""

    async def settle(self, session: str) -> None:
        """Wait until the session's turn and round are over."""
        agents = self.host.get(AGENTS)
        for _ in range(400):
            await agents.wait_idle(session)
            state = await self.call("GET", f"{V2}/sessions/{session}/group")
            if not state["queued"] and not state["waiting"] and not agents.is_running(session):
                return
            await asyncio.sleep(0.01)
        raise AssertionError("the round did not end")

    def speaker(self, scenario: dict[str, Any], who: str) -> int:
        if who == "first":
            return 0
        if who == "second":
            return 1
        muted: list[int] = scenario["muted"]
        return muted[0] if muted else len(scenario["members"]) - 1

    async def play(self, scenario: dict[str, Any]) -> Outcome:
        doc = self.doc
        persona = doc["persona"] if scenario["persona"] else ""
        user = await self.call("POST", V1 + "/users", {"name": doc["user"], "description": persona})
        members = [await self.card(m) for m in scenario["members"]]
        body = {
            "name": "Party",
            "members": [
                {"characterId": m, "muted": i in scenario["muted"]} for i, m in enumerate(members)
            ],
            "activationStrategy": "manual",
            "generationMode": scenario["mode"],
            "joinPrefix": scenario["prefix"],
            "joinSuffix": scenario["suffix"],
        }
        group = (await self.call("POST", V1 + "/groups", body))["group"]["id"]
        started = await self.call(
            "POST",
            f"{V2}/groups/{group}/playthroughs",
            {"presetId": await self.preset(scenario), "userId": user["user"]["id"]},
        )
        session = started["sessionId"]
        if scenario["lore"]:
            await self.call(
                "POST",
                V1 + "/world-book-selection",
                {"sessionId": session, "worldBookIds": [self.book]},
            )
        outcome = Outcome(scenario["id"], expected=dict(scenario["cases"]))
        provider = self.host.get(PROVIDER)
        assert isinstance(provider, SyntheticProvider)
        for step, (kind, text, who) in enumerate(doc["script"]):
            speaker = members[self.speaker(scenario, who)]
            provider.enqueue(doc["replies"][step])
            if text is None:
                path, payload = f"{V2}/sessions/{session}/group/reply", {"speakerId": speaker}
            else:
                pick = {"speakerId": speaker}
                await self.call("POST", f"{V2}/sessions/{session}/group/next-speaker", pick)
                path, payload = f"{V2}/sessions/{session}/user-message", {"text": text}
            await self.call("POST", path, payload)
            await self.settle(session)
            sent = provider.requests[-1].messages
            outcome.sent[kind] = [wire(m) for m in sent]
            outcome.texts[kind] = [(m.role, m.content, m.name) for m in sent]
        for kind in ("continue", "impersonate"):
            body = {"sessionId": session, "kind": kind}
            preview = await self.call("POST", ASM + "/preview", body)
            messages = preview["preview"]["messages"]
            outcome.sent[kind] = [wire(m) for m in messages]
            outcome.texts[kind] = [(m["role"], m["content"], m.get("name")) for m in messages]
        return outcome


async def play_groups(host: RunningHost, preset: str) -> list[Outcome]:
    """Every group scenario under ``preset`` (a key of the fixture's ``presets``)."""
    await host.load("assembler", "innkeeper_assembler.plugin")
    await host.load("tavern", "innkeeper_tavern.plugin")
    doc = load("groups")
    player = GroupPlayer(host, {**doc, "preset": doc["presets"][preset]})
    await player.setup()
    return [await player.play(s) for s in doc["scenarios"] if s["preset"] == preset]
