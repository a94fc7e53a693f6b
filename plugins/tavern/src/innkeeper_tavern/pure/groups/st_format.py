"""SillyTavern's group file (``groups/<id>.json``) and group chat (``group chats/<name>.jsonl``)
formats, both ways.

A group file names its members by their card's avatar file (``"Alice.png"``) and mutes with
``disabled_members``; strategies and modes are numbers. :func:`group_from_st` turns one into a
create body for the group store plus the fields Innkeeper keeps but does not use
(``st_extra``: ``id``, ``chats``, ``chat_id``, ``chat_metadata``, ``past_metadata``, …), and
:func:`group_to_st` writes a group back with the exported cards' file names. Members whose card
was not imported are reported and kept in ``st_extra`` (at their place), so an export still
names them.

A group chat has no header line (SillyTavern keeps a group chat's metadata in the group file):
every line is one message; an assistant message names its speaker by ``original_avatar`` and
keeps its alternatives in ``swipes``/``swipe_id``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import quote

from .model import (
    AVATARS_KEY,
    DEFAULT_AUTO_MODE_DELAY,
    MAX_AUTO_MODE_DELAY,
    MIN_AUTO_MODE_DELAY,
    MISSING_KEY,
    Group,
)

_STRATEGIES: Final = ("natural", "list", "manual", "pooled")
_MODES: Final = ("swap", "join", "join-with-muted")
#: Fields of a group file the model interprets; every other one goes to ``st_extra``.
_INTERPRETED: Final = frozenset(
    {
        "name",
        "members",
        "disabled_members",
        "activation_strategy",
        "generation_mode",
        "allow_self_responses",
        "auto_mode_delay",
        "generation_mode_join_prefix",
        "generation_mode_join_suffix",
        "hideMutedSprites",
        "fav",
    }
)


@dataclass(frozen=True, slots=True)
class StGroup:
    """A group file read: the create body, the kept fields and the missing members' avatars."""

    body: dict[str, Any]
    st_extra: dict[str, Any]
    missing: list[str] = field(default_factory=list)


def _number(value: Any, names: tuple[str, ...]) -> str:
    try:
        index = int(value)
    except (TypeError, ValueError):
        index = 0
    return names[index] if 0 <= index < len(names) else names[0]


def _flag(value: Any, default: bool) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value in ("true", "false"):
        return value == "true"
    return default


def _delay(value: Any) -> int:
    try:
        delay = int(value)
    except (TypeError, ValueError):
        return DEFAULT_AUTO_MODE_DELAY
    return max(MIN_AUTO_MODE_DELAY, min(MAX_AUTO_MODE_DELAY, delay))


def avatar_stem(avatar: str) -> str:
    """``"Alice.png"`` → ``"Alice"``: the card file's name without its extension."""
    return avatar.rsplit(".", 1)[0] if "." in avatar else avatar


def group_from_st(doc: Mapping[str, Any], resolve: Callable[[str], str | None]) -> StGroup:
    """Read one group file; ``resolve`` maps a member's avatar file name to a character id."""
    name = doc.get("name")
    members_raw = doc.get("members")
    avatars = (
        [m for m in members_raw if isinstance(m, str)] if isinstance(members_raw, list) else []
    )
    disabled_raw = doc.get("disabled_members")
    disabled = (
        {m for m in disabled_raw if isinstance(m, str)} if isinstance(disabled_raw, list) else set()
    )
    members: list[dict[str, Any]] = []
    by_id: dict[str, str] = {}
    missing: list[list[Any]] = []
    for index, avatar in enumerate(dict.fromkeys(avatars)):
        cid = resolve(avatar)
        if cid is None or cid in by_id:
            missing.append([index, avatar, avatar in disabled])
            continue
        by_id[cid] = avatar
        members.append({"characterId": cid, "muted": avatar in disabled})
    body: dict[str, Any] = {
        "name": name if isinstance(name, str) and name.strip() else "Group",
        "members": members,
        "activationStrategy": _number(doc.get("activation_strategy"), _STRATEGIES),
        "generationMode": _number(doc.get("generation_mode"), _MODES),
        "allowSelfResponses": _flag(doc.get("allow_self_responses"), False),
        "autoModeDelay": _delay(doc.get("auto_mode_delay", DEFAULT_AUTO_MODE_DELAY)),
        "hideMutedSprites": _flag(doc.get("hideMutedSprites"), True),
        "favorite": _flag(doc.get("fav"), False),
    }
    for key, field_name in (
        ("generation_mode_join_prefix", "joinPrefix"),
        ("generation_mode_join_suffix", "joinSuffix"),
    ):
        if isinstance(doc.get(key), str):
            body[field_name] = doc[key]
    extra = {k: v for k, v in doc.items() if k not in _INTERPRETED}
    extra[AVATARS_KEY] = by_id
    if missing:
        extra[MISSING_KEY] = missing
    return StGroup(body=body, st_extra=extra, missing=[m[1] for m in missing])


def group_to_st(
    group: Group, avatar_of: Callable[[str], str | None], chat_names: list[str]
) -> tuple[dict[str, Any], list[str | None]]:
    """The group as a SillyTavern group file, and the character id of each of its ``members``
    (``None`` for a member whose card was never imported). A member keeps the avatar file name
    it was imported with (the one its chat lines name); ``avatar_of`` names the others.
    ``chat_names`` are its group chats."""
    extra = dict(group.st_extra)
    imported: dict[str, str] = extra.pop(AVATARS_KEY, None) or {}
    missing: list[list[Any]] = extra.pop(MISSING_KEY, None) or []
    pairs: list[tuple[str, str | None]] = []
    disabled: list[str] = []
    for member in group.members:
        avatar = imported.get(member.character_id) or avatar_of(member.character_id)
        if avatar is None:
            continue
        pairs.append((avatar, member.character_id))
        if member.muted:
            disabled.append(avatar)
    for index, avatar, muted in sorted(missing, key=lambda m: int(m[0])):
        if all(avatar != a for a, _ in pairs):
            pairs.insert(min(int(index), len(pairs)), (str(avatar), None))
            if muted:
                disabled.append(str(avatar))
    raw_id = extra.get("id")
    st_id = raw_id if isinstance(raw_id, str) and raw_id else group.id
    chats = list(chat_names) or [st_id]
    chat_id = extra.get("chat_id")
    doc: dict[str, Any] = {
        **extra,
        "id": st_id,
        "name": group.name,
        "members": [a for a, _ in pairs],
        "avatar_url": group.avatar if group.avatar is not None else extra.get("avatar_url", ""),
        "allow_self_responses": group.allow_self_responses,
        "activation_strategy": _STRATEGIES.index(group.activation_strategy),
        "generation_mode": _MODES.index(group.generation_mode),
        "disabled_members": disabled,
        "chat_metadata": extra.get("chat_metadata", {}),
        "fav": group.favorite,
        "chat_id": chat_id if chat_id in chats else chats[0],
        "chats": chats,
        "auto_mode_delay": group.auto_mode_delay,
        "generation_mode_join_prefix": group.join_prefix,
        "generation_mode_join_suffix": group.join_suffix,
        "hideMutedSprites": group.hide_muted_sprites,
    }
    return doc, [cid for _, cid in pairs]


@dataclass(frozen=True, slots=True)
class ChatSummary:
    """What a group chat holds: messages, swipes, speakers (avatar file names), broken lines."""

    messages: int
    swipes: int
    speakers: frozenset[str]
    broken_lines: int


def _lines(text: str) -> list[str]:
    return text.split("\n")


def summarize_chat(text: str) -> ChatSummary:
    """Count the messages, swipes and speakers of a group chat's text."""
    messages = swipes = broken = 0
    speakers: set[str] = set()
    for line in _lines(text):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except ValueError:
            broken += 1
            continue
        if not isinstance(doc, dict) or "mes" not in doc:
            if not isinstance(doc, dict):
                broken += 1
            continue
        messages += 1
        if isinstance(doc.get("swipes"), list):
            swipes += len(doc["swipes"])
        avatar = doc.get("original_avatar")
        if not doc.get("is_user") and isinstance(avatar, str) and avatar:
            speakers.add(avatar)
    return ChatSummary(messages, swipes, frozenset(speakers), broken)


def rename_speakers(text: str, renamed: Mapping[str, str]) -> str:
    """The chat with each ``original_avatar`` in ``renamed`` replaced (and the file in its
    ``force_avatar`` thumbnail address); every other line is kept byte for byte (an export whose
    card file names did not change is the imported file)."""
    if not renamed:
        return text
    out: list[str] = []
    for line in _lines(text):
        try:
            doc = json.loads(line) if line.strip() else None
        except ValueError:
            doc = None
        avatar = doc.get("original_avatar") if isinstance(doc, dict) else None
        if isinstance(doc, dict) and isinstance(avatar, str) and avatar in renamed:
            new = renamed[avatar]
            doc["original_avatar"] = new
            force = doc.get("force_avatar")
            if isinstance(force, str):
                for old_part, new_part in (
                    (f"file={avatar}", f"file={new}"),
                    (f"file={quote(avatar)}", f"file={quote(new)}"),
                ):
                    force = force.replace(old_part, new_part)
                doc["force_avatar"] = force
            line = json.dumps(doc, ensure_ascii=False)
        out.append(line)
    return "\n".join(out)


__all__ = [
    "ChatSummary",
    "StGroup",
    "avatar_stem",
    "group_from_st",
    "group_to_st",
    "rename_speakers",
    "summarize_chat",
]
