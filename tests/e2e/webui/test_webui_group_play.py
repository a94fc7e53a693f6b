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


def play_tea_party(page: Any, server: Any) -> None:
    """Make the group "Tea Party" of Seraphina and Coding Sensei (library cards) with **List
    order** (both answer every message, in order) and open its playthrough with **Play**."""
    from selenium.webdriver.support.select import Select

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


def test_play_three_rounds_pick_a_speaker_and_let_one_speak(
    practice_page: Any, practice_server: Any, seraphina: Path
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.select import Select

    page, server = practice_page, practice_server
    server.import_card(seraphina)
    server.import_card(seraphina.parents[2] / "sillytavern-content" / "default_CodingSensei.png")
    play_tea_party(page, server)
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


def test_swipe_regenerate_why_branch_and_stop_auto_mode(
    practice_page: Any, practice_server: Any, seraphina: Path
) -> None:
    """A player's group round, then each per-message control: Regenerate and the swipe arrows
    keep the member who spoke, Why opens on that reply's round, Branch opens a new run of the
    group in the group page, and Stop ends auto mode."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.select import Select

    page, server = practice_page, practice_server
    page.open("")
    page.ready("library")
    page.import_file(seraphina, "Seraphina")
    page.import_file(
        seraphina.parents[2] / "sillytavern-content" / "default_CodingSensei.png", "Coding Sensei"
    )
    play_tea_party(page, server)
    first_url = page.driver.current_url
    order = [
        m["name"]
        for m in server.call("GET", f"{V2}/sessions/{page.head_session()}/group")["members"]
    ]

    def replies() -> list[Any]:
        return [
            li
            for li in page.by_role("listitem")
            if "assistant" in (li.get_attribute("class") or "")
        ]

    def settled() -> bool:
        return not page.driver.find_element(By.CSS_SELECTOR, "p[role=status]").text

    def press(k: int, name: str) -> None:
        """Click button ``name`` of reply ``k`` (again if the chat redrew under the click)."""

        def click() -> bool:
            buttons = replies()[k].find_elements(By.TAG_NAME, "button")
            next(b for b in buttons if b.accessible_name == name).click()
            return True

        page.wait(click, f"{name} of reply {k}")

    page.one("textbox", "Message").send_keys("Hello, everyone!")
    page.one("button", "Send").click()
    page.wait(
        lambda: len(replies()) == 2 and settled() and page.by_role("button", "Regenerate"),
        "the round",
    )
    assert [r.accessible_name for r in replies()] == order
    before = page.head_session()

    # Regenerate the last reply: the same member answers again, as a second swipe.
    press(-1, "Regenerate")
    page.wait(lambda: page.head_session() != before, "the new swipe's session")
    page.wait(
        lambda: settled() and "2/2" in replies()[-1].text and len(replies()) == 2,
        "the second swipe",
    )
    swiped = page.head_session()
    assert speakers(server, swiped) == order
    assert [r.accessible_name for r in replies()] == order
    # The swipe arrows move between the two replies of the same member.
    press(-1, "Previous swipe")
    page.wait(lambda: page.head_session() == before and "1/2" in replies()[-1].text, "swipe 1")
    assert replies()[-1].accessible_name == order[1]
    press(-1, "Next swipe")
    page.wait(lambda: page.head_session() == swiped and "2/2" in replies()[-1].text, "swipe 2")
    assert replies()[-1].accessible_name == order[1]

    # Why on a reply opens the panel on the round that wrote it.
    turns = [
        m["turn"]
        for m in server.call("GET", f"{V2}/sessions/{swiped}/messages")["messages"]
        if m["role"] == "assistant"
    ]
    for k in (0, 1):
        press(k, "Why")
        panel = page.one("region", "Why")

        def chosen(p: Any = panel) -> str:
            return str(Select(p.find_element(By.TAG_NAME, "select")).first_selected_option.text)

        page.wait(lambda t=turns[k]: chosen().startswith(f"Round {t}."), f"round of reply {k}")
        page.wait(lambda p=panel: "Verification: verified" in p.text, "the round's record")

    # Branch from the first reply: a new run of the group that ends with it, on this page.
    press(0, "Branch")
    page.wait(lambda: page.driver.current_url != first_url, "the branch opened")
    page.ready("groupplay")
    page.wait(lambda: [r.accessible_name for r in replies()] == order[:1], "the branch's chat")
    branch = page.head_session()
    assert branch not in (before, swiped)
    assert server.call("GET", f"{V2}/sessions/{branch}/group")["name"] == "Tea Party"
    page.one("textbox", "Message").send_keys("On the branch.")
    page.one("button", "Send").click()
    page.wait(lambda: len(speakers(server, branch)) == 3, "the group answers on the branch")
    assert speakers(server, branch) == [order[0], *order]

    # Auto mode: rounds follow each other without input until Stop.
    page.wait(lambda: settled() and page.by_role("button", "Stop"), "the round over")
    page.wait(lambda: _click_fresh(page, "//label[text()='Auto mode']"), "Auto mode ticked")
    page.wait(
        lambda: server.call("GET", f"{V2}/sessions/{branch}/group")["autoMode"], "auto mode on"
    )
    page.one("textbox", "Message").send_keys("Talk among yourselves.")
    page.one("button", "Send").click()
    # Two rounds answer the one message: the second started by auto mode.
    page.wait(lambda: len(speakers(server, branch)) >= 7, "an auto round")
    page.one("button", "Stop").click()
    page.wait(settled, "the page settled")
    state = server.call("GET", f"{V2}/sessions/{branch}/group")
    assert state["queued"] == [] and state["waiting"] is False
    assert server.call("GET", f"/host/api/sessions/{branch}")["turnOpen"] is False
    assert page.problems() == []


def _click_fresh(page: Any, xpath: str) -> bool:
    """Click the element ``xpath`` names; ``False`` when the page redrew it under the click (a
    reply landing), so the wait finds it again."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By

    try:
        page.driver.find_element(By.XPATH, xpath).click()
    except StaleElementReferenceException:
        return False
    return True
