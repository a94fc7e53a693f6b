"""SillyTavern group-chat lines as the export writes them (``pure/groups/st_chat.py``) and as the
chat reader (``summarize_chat``, ``rename_speakers``) reads them back: swipes, the shown swipe,
speakers' names and avatars, missing fields and byte-for-byte openings."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from innkeeper_tavern.pure.groups.st_chat import (
    chat_lines,
    join_chat,
    member_message,
    st_send_date,
    thumbnail,
    user_message,
)
from innkeeper_tavern.pure.groups.st_format import rename_speakers, summarize_chat


def _ms(*parts: int) -> int:
    return int(datetime(*parts, tzinfo=UTC).timestamp() * 1000)


DATE = "May 1, 2024 3:07pm"


@pytest.mark.parametrize(
    ("moment", "stamp"),
    [
        ((2024, 5, 1, 15, 7), "May 1, 2024 3:07pm"),
        ((2024, 1, 9, 0, 5), "January 9, 2024 12:05am"),  # midnight is 12 am
        ((2023, 12, 31, 12, 0), "December 31, 2023 12:00pm"),  # noon is 12 pm
        ((2024, 2, 29, 11, 59), "February 29, 2024 11:59am"),
    ],
)
def test_send_date_is_sillytaverns_stamp(moment: tuple[int, ...], stamp: str) -> None:
    assert st_send_date(_ms(*moment)) == stamp


def test_thumbnail_escapes_the_card_file_name() -> None:
    assert thumbnail("Alice.png") == "/thumbnail?type=avatar&file=Alice.png"
    assert thumbnail("Alice Liddell & co.png") == (
        "/thumbnail?type=avatar&file=Alice%20Liddell%20%26%20co.png"
    )
    assert thumbnail("a/b?.png") == "/thumbnail?type=avatar&file=a%2Fb%3F.png"


def test_the_players_message_has_no_swipes_and_no_avatar() -> None:
    doc = user_message("Me", "Hello there", DATE)
    assert doc == {
        "name": "Me",
        "is_user": True,
        "is_system": False,
        "send_date": DATE,
        "mes": "Hello there",
        "extra": {},
    }


def test_a_reply_shows_its_chosen_swipe_and_names_its_speaker() -> None:
    swipes = ["first try", "second try", "third try"]
    doc = member_message("Alice Liddell", "Alice Liddell.png", swipes, 1, DATE)
    assert doc["mes"] == "second try"
    assert (doc["swipe_id"], doc["swipes"]) == (1, swipes)
    assert [i["send_date"] for i in doc["swipe_info"]] == [DATE] * 3
    assert (doc["name"], doc["is_user"], doc["is_system"]) == ("Alice Liddell", False, False)
    assert doc["original_avatar"] == "Alice Liddell.png"
    assert doc["force_avatar"] == thumbnail("Alice Liddell.png")
    swipes.append("later")  # the message keeps its own copy
    assert len(doc["swipes"]) == 3


def test_a_single_reply_is_one_swipe() -> None:
    doc = member_message("Bob", "Bob.png", ["only"], 0, DATE)
    assert (doc["mes"], doc["swipe_id"], doc["swipes"], len(doc["swipe_info"])) == (
        "only",
        0,
        ["only"],
        1,
    )


@pytest.mark.parametrize(("swipes", "swipe_id"), [([], 0), (["a"], 1), (["a", "b"], -1)])
def test_a_reply_without_the_swipe_it_shows_is_refused(swipes: list[str], swipe_id: int) -> None:
    with pytest.raises(ValueError, match="swipes"):
        member_message("Bob", "Bob.png", swipes, swipe_id, DATE)


def test_lines_are_compact_unescaped_and_one_per_message() -> None:
    messages = [
        user_message("我", "你好\nsecond line", DATE),
        member_message("Zoë", "Zoë.png", ["«bonjour»", "salut"], 0, DATE),
    ]
    lines = chat_lines(messages)
    assert len(lines) == 2
    assert all("\n" not in line for line in lines)  # a newline in a text stays inside its line
    assert '"name":"我"' in lines[0] and "你好\\nsecond line" in lines[0]
    assert '"mes":"«bonjour»"' in lines[1]
    assert '"is_user":false,"is_system":false' in lines[1]  # JSON.stringify's separators
    assert [json.loads(line) for line in lines] == messages


def test_a_new_chat_has_no_newline_after_its_last_line() -> None:
    messages = [user_message("Me", "hi", DATE), member_message("Bob", "Bob.png", ["yo"], 0, DATE)]
    text = join_chat("", messages)
    assert text == "\n".join(chat_lines(messages))
    assert not text.endswith("\n")
    assert join_chat("", []) == ""
    assert join_chat("\n  \n", messages) == text  # an opening of blank lines is no opening


def test_an_imported_opening_is_kept_byte_for_byte() -> None:
    opening = '{"name":"Alice", "is_user":false,"mes":"as  imported"}\n'
    assert join_chat(opening, []) == opening
    added = [user_message("Me", "and then", DATE)]
    text = join_chat(opening, added)
    assert text.startswith(opening)
    assert text == opening + chat_lines(added)[0]
    # Without a newline after the opening's last line, exactly one goes between.
    assert join_chat(opening.rstrip("\n"), added) == text


def test_round_trip_through_the_chat_reader() -> None:
    messages = [
        user_message("Me", "Hello, both of you", DATE),
        member_message("Alice Liddell", "Alice Liddell.png", ["a1", "a2"], 1, DATE),
        member_message("Bob", "Bob.png", ["b1"], 0, DATE),
        user_message("Me", "Again", DATE),
        member_message("Alice Liddell", "Alice Liddell.png", ["a3", "a4", "a5"], 2, DATE),
    ]
    text = join_chat("", messages)
    summary = summarize_chat(text)
    assert (summary.messages, summary.swipes, summary.broken_lines) == (5, 6, 0)
    assert summary.speakers == {"Alice Liddell.png", "Bob.png"}
    read = [json.loads(line) for line in text.split("\n")]
    assert [(m["name"], m["mes"]) for m in read] == [
        ("Me", "Hello, both of you"),
        ("Alice Liddell", "a2"),
        ("Bob", "b1"),
        ("Me", "Again"),
        ("Alice Liddell", "a5"),
    ]
    # A renamed card file follows into the speaker's avatar and thumbnail; the rest is kept.
    renamed = rename_speakers(text, {"Alice Liddell.png": "Alice.png"}).split("\n")
    alice = json.loads(renamed[1])
    assert (alice["original_avatar"], alice["force_avatar"]) == (
        "Alice.png",
        thumbnail("Alice.png"),
    )
    assert (alice["swipes"], alice["swipe_id"], alice["mes"]) == (["a1", "a2"], 1, "a2")
    assert renamed[2] == text.split("\n")[2]


def test_the_reader_counts_lines_with_missing_fields_as_sillytavern_wrote_them() -> None:
    lines = [
        json.dumps({"user_name": "Me", "character_name": "unused"}),  # a header: no message
        json.dumps({"name": "Bob", "is_user": False, "mes": "no swipes, no avatar"}),
        json.dumps({"name": "Me", "is_user": True, "mes": "hi", "original_avatar": "Me.png"}),
        json.dumps({"is_user": False, "mes": "x", "swipes": "not a list", "original_avatar": ""}),
        json.dumps(["not", "a", "message"]),
        "",
    ]
    summary = summarize_chat("\n".join(lines))
    assert (summary.messages, summary.swipes, summary.broken_lines) == (3, 0, 1)
    assert summary.speakers == frozenset()  # the player and an empty avatar are nobody's card
