"""``resolvePromptDependency`` answers only its two real callers: the lore macro of a world book
bound to the session and the template bound to it; any other usage or consumer is
``MVU_SCOPE_INVALID`` and never a lease (docs/mvu.md "Prompt reads")."""

from __future__ import annotations

import json
from typing import Any

import pytest
from play_harness import MVU_CARD, Play

from innkeeper_hostapi.mvu import TAVERN_MVU, MvuServiceError

WB = "tavern.world-books"
PT = "tavern.prompt-templates"


def event(usage: Any, adapter: Any, resource: Any) -> dict[str, Any]:
    return {"usage": usage, "consumer": {"adapterId": adapter, "id": resource}}


async def refused(play: Play, session_id: str, ev: Any) -> str:
    mvu = play.host.get(TAVERN_MVU)
    with pytest.raises(MvuServiceError) as caught:
        await mvu.resolve_prompt_dependency(
            scope={"authority": "local", "sessionId": session_id}, event=ev
        )
    assert caught.value.code == "MVU_SCOPE_INVALID"
    return caught.value.message


async def granted(play: Play, session_id: str, ev: Any) -> dict[str, Any]:
    mvu = play.host.get(TAVERN_MVU)
    result = await mvu.resolve_prompt_dependency(
        scope={"authority": "local", "sessionId": session_id}, event=ev
    )
    assert result is not None and result["checkCurrent"]() is True
    assert result["content"]["stat_data"]["hp"] == 90
    return result  # type: ignore[no-any-return]


async def test_only_the_real_consumers_get_a_lease(play: Play) -> None:
    await play.bind()
    imported = await play.resources.import_character(json.dumps(MVU_CARD).encode(), "ada.json")
    card = imported.record.id
    other_card = {**MVU_CARD, "data": {**MVU_CARD["data"], "name": "Bob"}}  # type: ignore[dict-item]
    other = await play.resources.import_character(json.dumps(other_card).encode(), "b.json")
    sid = (await play.v2("POST", "/sessions", {}, 201))["sessionId"]
    await play.v1("POST", "/character-selection", {"sessionId": sid, "characterCardId": card})
    play.provider.enqueue("_.set('hp', 90);")
    await play.v2("POST", f"/sessions/{sid}/user-message", {"text": "Hi"}, 202)
    await play.idle(sid)
    embedded = f"character:{card}:embedded-world-book"

    # The lore macro of the card's own embedded book: granted.
    await granted(play, sid, event("world-book-variable", WB, embedded))

    # Usage: absent, the request source's, or anything else.
    for usage in (None, "request-source", "Prompt-Template-Dependency", 7):
        ev = event(usage, WB, embedded)
        if usage is None:
            del ev["usage"]
        assert "event.usage" in await refused(play, sid, ev)
    # Consumer: missing, not {adapterId, id}, the other usage's adapter, a bad id.
    assert "consumer" in await refused(play, sid, {"usage": "world-book-variable"})
    await refused(play, sid, {"usage": "world-book-variable", "consumer": WB})
    extra = event("world-book-variable", WB, embedded)
    extra["consumer"]["sessionId"] = sid
    await refused(play, sid, extra)
    await refused(play, sid, event("world-book-variable", PT, embedded))
    await refused(play, sid, event("prompt-template-dependency", WB, embedded))
    await refused(play, sid, event("world-book-variable", WB, ""))
    await refused(play, sid, event("world-book-variable", WB, {"id": embedded}))

    # A book not bound to this session: another card's, a standalone one not selected.
    elsewhere = f"character:{other.record.id}:embedded-world-book"
    assert "bound to this session" in await refused(
        play, sid, event("world-book-variable", WB, elsewhere)
    )
    book = (await play.resources.create_world_book({"name": "Atlas"})).id
    await refused(play, sid, event("world-book-variable", WB, book))
    await play.v1("POST", "/world-book-selection", {"sessionId": sid, "worldBookIds": [book]})
    await granted(play, sid, event("world-book-variable", WB, book))

    # The template the session's configuration was applied from, and no other.
    def tpl(name: str) -> dict[str, Any]:
        return {"name": name, "selection": {"characterCardId": card, "worldBookIds": [book]}}

    applied = (await play.v1("POST", "/session-templates", tpl("Applied"), 201))["template"]["id"]
    unused = (await play.v1("POST", "/session-templates", tpl("Unused"), 201))["template"]["id"]
    await refused(play, sid, event("prompt-template-dependency", PT, applied))
    await play.v1(
        "POST",
        "/session-configurations/apply",
        {"targetSessionId": sid, "source": {"mode": "template", "templateId": applied}},
    )
    await granted(play, sid, event("prompt-template-dependency", PT, applied))
    await refused(play, sid, event("prompt-template-dependency", PT, unused))

    # Another session's scope with this session's consumer: that session has no such binding.
    loose = (await play.v2("POST", "/sessions", {}, 201))["sessionId"]
    await refused(play, loose, event("world-book-variable", WB, embedded))
    await refused(play, loose, event("prompt-template-dependency", PT, applied))
