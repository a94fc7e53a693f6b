from __future__ import annotations

from typing import Any


async def test_smoke(tavern: Any) -> None:
    body = await tavern.get("/presets")
    assert body == {"ok": True, "presets": [], "selectedId": None}
    created = await tavern.call("POST", "/presets", json={"name": "Mine"}, status=201)
    pid = created["preset"]["id"]
    listing = await tavern.get("/presets")
    assert [p["id"] for p in listing["presets"]] == [pid]
