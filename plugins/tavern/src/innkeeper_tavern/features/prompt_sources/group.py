"""A group turn's extra items (docs/groups.md "Prompt assembly"), SillyTavern's group rules:

- the chat opens with every member's greeting, each a message of that member;
- ``new_group_chat_prompt`` (``{{group}}``: the members' names) replaces ``new_chat_prompt``;
- ``group_nudge_prompt`` goes after the chat (not in an impersonate request), a message of its
  own even when system messages are squashed;
- messages carry their own speaker's name: with ``names_behavior`` 0 (SillyTavern's default)
  every message not written by the player is prefixed with its speaker's name, with 2 every
  message is, with 1 each goes with ``name``; -1 names nobody;
- example dialogue lines are prefixed with the name of who says them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final

from innkeeper_hostapi.assembly import AtDepth, ChatStart, Contribution, RequestShape
from innkeeper_tavern.features.prompt_profile.group_view import GroupView
from innkeeper_tavern.pure.formats.macros import MacroEnv, expand_macros

#: SillyTavern's defaults (a preset may set its own, ``""`` switches one off).
DEFAULT_NEW_GROUP_CHAT_PROMPT: Final = "[Start a new group chat. Group members: {{group}}]"
DEFAULT_GROUP_NUDGE_PROMPT: Final = "[Write the next reply only as {{char}}.]"


def speaker_name(name: str) -> str | None:
    """A name as SillyTavern sends it in ``name``: letters, digits and ``_`` (others become
    ``_``), at most 64 characters."""
    cleaned = re.sub(r"[^A-Za-z0-9_]", "_", name)[:64]
    return cleaned or None


def names_behavior(raw: Mapping[str, Any]) -> int:
    """The preset's ``names_behavior`` (SillyTavern's default 0 when unset or invalid)."""
    value = raw.get("names_behavior", 0)
    return value if isinstance(value, int) and value in (-1, 0, 1, 2) else 0


def greetings(
    group: GroupView, raw: Mapping[str, Any], order: int, env: MacroEnv
) -> list[Contribution]:
    """Every member's greeting as an assistant message at the chat's start, named as the
    history is."""
    behavior = names_behavior(raw)
    out: list[Contribution] = []
    for index, greeting in enumerate(group.greetings):
        text = expand_macros(greeting.text, replace(env, char=greeting.name))
        if not text.strip():
            continue
        name = None
        if behavior in (0, 2):
            text = f"{greeting.name}: {text}"
        elif behavior == 1:
            name = speaker_name(greeting.name)
        out.append(
            Contribution(
                key=f"greeting:group:{index}",
                text=text,
                placement=ChatStart(role="assistant", order=order + index, chat=True, name=name),
                kind="tavern-greeting",
                provenance=("character:greeting",),
            )
        )
    return out


def new_chat_text(raw: Mapping[str, Any]) -> object:
    """The group's start-of-chat prompt template (the preset's, else SillyTavern's)."""
    return raw.get("new_group_chat_prompt", DEFAULT_NEW_GROUP_CHAT_PROMPT)


def nudge(raw: Mapping[str, Any], env: MacroEnv, kind: str, order: int) -> list[Contribution]:
    """``group_nudge_prompt`` after the chat (never in an impersonate request)."""
    if kind == "impersonate":
        return []
    template = raw.get("group_nudge_prompt", DEFAULT_GROUP_NUDGE_PROMPT)
    if not isinstance(template, str) or not template.strip():
        return []
    return [
        Contribution(
            key="preset:groupNudge",
            text=expand_macros(template, env),
            # SillyTavern never squashes it with the system messages around it.
            placement=AtDepth(depth=0, order=order, role="system", merge=False),
            kind="tavern-prompt",
            provenance=("preset:group_nudge_prompt",),
        )
    ]


def shape(
    group: GroupView, raw: Mapping[str, Any], user: str, squash: bool, prefill: bool
) -> RequestShape:
    """The request shape of a group turn: every message named by its own speaker."""
    behavior = names_behavior(raw)
    if behavior == -1:
        return RequestShape(squash_system=squash, continue_prefill=prefill)
    if behavior == 1:
        return RequestShape(
            squash_system=squash,
            history_names="name",
            user_name=speaker_name(user) or "",
            assistant_name=speaker_name(group.speaker_name) or "",
            continue_prefill=prefill,
            assistant_names=tuple(speaker_name(n) or "" for n in group.assistant_names),
        )
    return RequestShape(
        squash_system=squash,
        history_names="content",
        # Default (0): the player's own messages are not prefixed; 2: every message is.
        user_name=user if behavior == 2 else "",
        assistant_name=group.speaker_name,
        continue_prefill=prefill,
        assistant_names=group.assistant_names,
    )


__all__ = [
    "DEFAULT_GROUP_NUDGE_PROMPT",
    "DEFAULT_NEW_GROUP_CHAT_PROMPT",
    "greetings",
    "names_behavior",
    "new_chat_text",
    "nudge",
    "shape",
    "speaker_name",
]
