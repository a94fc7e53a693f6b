"""The host's session list shows each session's character (issue 10, item 12)."""

from __future__ import annotations

from typing import Any


async def test_session_rows_name_the_bound_character(tavern: Any) -> None:
    card = (await tavern.v1("POST", "/characters", {"name": "Seraphina"}, 201))["character"]["id"]
    bound = await tavern.new_session()
    await tavern.v1("POST", "/character-selection", {"sessionId": bound, "characterCardId": card})
    unbound = await tavern.new_session()

    rows = {
        r["header"]["id"]: r for r in (await tavern.call("GET", "/host/api/sessions"))["sessions"]
    }
    assert rows[bound]["annotations"]["tavern"]["character"] == {"id": card, "name": "Seraphina"}
    assert rows[unbound]["annotations"]["tavern"]["character"] is None

    await tavern.host.unload("tavern")  # unloading takes the annotation back
    rows = {
        r["header"]["id"]: r for r in (await tavern.call("GET", "/host/api/sessions"))["sessions"]
    }
    assert rows[bound]["annotations"] == {}
