"""The chat's Author's Note in its selection (docs/prompt-assembly.md "Author's Note")."""

from __future__ import annotations

from typing import Any

from innkeeper_tavern.state.session_bindings.model import AuthorsNote, note_applies

V1 = "/pmp-dsh-tavern/api/v1"


def test_frequency_follows_sillytaverns_rule() -> None:
    every = AuthorsNote(text="n", interval=1)
    third = AuthorsNote(text="n", interval=3)
    assert note_applies(every, 0) and note_applies(every, 5)
    assert [note_applies(third, n) for n in range(1, 7)] == [False, False, True] * 2
    assert not note_applies(AuthorsNote(text="n", interval=0), 3)
    assert not note_applies(AuthorsNote(text="  ", interval=1), 3)
    assert not note_applies(None, 3)


async def test_routes_store_validate_and_copy_on_branch(play: Any) -> None:
    await play.bind()
    sid = (await play.v2("POST", "/sessions", {}, 201))["sessionId"]
    empty = await play.call("GET", f"{V1}/authors-note?sessionId={sid}")
    assert empty["authorsNote"] is None
    note = {"text": "Rain.", "depth": 2, "role": "user", "interval": 3}
    saved = await play.call("POST", f"{V1}/authors-note", {"sessionId": sid, "authorsNote": note})
    assert saved["authorsNote"] == note
    for bad in ({"text": "x", "depth": -1}, {"text": "x", "role": "narrator"}, {"depth": 2},
                {"text": "x" * 20_001}, {"text": "x", "extra": 1}):  # fmt: skip
        status, body = await play.call_raw(
            "POST", f"{V1}/authors-note", {"sessionId": sid, "authorsNote": bad}
        )
        assert status == 400, (bad, body)
    assert (await play.call("GET", f"{V1}/authors-note?sessionId={sid}"))["authorsNote"] == note
    # The selection carries it: a branch has it too; the other selection routes are unchanged.
    await play.v2("POST", f"/sessions/{sid}/user-message", {"text": "hello"}, 202)
    await play.idle(sid)
    child = (await play.v2("POST", f"/sessions/{sid}/branch", {"atEventId": 1}, 201))["sessionId"]
    assert (await play.call("GET", f"{V1}/authors-note?sessionId={child}"))["authorsNote"] == note
    cleared = await play.call("POST", f"{V1}/authors-note", {"sessionId": sid, "authorsNote": None})
    assert cleared["authorsNote"] is None
    status, body = await play.call_raw(
        "POST", f"{V1}/authors-note", {"sessionId": "s-nope", "authorsNote": None}
    )
    assert (status, body["code"]) == (404, "SESSION_NOT_FOUND")
