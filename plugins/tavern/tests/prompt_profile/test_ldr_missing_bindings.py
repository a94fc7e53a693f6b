"""A session whose bound resource was deleted says so (issue 10, item 7)."""

from __future__ import annotations

from typing import Any

Tavern = Any


def codes(view: dict[str, Any]) -> list[str]:
    return [d["code"] for d in view["diagnostics"]]


async def test_deleting_the_bound_card_is_reported_by_active_and_the_audit(tavern: Tavern) -> None:
    card = (await tavern.v1("POST", "/characters", {"name": "Seraphina"}, 201))["character"]["id"]
    session = await tavern.new_session()
    await tavern.v1("POST", "/character-selection", {"sessionId": session, "characterCardId": card})
    await tavern.prompt(session, "Hello")
    await tavern.v1("DELETE", f"/characters/{card}")

    active = await tavern.active(session)
    missing = [d for d in active["diagnostics"] if d["code"] == "CHARACTER_CARD_DELETED"]
    assert missing, active["diagnostics"]
    assert missing[0]["details"]["id"] == card and missing[0]["details"]["name"] == "Seraphina"
    assert missing[0]["severity"] == "warning"

    await tavern.prompt(session, "Are you there?")
    traces = await tavern.v1("GET", f"/traces?sessionId={session}")
    assert "CHARACTER_CARD_DELETED" in [d["code"] for d in traces["records"][0]["diagnostics"]]

    # Binding another card (or clearing the selection on purpose) ends the warning.
    other = (await tavern.v1("POST", "/characters", {"name": "Lilith"}, 201))["character"]["id"]
    await tavern.v1(
        "POST", "/character-selection", {"sessionId": session, "characterCardId": other}
    )
    assert "CHARACTER_CARD_DELETED" not in codes(await tavern.active(session))


async def test_deleted_session_bound_book_and_persona_are_reported(tavern: Tavern) -> None:
    book = (await tavern.v1("POST", "/world-books", {"name": "Eldoria"}, 201))["worldBook"]["id"]
    user = (await tavern.v1("POST", "/users", {"name": "Mira"}, 201))["user"]["id"]
    session = await tavern.new_session()
    await tavern.v1("POST", "/world-book-selection", {"sessionId": session, "worldBookIds": [book]})
    await tavern.v1("POST", "/user-selection", {"sessionId": session, "userId": user})
    await tavern.v1("DELETE", f"/world-books/{book}")
    await tavern.v1("DELETE", f"/users/{user}")
    found = {d["code"]: d.get("details") for d in (await tavern.active(session))["diagnostics"]}
    assert found["WORLD_BOOK_DELETED"]["id"] == book
    assert found["USER_DELETED"]["id"] == user


async def test_active_for_an_unknown_session_is_404(tavern: Tavern) -> None:
    answer = await tavern.v1("GET", "/active?sessionId=no-such-session", status=404)
    assert answer["code"] == "SESSION_NOT_FOUND"
    assert (await tavern.active())["ok"] is True  # no session: the global preview still works
