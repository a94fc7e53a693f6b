"""A group's members as cards, and SillyTavern's join mode (docs/groups.md "Prompt assembly").

Join mode sends one card made of every member's: for each member (in the group's order; a
muted one only when it is the speaker, or always in ``join-with-muted``) each of description,
personality, scenario and example messages is wrapped in the group's ``joinPrefix`` /
``joinSuffix`` — ``<FIELDNAME>`` in them becomes the field's name (``Description``,
``Personality``, ``Scenario``, ``Example Messages``), and macros (``{{char}}`` …) read that
member's name — then the non-empty pieces are joined with a newline. Every member's depth prompt
is sent, each at its own depth and role, its ``{{char}}`` that member.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Final

from innkeeper_tavern.features.prompt_profile.group_view import DepthPrompt, JoinedCards
from innkeeper_tavern.features.prompt_render import PromptRole
from innkeeper_tavern.pure.formats.card import CharacterCard
from innkeeper_tavern.pure.formats.macros import MacroEnv, expand_macros
from innkeeper_tavern.pure.groups.model import Group
from innkeeper_tavern.pure.groups.speakers import Candidate, talkativeness_of

_FIELDNAME: Final = re.compile(r"<FIELDNAME>", re.IGNORECASE)
#: SillyTavern's depth prompt defaults (a card that sets no depth or role).
DEPTH_PROMPT_DEPTH: Final = 4
DEPTH_PROMPT_ROLE: Final = "system"


@dataclass(frozen=True, slots=True)
class MemberCard:
    """A member whose card is stored."""

    character_id: str
    name: str
    muted: bool
    card: CharacterCard

    def candidate(self) -> Candidate:
        """What speaker choice reads of the member."""
        talk = talkativeness_of(self.card.data.extensions.get("talkativeness"))
        return Candidate(self.character_id, self.name, talk, self.muted)


def display_name(card: CharacterCard) -> str:
    """The name a member speaks under (the card's nickname, else its name)."""
    data = card.data
    return data.nickname or data.name or card.name


def _role(value: object) -> PromptRole:
    if value in ("user", 1):
        return "user"
    if value in ("assistant", 2):
        return "assistant"
    return "system"


def depth_prompt(card: CharacterCard) -> tuple[str, int, PromptRole]:
    """The card's depth prompt ``(text, depth, role)`` (``text`` empty when it has none)."""
    raw = card.data.extensions.get("depth_prompt")
    if not isinstance(raw, dict):
        return "", DEPTH_PROMPT_DEPTH, DEPTH_PROMPT_ROLE
    text = raw.get("prompt")
    depth = raw.get("depth")
    good_depth = isinstance(depth, int | float) and not isinstance(depth, bool) and depth >= 0
    return (
        text.strip() if isinstance(text, str) else "",
        int(depth) if good_depth and isinstance(depth, int | float) else DEPTH_PROMPT_DEPTH,
        _role(raw.get("role", DEPTH_PROMPT_ROLE)),
    )


def _joined_piece(value: str, field: str, env: MacroEnv, prefix: str, suffix: str) -> str:
    value = value.strip()
    if not value:
        return ""

    def prepared(text: str) -> str:
        return expand_macros(_FIELDNAME.sub(field, text).strip(), env) if text else ""

    head, tail = prepared(prefix), prepared(suffix)
    # SillyTavern puts a newline between an affix and the field under its instruct "wrap"
    # setting, which is on by default (also with instruct mode off).
    return f"{head + chr(10) if head else ''}{prepared(value)}{chr(10) + tail if tail else ''}"


def joined_cards(
    group: Group, members: Sequence[MemberCard], speaker_id: str, env: MacroEnv
) -> JoinedCards:
    """The group's joined card for ``speaker_id``'s turn (``env``: the turn's macro values)."""
    include_muted = group.generation_mode == "join-with-muted"
    fields: dict[str, list[str]] = {"d": [], "p": [], "s": [], "e": []}
    depth: list[DepthPrompt] = []
    for member in members:
        own_env = replace(env, char=member.name)
        data = member.card.data
        # Depth prompts follow the muting rule alone; the fields also keep muted members in
        # ``join-with-muted`` (SillyTavern's two loops differ so).
        if not member.muted or member.character_id == speaker_id:
            text, at, role = depth_prompt(member.card)
            if text:
                depth.append(DepthPrompt(expand_macros(text, own_env), at, role))
        if member.muted and member.character_id != speaker_id and not include_muted:
            continue
        pre, suf = group.join_prefix, group.join_suffix
        fields["d"].append(_joined_piece(data.description, "Description", own_env, pre, suf))
        fields["p"].append(_joined_piece(data.personality, "Personality", own_env, pre, suf))
        fields["s"].append(_joined_piece(data.scenario, "Scenario", own_env, pre, suf))
        fields["e"].append(
            _joined_piece(data.message_example, "Example Messages", own_env, pre, suf)
        )

    def join(key: str) -> str:
        return "\n".join(p for p in fields[key] if p)

    return JoinedCards(
        description=join("d"),
        personality=join("p"),
        scenario=join("s"),
        message_example=join("e"),
        depth_prompts=tuple(depth),
    )


__all__ = ["MemberCard", "depth_prompt", "display_name", "joined_cards"]
