"""Browser test: a group from library cards — create it, reorder and mute members, pick the
reply strategy — the way a player does it, from ``/``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.timeout(300)

GROUPS = "/pmp-dsh-tavern/api/v1/groups"


def stored(server: Any) -> dict[str, Any]:
    (group,) = server.call("GET", GROUPS)["groups"]
    return dict(group)


def test_create_reorder_mute_and_pick_a_strategy(page_and_server: tuple[Any, Any, Path]) -> None:
    from selenium.webdriver.support.select import Select

    page, server, card = page_and_server
    server.import_card(card)
    server.import_card(card.parents[2] / "sillytavern-content" / "default_CodingSensei.png")
    page.create_group("Tea Party", ("Seraphina", "Coding Sensei"))
    first, second = (m["name"] for m in stored(server)["members"])
    assert {first, second} == {"Seraphina", "Coding Sensei"}

    page.one("button", f"Move {first} down").click()
    page.wait(
        lambda: [m["name"] for m in stored(server)["members"]] == [second, first], "reordered"
    )
    page.one("button", f"Mute {second}").click()
    page.wait(lambda: stored(server)["members"][0]["muted"] is True, "muted")
    page.one("button", f"Unmute {second}")  # the page shows the member as muted now
    Select(page.one("combobox", "Reply strategy")).select_by_visible_text("Pooled")
    page.wait(lambda: stored(server)["activationStrategy"] == "pooled", "strategy saved")
    group = stored(server)
    assert group["revision"] == 4
    assert [(m["name"], m["muted"]) for m in group["members"]] == [(second, True), (first, False)]
    assert page.problems() == []
