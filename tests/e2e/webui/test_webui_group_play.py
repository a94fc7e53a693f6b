"""Browser test: a group playthrough the way a player runs it, from ``/`` on a fresh data
directory with the practice provider: create a group of two library cards, play it from the
Groups page for three rounds, pick who answers, let one member speak. The API is read only to
check who spoke (docs/groups.md "Group playthroughs")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.timeout(300)

V2 = "/pmp-dsh-tavern/api/v2"


def speakers(server: Any, session_id: str) -> list[str]:
    doc = server.call("GET", f"{V2}/sessions/{session_id}/messages?bodies=display")
    return [m["speaker"]["name"] for m in doc["messages"] if m["role"] == "assistant"]


def test_play_three_rounds_pick_a_speaker_and_let_one_speak(
    practice_page: Any, practice_server: Any, seraphina: Path
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.select import Select

    page, server = practice_page, practice_server
    server.import_card(seraphina)
    server.import_card(seraphina.parents[2] / "sillytavern-content" / "default_CodingSensei.png")
    page.create_group("Tea Party", ("Seraphina", "Coding Sensei"))
    Select(page.one("combobox", "Reply strategy")).select_by_visible_text("List order")
    page.wait(
        lambda: (
            server.call("GET", "/pmp-dsh-tavern/api/v1/groups")["groups"][0]["activationStrategy"]
            == "list"
        ),
        "strategy saved",
    )
    page.one("button", "Play Tea Party").click()
    page.ready("groupplay")
    session = page.head_session()
    order = [m["name"] for m in server.call("GET", f"{V2}/sessions/{session}/group")["members"]]

    def status() -> str:
        return str(page.driver.find_element(By.CSS_SELECTOR, "p[role=status]").text)

    def shown() -> list[Any]:
        return list(
            page.driver.find_elements(By.CSS_SELECTOR, "ol[aria-label='Group chat'] li.assistant")
        )

    for round_no in range(1, 4):
        box = page.one("textbox", "Message")
        box.send_keys(f"Round {round_no}, everyone!")
        page.one("button", "Send").click()
        # List order: both members answer each message, in the group's order.
        page.wait(lambda n=round_no: len(speakers(server, session)) == 2 * n, f"round {round_no}")
        page.wait(
            lambda n=round_no: len(shown()) == 2 * n,
            "replies shown",
        )
    assert speakers(server, session) == order * 3
    # Each reply shows its speaker's name and avatar.
    assert [el.accessible_name for el in shown()] == order * 3
    assert all(el.find_elements(By.TAG_NAME, "img") for el in shown())

    # "Next speaker": the second member answers the next message alone.
    Select(page.one("combobox", "Next speaker")).select_by_visible_text(order[1])
    page.wait(
        lambda: server.call("GET", f"{V2}/sessions/{session}/group")["pick"] is not None, "picked"
    )
    page.one("textbox", "Message").send_keys("Only you, please.")
    page.one("button", "Send").click()
    page.wait(lambda: len(speakers(server, session)) == 7, "the picked reply")
    page.wait(lambda: len(shown()) == 7 and not status(), "the reply shown, the round over")
    # "Let X speak": a reply without a message, by the first member.
    page.one("button", f"Let {order[0]} speak").click()
    page.wait(lambda: len(speakers(server, session)) == 8, "the member spoke")
    assert speakers(server, session)[6:] == [order[1], order[0]]
    page.wait(lambda: len(shown()) == 8, "all shown")
    assert page.problems() == []
