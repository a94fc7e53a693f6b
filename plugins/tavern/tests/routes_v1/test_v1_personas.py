"""What the web client's persona editor relies on: where a persona's description goes
(``descriptionPosition`` / ``descriptionDepth`` / ``descriptionRole``) and the global default
persona (``POST /user-selection`` without a session; `docs/resources.md#users-formatsuserpy`)."""

from __future__ import annotations

import json
from typing import Any

Tavern = Any


async def test_description_placement_is_stored_exported_and_checked(tavern: Tavern) -> None:
    made = await tavern.call(
        "POST",
        "/users",
        json={"name": "Ada", "description": "A ranger.", "descriptionPosition": "atDepth",
              "descriptionDepth": 3, "descriptionRole": "user"},
        status=201,
    )  # fmt: skip
    uid = made["user"]["id"]
    user = (await tavern.get(f"/users/{uid}"))["user"]
    assert (user["descriptionPosition"], user["descriptionDepth"], user["descriptionRole"]) == (
        "atDepth",
        3,
        "user",
    )
    exported = json.loads((await tavern.raw(f"/users/{uid}/export"))[1])
    assert exported["data"]["descriptionPosition"] == "atDepth"
    again = await tavern.call(
        "POST", "/users/import", data=json.dumps(exported).encode(),
        content_type="application/json", status=201,
    )  # fmt: skip
    assert again["user"]["descriptionDepth"] == 3
    for wrong in (
        {"descriptionPosition": "topOfAuthorsNote"},
        {"descriptionDepth": -1},
        {"descriptionDepth": 2.5},
        {"descriptionRole": "narrator"},
    ):
        bad = await tavern.call("PATCH", f"/users/{uid}", json=wrong, status=400)
        assert bad["code"] == "USER_INVALID"
    back = await tavern.call(
        "PATCH", f"/users/{uid}", json={"descriptionPosition": "inPrompt"}, status=200
    )
    # The default placement goes unsaid, so such a user reads and exports as before.
    assert set(back["user"]) == {"id", "name", "description"}


async def test_the_global_default_persona(tavern: Tavern) -> None:
    first = (await tavern.call("POST", "/users", json={"name": "Ada"}, status=201))["user"]
    assert (await tavern.get("/user-selection")) == {"ok": True, "selection": None, "user": None}
    chosen = await tavern.call("POST", "/user-selection", json={"userId": first["id"]}, status=200)
    assert chosen["selection"] == {"userId": first["id"]}
    assert chosen["user"]["name"] == "Ada"
    # A session without a selection of its own answers the defaults.
    unbound = await tavern.get("/user-selection?sessionId=session-nobody")
    assert unbound["selection"] == {"userId": first["id"]}
    missing = await tavern.call("POST", "/user-selection", json={"userId": "user-nope"}, status=404)
    assert missing["code"] == "USER_NOT_FOUND"
    assert (await tavern.get("/user-selection"))["selection"] == {"userId": first["id"]}
    # It is kept in its own file, and goes when the user is deleted.
    state = json.loads((tavern.root / "default-user.json").read_text())
    assert state["selectedId"] == first["id"]
    await tavern.call("DELETE", f"/users/{first['id']}", status=200)
    assert (await tavern.get("/user-selection"))["selection"] is None
    cleared = await tavern.call("POST", "/user-selection", json={"userId": None}, status=200)
    assert cleared["selection"] is None
