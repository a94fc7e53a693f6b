"""An opening draft's preview renders the prompt its first send would carry
(`docs/contract/openings.md#opening-drafts`): the Tavern assembly of the draft's card, greeting,
persona, preset, books and opening variables, with no session, no write and no model call."""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from play_harness import MVU_CARD, Play

from innkeeper_hostapi.testing import RunningHost
from innkeeper_tavern.features.opening_drafts import prompt as prompt_module
from innkeeper_tavern.features.prompt_profile import ASSEMBLY_AUDIT
from innkeeper_tavern.features.prompt_profile.rp_policy import DEFAULT_RP_POLICY

PROLIX = Path(__file__).resolve().parents[5] / "shared/sillytavern-corpus/prolix-oc-st-presets"


@pytest_asyncio.fixture
async def play(innkeeper_host: RunningHost, tmp_path: Path) -> AsyncIterator[Play]:
    """Tavern with the Assembler (new sessions get the default ``tavern-rp`` strategy)."""
    await innkeeper_host.load("assembler", "innkeeper_assembler.plugin")
    await innkeeper_host.load("tavern", "innkeeper_tavern.plugin")
    root = tmp_path / "workspace"
    root.mkdir()
    yield Play(innkeeper_host, root)


async def import_preset(play: Play, name: str) -> str:
    content = (PROLIX / "presets" / f"{name}.json").read_text()
    data = await play.v1("POST", "/import", {"content": content, "name": name}, 201)
    return str(data["preset"]["id"])


async def corpus_draft(play: Play) -> tuple[str, str, str]:
    """``(draftId, presetId, otherPresetId)`` for the corpus card with a corpus preset."""
    await play.bind()
    card = (PROLIX / "cards" / "Pxansatu.json").read_bytes()
    cid = (await play.resources.import_character(card, "Pxansatu.json")).record.id
    preset = await import_preset(play, "StoryWeaver v1.1")
    other = await import_preset(play, "Lucid Loom v2.8")
    user = await play.v1("POST", "/users", {"name": "Mira", "description": "A wanderer."}, 201)
    selection = {"presetId": preset, "userId": user["user"]["id"]}
    body = {"characterId": cid, "selection": selection}
    draft = (await play.v2("POST", "/drafts", body, 201))["draft"]
    return draft["id"], preset, other


async def preview(play: Play, did: str, **extra: Any) -> dict[str, Any]:
    body = {"expectedRevision": extra.pop("revision", 1), **extra}
    answer: dict[str, Any] = await play.v2("POST", f"/drafts/{did}/preview", body)
    return answer["preview"]


#: The preset's dice rolls: ``{{roll}}`` is seeded by the session id, unknown before the send.
ROLL = re.compile(r"(ROLL RESULT:\*\*) \d+")


def unseeded(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**m, "content": ROLL.sub(r"\1 N", m["content"])} for m in messages]


async def test_the_preview_is_the_first_sends_prompt(play: Play) -> None:
    did, _, _ = await corpus_draft(play)
    shown = await preview(play, did)
    prompt = shown["prompt"]
    assert prompt["strategyId"] == "tavern-rp" and prompt["truncated"] is False
    omitted = {s["name"] for s in prompt["omittedSections"]}
    assert {"user-message", "host-sections", "seeded-macros"} <= omitted
    # The existing fields are unchanged.
    assert shown["messages"] == [{"role": "assistant", "text": shown["greeting"]}]
    assert shown["scope"] == "opening-draft" and shown["pendingInputsIncluded"] is False
    # Binding the card enters RP: its policy leads the system message, then the preset's
    # prompts each as its own message, the greeting, the post-history prompts.
    first = prompt["messages"][0]
    assert first == {"role": "system", "content": DEFAULT_RP_POLICY}
    assert prompt["messages"][1]["content"].startswith("# STORYWEAVER INITIATIVE")
    greeting = next(m for m in prompt["messages"] if m["role"] == "assistant")
    # StoryWeaver's names_behavior 2: the speaker's name leads the content.
    assert greeting["content"].startswith("Pxansatu: The war of the Hallelujah Mountains")
    assert [s["name"] for s in prompt["sections"]][-1] == "rp:policy"

    body = {"expectedRevision": 1, "operationId": "o", "text": "Hi"}
    receipt = await play.v2("POST", f"/drafts/{did}/materialize", body)
    play.provider.enqueue("Hello.")
    sid = receipt["sessionId"]
    message = {"text": "Hi", "requestId": receipt["requestId"]}
    await play.v2("POST", f"/sessions/{sid}/user-message", message, 202)
    await play.idle(sid)
    sent = [{"role": m.role, "content": m.content} for m in play.provider.requests[0].messages]
    # Message for message, text for text — except the user's own message (not known to a
    # preview; it sits before the post-history prompts) and the session-seeded dice rolls.
    # (StoryWeaver prefixes it with the user's name, as the greeting with the character's.)
    user = next(
        i for i, m in enumerate(sent) if m["role"] == "user" and m["content"].endswith(": Hi")
    )
    assert user == prompt["messages"].index(greeting) + 1
    assert unseeded(prompt["messages"]) == unseeded(sent[:user] + sent[user + 1 :])
    # Once materialized the preview answers 409, as before.
    got, answer = await play.raw("POST", f"/drafts/{did}/preview", {"expectedRevision": 2})
    assert got == 409 and answer["code"] == "DRAFT_MATERIALIZED"


async def test_a_preset_override_changes_the_preview_only(play: Play) -> None:
    did, preset, other = await corpus_draft(play)
    before = await play.v2("GET", f"/drafts/{did}")
    mine = await preview(play, did)
    theirs = await preview(play, did, preset=other)
    assert mine["presetId"] == preset and theirs["presetId"] == other
    assert mine["prompt"]["messages"][1]["content"].startswith("# STORYWEAVER INITIATIVE")
    assert theirs["prompt"]["messages"] != mine["prompt"]["messages"]
    assert not any("STORYWEAVER" in m["content"] for m in theirs["prompt"]["messages"])
    # The draft is unchanged: same revision, same preset, and the next preview is the first.
    assert await play.v2("GET", f"/drafts/{did}") == before
    assert await preview(play, did) == mine


async def test_the_preview_writes_nothing(
    play: Play, innkeeper_host: RunningHost, tmp_path: Path
) -> None:
    did, _, other = await corpus_draft(play)
    sessions = await play.call("GET", "/host/api/sessions?limit=200")
    audit = len(innkeeper_host.get(ASSEMBLY_AUDIT))
    files = tree_digest(tmp_path)
    await preview(play, did)
    await preview(play, did, preset=other)
    assert tree_digest(tmp_path) == files  # data dir and workspace byte-identical
    assert await play.call("GET", "/host/api/sessions?limit=200") == sessions
    assert len(innkeeper_host.get(ASSEMBLY_AUDIT)) == audit
    assert play.provider.requests == []


async def test_the_preview_reads_the_drafts_opening_variables(play: Play) -> None:
    """MVU macros in activated lore read the draft's opening (its edits included)."""
    await play.bind()
    card = copy.deepcopy(MVU_CARD)
    card["data"]["first_mes"] = 'Morning.\n<UpdateVariable>_.set("hp", 90);</UpdateVariable>'
    state = {"keys": [], "constant": True, "enabled": True, "insertion_order": 10}
    state |= {"content": "State: {{format_message_variable::stat_data}}", "comment": "state"}
    card["data"]["character_book"]["entries"].append(state)
    imported = await play.resources.import_character(json.dumps(card).encode(), "ada.json")
    draft = (await play.v2("POST", "/drafts", {"characterId": imported.record.id}, 201))["draft"]
    texts = [m["content"] for m in (await preview(play, draft["id"]))["prompt"]["messages"]]
    assert any("State:" in t and "hp: 90" in t for t in texts), texts
    edit = {"expectedRevision": 1, "variables": {"stat_data": {"hp": 7}}}
    await play.v2("PUT", f"/drafts/{draft['id']}", edit)
    texts = [
        m["content"] for m in (await preview(play, draft["id"], revision=2))["prompt"]["messages"]
    ]
    assert any("State:" in t and "hp: 7" in t for t in texts), texts


def tree_digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


async def test_without_the_assembler_the_compatibility_profile_is_previewed(
    innkeeper_host: RunningHost, tmp_path: Path
) -> None:
    """No strategy is applied: the system message is the profile's parts, then the RP policy."""
    await innkeeper_host.load("tavern", "innkeeper_tavern.plugin")
    (tmp_path / "workspace").mkdir()
    play = Play(innkeeper_host, tmp_path / "workspace")
    did, _, _ = await corpus_draft(play)
    prompt = (await preview(play, did))["prompt"]
    assert prompt["strategyId"] is None and prompt["backend"] is None
    body = {"expectedRevision": 1, "operationId": "o", "text": "Hi"}
    receipt = await play.v2("POST", f"/drafts/{did}/materialize", body)
    play.provider.enqueue("Hello.")
    message = {"text": "Hi", "requestId": receipt["requestId"]}
    await play.v2("POST", f"/sessions/{receipt['sessionId']}/user-message", message, 202)
    await play.idle(receipt["sessionId"])
    sent = [{"role": m.role, "content": m.content} for m in play.provider.requests[0].messages]
    assert sent[1:] == [{"role": "user", "content": "Hi"}]
    assert unseeded(prompt["messages"]) == unseeded(sent[:1])
    assert prompt["messages"][0]["content"].endswith(DEFAULT_RP_POLICY)


async def test_the_prompt_in_one_answer_is_bounded(
    play: Play, monkeypatch: pytest.MonkeyPatch
) -> None:
    did, _, _ = await corpus_draft(play)
    whole = (await preview(play, did))["prompt"]
    sizes = [len(m["content"].encode()) for m in whole["messages"]]
    monkeypatch.setattr(prompt_module, "MAX_PREVIEW_PROMPT_BYTES", sum(sizes[:3]))
    cut = (await preview(play, did))["prompt"]
    assert cut["truncated"] is True
    assert cut["messages"] == whole["messages"][:3]
    assert cut["omittedMessages"] == len(sizes) - 3


async def test_while_the_first_send_is_prepared_the_preview_is_409(
    play: Play, tmp_path: Path
) -> None:
    did, _, _ = await corpus_draft(play)
    # A preparation interrupted between the reservation and the session (as after a crash).
    (path,) = (tmp_path / "innkeeper-data").rglob(f"{did}.json")
    record = json.loads(path.read_text())
    record["status"] = "preparing"
    path.write_text(json.dumps(record))
    got, answer = await play.raw("POST", f"/drafts/{did}/preview", {"expectedRevision": 1})
    assert got == 409 and answer["code"] == "DRAFT_PREPARING"
    got, answer = await play.raw("POST", f"/drafts/{did}/preview", {"expectedRevision": 1, "x": 1})
    assert got == 400 and answer["code"] == "DRAFT_INVALID"
