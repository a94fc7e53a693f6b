"""What the loader needs to assemble one group turn (docs/groups.md "Prompt assembly").

Group play (:mod:`innkeeper_tavern.features.group_play`) decides the speaker and resolves the
members; the loader only applies the answer: the speaker's card is the request's card (swap
mode), or the card's four fields are the members' joined ones (join mode), and the request
shape names every message by its own speaker. This module is the seam between the two, so the
loader imports nothing of group play.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from innkeeper_hostapi.agents import TurnContext
from innkeeper_tavern.features.prompt_render import PromptRole
from innkeeper_tavern.state.session_bindings.model import Selection


@dataclass(frozen=True, slots=True)
class DepthPrompt:
    """One member's depth prompt (join mode sends every member's)."""

    text: str
    depth: int
    role: PromptRole


@dataclass(frozen=True, slots=True)
class JoinedCards:
    """Join mode: the members' fields, each wrapped in the group's prefix/suffix, joined."""

    description: str
    personality: str
    scenario: str
    message_example: str
    depth_prompts: tuple[DepthPrompt, ...]


@dataclass(frozen=True, slots=True)
class GroupGreeting:
    """A member's greeting, the group chat's opening messages (all members, in order)."""

    name: str
    text: str


@dataclass(frozen=True, slots=True)
class GroupView:
    """One group turn as the loader assembles it."""

    group_id: str
    speaker_id: str
    speaker_name: str
    #: ``{{group}}``: every member's name, ", "-joined (SillyTavern's macro).
    member_names: str
    greetings: tuple[GroupGreeting, ...]
    #: Names of the chat's assistant messages, oldest first (the request names each message
    #: by its own speaker; an unknown speaker is ``""``).
    assistant_names: tuple[str, ...]
    #: Join mode: the joined card for the turn's user name (macros in the members' fields and
    #: the join prefix/suffix read it as ``{{user}}``); ``None`` in swap mode.
    join: Callable[[str], JoinedCards] | None = None


#: The hook group play installs on the loader: the view of ``session_id``'s turn (``None`` for
#: a session that plays no group). ``turn`` is ``None`` for a preview.
GroupViewHook = Callable[[str, TurnContext | None, Selection], Awaitable[GroupView | None]]

__all__ = ["DepthPrompt", "GroupGreeting", "GroupView", "GroupViewHook", "JoinedCards"]
