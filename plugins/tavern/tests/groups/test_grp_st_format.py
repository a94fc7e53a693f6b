"""SillyTavern's group file and group chat formats, both ways."""

from __future__ import annotations

import json

import msgspec

from innkeeper_tavern.pure.groups.model import parse_new_group
from innkeeper_tavern.pure.groups.st_format import (
    group_from_st,
    group_to_st,
    rename_speakers,
    summarize_chat,
)

CARDS = {"Alice.png": "card-a", "Bob.png": "card-b"}


def _st(**fields: object) -> dict[str, object]:
    return {
        "id": "1700000000000",
        "name": "Party",
        "members": ["Alice.png", "Ghost.png", "Bob.png"],
        "disabled_members": ["Bob.png", "Ghost.png"],
        "activation_strategy": 3,
        "generation_mode": 1,
        "allow_self_responses": True,
        "auto_mode_delay": 12,
        "generation_mode_join_prefix": "<FIELDNAME>:",
        "generation_mode_join_suffix": "",
        "hideMutedSprites": False,
        "fav": "true",
        "chat_id": "c2",
        "chats": ["c1", "c2"],
        "chat_metadata": {"scenario": "override"},
        "unknown_field": 7,
        **fields,
    }


def test_a_group_file_reads_into_a_create_body_and_kept_fields() -> None:
    read = group_from_st(_st(), CARDS.get)
    assert read.body["members"] == [
        {"characterId": "card-a", "muted": False},
        {"characterId": "card-b", "muted": True},
    ]
    assert read.missing == ["Ghost.png"]
    assert read.body["activationStrategy"] == "pooled"
    assert read.body["generationMode"] == "join"
    assert read.body["favorite"] is True and read.body["hideMutedSprites"] is False
    assert read.body["autoModeDelay"] == 12
    assert read.st_extra["unknown_field"] == 7 and read.st_extra["chats"] == ["c1", "c2"]
    # Odd values fall back to SillyTavern's defaults instead of failing the import.
    odd = group_from_st(
        _st(activation_strategy="x", generation_mode=9, auto_mode_delay=-3, members="no"),
        CARDS.get,
    )
    assert (odd.body["activationStrategy"], odd.body["generationMode"]) == ("natural", "swap")
    assert odd.body["autoModeDelay"] == 1 and odd.body["members"] == []


def test_written_back_it_is_the_same_group_file() -> None:
    source = _st()
    read = group_from_st(source, CARDS.get)
    group = parse_new_group(read.body, group_id="group-x", now="2026-01-01T00:00:00Z")
    group = msgspec.structs.replace(group, st_extra=read.st_extra)
    doc, ids = group_to_st(group, lambda cid: None, ["c1", "c2"])
    assert ids == ["card-a", None, "card-b"]
    expected = dict(source)
    expected["fav"] = True  # the boolean SillyTavern writes
    expected["avatar_url"] = ""
    assert doc == expected
    # Only the chats that exist are listed; chat_id follows.
    doc, _ = group_to_st(group, lambda cid: None, ["c1"])
    assert doc["chats"] == ["c1"] and doc["chat_id"] == "c1"


def test_chat_summary_and_speaker_renames_keep_other_lines() -> None:
    lines = [
        json.dumps(
            {
                "name": "Alice",
                "is_user": False,
                "mes": "hi",
                "original_avatar": "Alice.png",
                "force_avatar": "/thumbnail?type=avatar&file=Alice.png",
                "swipes": ["a", "hi"],
            }
        ),
        json.dumps({"name": "Me", "is_user": True, "mes": "yo"}, ensure_ascii=False),
        "{broken",
        json.dumps(
            {"name": "Bob", "is_user": False, "mes": "é", "original_avatar": "Bob.png"},
            ensure_ascii=False,
        ),
    ]
    text = "\n".join(lines)
    summary = summarize_chat(text)
    assert (summary.messages, summary.swipes, summary.broken_lines) == (3, 2, 1)
    assert summary.speakers == {"Alice.png", "Bob.png"}
    renamed = rename_speakers(text, {"Alice.png": "Alice Liddell.png"}).split("\n")
    first = json.loads(renamed[0])
    assert first["original_avatar"] == "Alice Liddell.png"
    assert first["force_avatar"] == "/thumbnail?type=avatar&file=Alice Liddell.png"
    assert renamed[1:] == lines[1:]
    assert rename_speakers(text, {}) == text
