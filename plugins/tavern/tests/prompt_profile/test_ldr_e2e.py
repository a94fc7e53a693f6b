"""The turn end to end over HTTP: corpus card + preset + world book + user → the exact request.

The Default preset, Seraphina (with her embedded book) and The Long Reclamation are imported
through the v1 routes, bound to a session, and a message that triggers lore from both books is
sent through the host's prompt route. The synthetic provider records the request it received; the
assertions rebuild the expected system text from the corpus files themselves.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tavern_harness import DEFAULT_PRESET_CALL

from innkeeper_core.testing import start_test_host
from innkeeper_tavern.features.prompt_profile import ASSEMBLY_AUDIT
from innkeeper_tavern.features.prompt_profile.rp_policy import DEFAULT_RP_POLICY
from innkeeper_tavern.pure.formats.card import card_world_book, parse_card_bytes
from innkeeper_tavern.pure.formats.macros import MacroEnv, expand_macros
from innkeeper_tavern.pure.formats.preset import parse_preset_json
from innkeeper_tavern.pure.formats.worldbook import parse_world_book

CORPUS = Path(__file__).resolve().parents[5] / "shared" / "sillytavern-corpus"
ST = CORPUS / "sillytavern-repo" / "staging-1ac6780"
RECLAMATION = CORPUS / "prolix-oc-st-presets" / "worldbooks" / "The Long Reclamation.json"
Tavern = Any

MESSAGE = "I limp into the glade and ask about the deadlands."


async def bind_all(tavern: Tavern) -> dict[str, str]:
    preset = await tavern.import_preset(ST / "presets_openai_Default.json")
    card = await tavern.import_card(ST / "default_Seraphina.png")
    book = await tavern.import_world_book(RECLAMATION)
    user = await tavern.v1(
        "POST", "/users", {"name": "Ada", "description": "{{user}} is a ranger."}, 201
    )
    session = await tavern.new_session()
    await tavern.v1("POST", "/select", {"id": preset, "sessionId": session})
    await tavern.v1("POST", "/character-selection", {"sessionId": session, "characterCardId": card})
    await tavern.v1("POST", "/user-selection", {"sessionId": session, "userId": user["user"]["id"]})
    await tavern.v1("POST", "/world-book-selection", {"sessionId": session, "worldBookIds": [book]})
    return {"preset": preset, "card": card, "book": book, "session": session}


class Expected:
    """The corpus files, parsed independently of the loader, with Seraphina/Ada macros."""

    def __init__(self, card_id: str, book_id: str) -> None:
        self.card = parse_card_bytes((ST / "default_Seraphina.png").read_bytes())
        self.preset = parse_preset_json((ST / "presets_openai_Default.json").read_text())
        self.env = MacroEnv(char="Seraphina", user="Ada", chat_id="x")
        embedded = card_world_book(self.card)
        assert embedded is not None
        standalone = parse_world_book(json.loads(RECLAMATION.read_text(encoding="utf-8")))
        self.lore = {
            f"character:{card_id}:embedded-world-book:{e.uid}": e for e in embedded.entries
        }
        self.lore.update({f"{book_id}:{e.uid}": e for e in standalone.entries})

    def expand(self, text: str) -> str:
        return expand_macros(text, self.env).strip()

    def part(self, identifier: str, sources: list[str]) -> str:
        if identifier == "main":
            return self.expand(
                next(p.content for p in self.preset.prompts if p.identifier == "main")
            )
        if identifier == "personaDescription":
            return "Ada is a ranger."
        if identifier == "charDescription":
            return self.expand(self.card.data.description)
        if identifier == "greeting":
            return self.expand(self.card.data.first_message)
        assert identifier in ("worldInfoBefore", "worldInfoAfter"), identifier
        return "\n".join(self.expand(self.lore[s[5:]].content) for s in sources)


def decision(record: dict[str, Any], lore_id: str) -> dict[str, Any]:
    for book in record["lore"]["books"]:
        for item in book["decisions"]:
            if item["loreId"] == lore_id:
                return item  # type: ignore[no-any-return]
    raise AssertionError(lore_id)


async def test_a_bound_card_preset_persona_and_books_shape_the_request(tavern: Tavern) -> None:
    ids = await bind_all(tavern)
    session = ids["session"]
    await tavern.prompt(session, MESSAGE)

    [request] = tavern.provider.requests
    [record] = tavern.host.get(ASSEMBLY_AUDIT).records(session)
    parts = record["composition"]["parts"]
    assert [p["identifier"] for p in parts] == [
        "main",
        "worldInfoBefore",
        "personaDescription",
        "charDescription",
        "worldInfoAfter",
        "greeting",
    ]
    expected = Expected(ids["card"], ids["book"])
    system = "\n\n".join(expected.part(p["identifier"], p["sources"]) for p in parts)
    # Binding the card entered RP (rpFollowCharacter is on by default): rp:policy follows.
    sent_system = system + "\n\n" + DEFAULT_RP_POLICY
    assert [(m.role, m.content) for m in request.messages] == [
        ("system", sent_system),
        ("user", MESSAGE),
    ]
    assert system.startswith(
        "Write Seraphina's next reply in a fictional chat between Seraphina and Ada.\n\n"
    )
    # The glade (Seraphina's embedded book, before) and the deadlands (standalone, after) fired.
    glade = f"character:{ids['card']}:embedded-world-book:2"
    deadlands = f"{ids['book']}:7"
    assert glade in parts[1]["sources"][0] and f"lore:{deadlands}" in parts[4]["sources"]
    # The call config is the preset's sampling.
    assert request.params.temperature == 1.0 and request.params.max_tokens == 300
    assert request.params.reasoning_effort is None and request.params.stop is None

    # The audit explains it: why each entry fired, what was requested and sent.
    assert decision(record, glade)["reason"] == "key-match"
    assert decision(record, glade)["primaryMatches"] == ["glade"]
    assert decision(record, deadlands)["primaryMatches"] == ["deadlands"]
    assert decision(record, f"{ids['book']}:36")["decision"] == "rejected"
    assert record["worldBookSelection"]["explicitIds"] == [ids["book"]]
    assert record["composition"]["includeGreeting"] is True
    assert record["composition"]["profileBytes"] == len(system.encode())
    assert record["activationContext"]["durableMessageCount"] == 1
    parameters = record["parameters"]
    assert parameters["proposed"] == parameters["requested"] == DEFAULT_PRESET_CALL
    assert parameters["effective"]["temperature"] == 1.0
    assert parameters["effective"]["maxTokens"] == 300
    assert [a["attempt"] for a in parameters["attempts"]] == [1] and parameters["omitted"] == []
    assert {d["code"] for d in record["diagnostics"]} >= {"CHARACTER_GREETING_REFERENCE"}

    # Durable history holds what was sent; the greeting is never forged as assistant history.
    events = await tavern.events(session)
    systems = [e["data"] for e in events if e["data"]["type"] == "system/message"]
    assert [s["content"][0]["text"] for s in systems] == [sent_system]
    assert [e["data"]["type"] for e in events].count("assistant/message") == 1

    # The second generation: no greeting, history after the profile.
    await tavern.prompt(session, "Thank you.")
    second = tavern.provider.requests[-1]
    assert [m.role for m in second.messages] == ["system", "user", "assistant", "user"]
    assert expected.part("greeting", []) not in second.messages[0].content
    assert (
        tavern.host.get(ASSEMBLY_AUDIT).latest(session)["composition"]["includeGreeting"] is False
    )


async def test_active_runs_assembly_without_writing_history(tavern: Tavern) -> None:
    ids = await bind_all(tavern)
    session = ids["session"]
    await tavern.prompt(session, MESSAGE)
    before = await tavern.events(session)
    active = await tavern.active(session)
    assert await tavern.events(session) == before
    assert active["ok"] is True
    assert active["selected"]["id"] == ids["preset"]
    assert active["sessionSelection"]["worldBookIds"] == [ids["book"]]
    assert active["selection"]["worldBookIds"] == [ids["book"]]
    assert active["worldBookSelection"] == {
        "explicitIds": [ids["book"]],
        "userBoundIds": [],
        "presetBoundIds": [],
        "characterBoundIds": [],
        "effectiveIds": [ids["book"]],
        "duplicateIds": [],
        "order": "session-explicit-then-user-then-preset-then-character",
    }
    assert active["resources"]["characterCard"]["name"] == "Seraphina"
    assert active["resources"]["user"]["name"] == "Ada"
    assert [b["id"] for b in active["resources"]["worldBooks"]] == [
        ids["book"],
        f"character:{ids['card']}:embedded-world-book",
    ]
    assert active["callConfig"] == DEFAULT_PRESET_CALL
    audit = active["audit"]
    assert audit["preview"] is True and audit["turn"] is None
    # The last user message still has the glade in it, so the preview matches it too.
    assert (
        decision(audit, f"character:{ids['card']}:embedded-world-book:2")["reason"] == "key-match"
    )
    assert "text" not in json.dumps(audit["composition"]["parts"])  # metadata, never bodies
    assert len(tavern.host.get(ASSEMBLY_AUDIT).records(session)) == 1  # previews are not kept


async def test_active_without_a_session_and_with_a_bad_id(tavern: Tavern) -> None:
    active = await tavern.active()
    assert active["sessionId"] is None and active["selected"] is None
    assert active["audit"]["composition"]["profileBytes"] == 0
    bad = await tavern.v1("GET", "/active?sessionId=..%2Fx", status=400)
    assert bad["code"] == "SESSION_ID_INVALID"


async def test_shared_books_are_deduplicated_with_every_binding_source(tavern: Tavern) -> None:
    ids = await bind_all(tavern)
    await tavern.v1("PUT", f"/presets/{ids['preset']}/world-books", {"worldBookIds": [ids["book"]]})
    await tavern.v1(
        "PUT", f"/characters/{ids['card']}/world-books", {"worldBookIds": [ids["book"]]}
    )
    active = await tavern.active(ids["session"])
    selection = active["worldBookSelection"]
    assert selection["effectiveIds"] == [ids["book"]]
    assert selection["duplicateIds"] == [ids["book"]]
    assert selection["presetBoundIds"] == selection["characterBoundIds"] == [ids["book"]]
    assert active["resources"]["worldBooks"][0]["bindingSources"] == [
        "session",
        "preset",
        "character",
    ]


async def test_profile_budget_over_http(tmp_path: Path, tavern_for: Any) -> None:
    """Lore is trimmed with a warning; a profile too large even without lore is left out with a
    clear, durable diagnostic, and the turn still completes."""
    for limit, too_large in ((5000, False), (1000, True)):
        host = await start_test_host(
            tmp_path / str(limit), plugins={"tavern": {"max_profile_bytes": limit}}
        )
        try:
            await host.load("tavern", "innkeeper_tavern.plugin")
            tavern = tavern_for(host)
            await tavern.rp_follow(False)  # only the profile's own size is measured here
            ids = await bind_all(tavern)
            session = ids["session"]
            await tavern.prompt(session, MESSAGE)
            [request] = tavern.provider.requests
            record = host.get(ASSEMBLY_AUDIT).latest(session)
            codes = [d["code"] for d in record["diagnostics"]]
            events = await tavern.events(session)
            assert events[-1]["data"]["type"] == "turn/end"
            assert events[-1]["data"]["reason"]["kind"] == "completed"
            if too_large:
                assert [m.role for m in request.messages] == ["user"]
                assert "TAVERN_PROFILE_TOO_LARGE" in codes
                ext = [e["data"] for e in events if e["data"]["type"] == "ext"]
                assert ext[0]["name"] == "pmp-dsh-tavern:profile-diagnostic"
                assert ext[0]["payload"]["code"] == "TAVERN_PROFILE_TOO_LARGE"
                assert ext[0]["payload"]["details"]["maxBytes"] == 1000
            else:
                assert request.messages[0].role == "system"
                assert len(request.messages[0].content.encode()) <= limit
                assert "TAVERN_PROFILE_LORE_LIMITED" in codes
                assert record["composition"]["omittedLoreEntries"] > 0
                assert record["composition"]["retainedLoreEntries"] > 0
        finally:
            await host.close()
