"""A play session's MVU prompt read (``resolvePromptDependency``) expires on any catalog or
timeline write and on a workspace change, not on an unrelated file; a session outside the play
workspace is not tied to the catalog (docs/contract/mvu.md#prompt-read-leases)."""

from __future__ import annotations

import json
from typing import Any

import msgspec
from play_harness import MVU_CARD, Play

from innkeeper_hostapi.agents import SESSIONS
from innkeeper_hostapi.mvu import TAVERN_MVU


async def read(play: Play, session_id: str) -> Any:
    mvu = play.host.get(TAVERN_MVU)
    scope = {"authority": "local", "sessionId": session_id}
    result = await mvu.resolve_prompt_dependency(
        scope=scope, event=await play.lore_event(scope["sessionId"])
    )
    assert result is not None and result["checkCurrent"]() is True
    return result["checkCurrent"]


async def with_state(play: Play, session_id: str, card: str) -> None:
    await play.v1(
        "POST", "/character-selection", {"sessionId": session_id, "characterCardId": card}
    )
    play.provider.enqueue("_.set('hp', 90);")
    await play.v2("POST", f"/sessions/{session_id}/user-message", {"text": "Hi"}, 202)
    await play.idle(session_id)


async def test_catalog_and_timeline_writes_expire_a_play_sessions_prompt_read(play: Play) -> None:
    await play.bind()
    imported = await play.resources.import_character(json.dumps(MVU_CARD).encode(), "ada.json")
    card = imported.record.id
    sid = (await play.v2("POST", "/sessions", {}, 201))["sessionId"]
    await with_state(play, sid, card)
    native = (await play.host.get(SESSIONS).create(title="outside")).id
    await with_state(play, native, card)

    check = await read(play, sid)
    outside = await read(play, native)
    await play.write("notes.txt", "unrelated")
    await play.v2("POST", "/workspace/dirs", {"path": "ada"}, 201)
    assert check() is True  # an unrelated write or directory leaves the read current
    catalog = json.dumps({"playthroughs": [], "ext": {}})
    first = await play.write("catalog.json", catalog, expectedRevision=None)
    assert check() is False
    assert outside() is True  # not a play session: the catalog is not its membership

    check = await read(play, sid)
    await play.write("ada/p1/timeline.json", '{"nodes": []}', expectedRevision=None)
    assert check() is False
    check = await read(play, sid)
    await play.write("catalog.json", catalog, expectedRevision=first["revision"])  # same bytes
    assert check() is False
    check = await read(play, sid)
    status, _ = await play.raw(
        "PUT", "/workspace/files?path=catalog.json", {"content": catalog, "expectedRevision": None}
    )
    assert status == 409 and check() is True  # a refused write changes nothing
    await play.bind()  # rebinding changes the workspace identity
    assert check() is False


async def test_management_defaults_of_a_play_session_expire_on_a_catalog_write(
    play: Play,
) -> None:
    await play.bind()
    imported = await play.resources.import_character(json.dumps(MVU_CARD).encode(), "ada.json")
    sid = (await play.v2("POST", "/sessions", {}, 201))["sessionId"]
    await with_state(play, sid, imported.record.id)
    native = (await play.host.get(SESSIONS).create(title="outside")).id
    await with_state(play, native, imported.record.id)
    mvu = play.host.get(TAVERN_MVU)
    ids = {}
    for session in (sid, native):
        scope = {"authority": "local", "sessionId": session}
        ids[session] = (
            await mvu.resolve_prompt_dependency(
                scope=scope, event=await play.lore_event(scope["sessionId"])
            )
        )["id"]
    check = mvu.get_management_defaults(id=ids[sid])["checkCurrent"]
    outside = mvu.get_management_defaults(id=ids[native])["checkCurrent"]
    await play.write("notes.txt", "unrelated")
    assert check() is True and outside() is True
    await play.write("catalog.json", json.dumps({"playthroughs": []}), expectedRevision=None)
    assert check() is False
    assert outside() is True  # seen outside the workspace: not tied to the catalog


async def _leases(play: Play) -> tuple[str, str, str, Any, Any]:
    """Two play sessions with MVU state: ``(card, sid, other, read, defaults)`` with the
    leases of ``sid``'s prompt read and management defaults."""
    await play.bind()
    imported = await play.resources.import_character(json.dumps(MVU_CARD).encode(), "ada.json")
    card = imported.record.id
    sid = (await play.v2("POST", "/sessions", {}, 201))["sessionId"]
    other = (await play.v2("POST", "/sessions", {}, 201))["sessionId"]
    await with_state(play, sid, card)
    await with_state(play, other, card)
    mvu = play.host.get(TAVERN_MVU)
    scope = {"authority": "local", "sessionId": sid}
    result = await mvu.resolve_prompt_dependency(
        scope=scope, event=await play.lore_event(scope["sessionId"])
    )
    defaults = mvu.get_management_defaults(id=result["id"])
    assert defaults["checkCurrent"]() is True
    return card, sid, other, result["checkCurrent"], defaults["checkCurrent"]


async def test_a_selection_change_expires_prompt_leases_another_sessions_does_not(
    play: Play,
) -> None:
    card, sid, other, check, defaults = await _leases(play)
    await play.v1("POST", "/character-selection", {"sessionId": other, "characterCardId": card})
    assert check() is True and defaults() is True  # another session's selection is unrelated
    await play.v1("POST", "/character-selection", {"sessionId": sid, "characterCardId": card})
    assert check() is False and defaults() is False  # the same values again still expire it


async def test_a_source_file_change_expires_prompt_leases_an_unrelated_card_does_not(
    play: Play,
) -> None:
    card, _sid, _other, check, defaults = await _leases(play)
    unrelated = {**MVU_CARD, "data": {**MVU_CARD["data"], "name": "Bea"}}
    bea = await play.resources.import_character(json.dumps(unrelated).encode(), "bea.json")
    await play.resources.update_character(
        bea.record.id, lambda c: msgspec.structs.replace(c, name="Bee")
    )
    assert check() is True and defaults() is True
    await play.resources.update_character(card, lambda c: msgspec.structs.replace(c, name="Ava"))
    assert check() is False and defaults() is False


async def test_registration_changes_and_unload_expire_prompt_leases(play: Play) -> None:
    _card, sid, _other, check, defaults = await _leases(play)
    mvu = play.host.get(TAVERN_MVU)

    async def allow(_request: Any) -> dict[str, Any]:
        return {"enabled": True}

    dispose = mvu.register_usage(allow)
    assert check() is False and defaults() is False
    scope = {"authority": "local", "sessionId": sid}
    result = await mvu.resolve_prompt_dependency(
        scope=scope, event=await play.lore_event(scope["sessionId"])
    )
    assert result is not None
    again = result["checkCurrent"]
    assert again() is True
    dispose()  # removing the handler is a registration change too
    assert again() is False
    result = await mvu.resolve_prompt_dependency(
        scope=scope, event=await play.lore_event(scope["sessionId"])
    )
    last = result["checkCurrent"]
    await play.host.unload("tavern")
    assert last() is False
