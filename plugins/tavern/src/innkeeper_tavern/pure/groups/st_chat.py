"""Group playthrough messages written as SillyTavern group-chat lines (docs/migration.md
"Export").

SillyTavern saves a group chat as one JSON object a line, compact, no header line (the chat's
metadata lives in the group file) and no newline after the last line. A member's reply names
its speaker three ways: ``name`` (the card's name), ``original_avatar`` (the card's file) and
``force_avatar`` (that file's thumbnail address); it always carries ``swipes``, ``swipe_id`` and
one ``swipe_info`` per swipe. The player's message is ``is_user: true`` under the persona's
name. Dates are SillyTavern's message time stamps (``"May 1, 2024 3:07pm"``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, Final
from urllib.parse import quote

_MONTHS: Final = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)


def st_send_date(epoch_ms: int) -> str:
    """``epoch_ms`` (UTC) as SillyTavern stamps a message: ``"May 1, 2024 3:07pm"``."""
    moment = datetime.fromtimestamp(epoch_ms / 1000, UTC)
    hours = moment.hour % 12 or 12
    meridiem = "pm" if moment.hour >= 12 else "am"
    month = _MONTHS[moment.month - 1]
    return f"{month} {moment.day}, {moment.year} {hours}:{moment.minute:02d}{meridiem}"


def thumbnail(avatar: str) -> str:
    """The ``force_avatar`` of a member whose card file is ``avatar``."""
    return f"/thumbnail?type=avatar&file={quote(avatar, safe='')}"


def user_message(name: str, text: str, send_date: str) -> dict[str, Any]:
    """The player's message."""
    return {
        "name": name,
        "is_user": True,
        "is_system": False,
        "send_date": send_date,
        "mes": text,
        "extra": {},
    }


def member_message(
    name: str,
    avatar: str,
    swipes: Sequence[str],
    swipe_id: int,
    send_date: str,
) -> dict[str, Any]:
    """A member's reply: ``swipes[swipe_id]`` is the one shown (``mes``); every swipe keeps
    its own ``swipe_info``. ``swipes`` must not be empty."""
    if not swipes or not 0 <= swipe_id < len(swipes):
        raise ValueError("a reply needs its swipes and the index of the one shown")
    return {
        "name": name,
        "is_user": False,
        "is_system": False,
        "send_date": send_date,
        "mes": swipes[swipe_id],
        "original_avatar": avatar,
        "force_avatar": thumbnail(avatar),
        "extra": {},
        "swipe_id": swipe_id,
        "swipes": list(swipes),
        "swipe_info": [{"send_date": send_date, "extra": {}} for _ in swipes],
    }


def chat_lines(messages: Iterable[dict[str, Any]]) -> list[str]:
    """Each message as SillyTavern writes it (``JSON.stringify``: compact, not ASCII-escaped)."""
    return [json.dumps(m, ensure_ascii=False, separators=(",", ":")) for m in messages]


def join_chat(opening: str, messages: Iterable[dict[str, Any]]) -> str:
    """A group chat's text: ``opening`` (lines already written: an imported chat, kept byte
    for byte) then ``messages``, one a line, no newline after the last."""
    lines = [line for line in opening.split("\n") if line.strip()] if opening.strip() else []
    if not lines:
        return "\n".join(chat_lines(messages))
    added = chat_lines(messages)
    if not added:
        return opening
    return opening.rstrip("\n") + "\n" + "\n".join(added)


__all__ = [
    "chat_lines",
    "join_chat",
    "member_message",
    "st_send_date",
    "thumbnail",
    "user_message",
]
