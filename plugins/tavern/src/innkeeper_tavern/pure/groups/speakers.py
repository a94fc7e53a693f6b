"""Who speaks next in a group chat: SillyTavern's activation strategies, with the random source
injected so a seeded one replays the same choices.

Each strategy answers the character ids to generate for, in order (a turn may have several
speakers: natural and list order activate more than one). What each does (docs/groups.md):

- **natural** — with ``allow_self_responses`` off, the speaker of the last message may not
  answer itself (unless the player just wrote). First, every member whose name shares a word with
  the activation text (the player's input, else the last message), in the order the words
  appear; then each member, in a shuffled order, whose talkativeness is at least a random roll;
  if nobody was activated, one member at random from those with talkativeness above 0 (or all).
  Duplicates keep their first place.
- **list** — every unmuted member, in the group's order.
- **manual** — nobody answers the player's own message; asked without input ("Next speaker",
  auto mode), one unmuted member at random.
- **pooled** — one member at random among those who have not spoken since the player's last
  message; when all have, one at random other than the last speaker.

A member the player picks ("Let X speak") speaks whatever the strategy and even when muted;
regenerating or continuing a reply keeps its speaker (:func:`swipe_speaker`).

Words are ASCII ``\\w+`` runs compared lower-cased, as JavaScript's ``/\\b\\w+\\b/g`` finds
them (so a name in another script is never mentioned, as in SillyTavern). A random source is
anything with ``random() -> float`` in ``[0, 1)`` (``random.Random(seed)`` in tests).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from .model import ActivationStrategy

#: SillyTavern's talkativeness of a card that sets none.
DEFAULT_TALKATIVENESS: Final = 0.5
_WORD: Final = re.compile(r"\b\w+\b", re.ASCII)


class RandomSource(Protocol):
    """A uniform source of floats in ``[0, 1)``."""

    def random(self) -> float:  # pragma: no cover - protocol
        """The next float."""
        ...


@dataclass(frozen=True, slots=True)
class Candidate:
    """A member whose card is stored: id, display name, talkativeness, muted."""

    character_id: str
    name: str
    talkativeness: float = DEFAULT_TALKATIVENESS
    muted: bool = False


@dataclass(frozen=True, slots=True)
class ChatLine:
    """What speaker choice reads of one chat message."""

    text: str
    is_user: bool = False
    #: A system or narrator line: never a speaker, never the activation text.
    is_system: bool = False
    #: The member who wrote an assistant message (``None``: unknown, e.g. a deleted card).
    character_id: str | None = None
    name: str = ""


def words(text: str) -> list[str]:
    """The lower-cased ASCII word runs of ``text``, in order (ST's ``extractAllWords``)."""
    return [m.group(0).lower() for m in _WORD.finditer(text)]


def talkativeness_of(value: object) -> float:
    """A card's talkativeness as SillyTavern reads it: ``Number(value)``, and the default when
    that is ``NaN`` or the field is absent (``None``)."""
    if value is None:
        return DEFAULT_TALKATIVENESS
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        stripped = value.strip()
        if not stripped:
            return 0.0  # Number("") is 0
        try:
            number = float(stripped)
        except ValueError:
            return DEFAULT_TALKATIVENESS
    else:
        return DEFAULT_TALKATIVENESS
    return DEFAULT_TALKATIVENESS if math.isnan(number) else number


def _index(rng: RandomSource, size: int) -> int:
    return min(size - 1, math.floor(rng.random() * size))


def shuffled(items: Sequence[Candidate], rng: RandomSource) -> list[Candidate]:
    """A Fisher–Yates shuffle drawing from ``rng`` exactly as SillyTavern's ``shuffle`` does
    (from the last place down), so one random sequence gives one order in both."""
    out = list(items)
    current = len(out)
    while current:
        pick = math.floor(rng.random() * current)
        current -= 1
        out[current], out[pick] = out[pick], out[current]
    return out


def _unique(ids: list[str]) -> list[str]:
    return list(dict.fromkeys(ids))


def natural_order(
    members: Sequence[Candidate],
    activation_text: str,
    last: ChatLine | None,
    *,
    allow_self_responses: bool,
    is_user_input: bool,
    rng: RandomSource,
) -> list[str]:
    """SillyTavern's natural order over ``members`` (the unmuted ones)."""
    banned: str | None = None
    if not allow_self_responses and not is_user_input and last is not None and not last.is_user:
        banned = last.name or None
    activated: list[str] = []
    for word in words(activation_text):
        for member in members:
            if member.name == banned:
                continue
            if word in words(member.name):
                activated.append(member.character_id)
                break
    chatty: list[Candidate] = []
    for member in shuffled(members, rng):
        if member.name == banned:
            continue
        if member.talkativeness >= rng.random():
            activated.append(member.character_id)
        if member.talkativeness > 0:
            chatty.append(member)
    pool = chatty or list(members)
    retries = 0
    while not activated and retries < len(pool):
        retries += 1
        activated.append(pool[_index(rng, len(pool))].character_id)
    return _unique(activated)


def pooled_order(
    members: Sequence[Candidate],
    chat: Sequence[ChatLine],
    *,
    is_user_input: bool,
    rng: RandomSource,
) -> list[str]:
    """One member who has not spoken since the player's last message (else anyone but the
    last speaker), at random."""
    spoken: set[str] = set()
    if not is_user_input:
        for line in reversed(chat):
            if line.is_user:
                break
            if not line.is_system and line.character_id is not None:
                spoken.add(line.character_id)
    waiting = [m for m in members if m.character_id not in spoken]
    if waiting:
        return [waiting[_index(rng, len(waiting))].character_id]
    if not members:
        return []
    last = chat[-1] if chat else None
    pool = list(members)
    if len(members) > 1 and last is not None and not last.is_user and last.character_id:
        pool = [m for m in members if m.character_id != last.character_id] or pool
    return [pool[_index(rng, len(pool))].character_id]


def activation_text(chat: Sequence[ChatLine], user_input: str | None) -> str:
    """What natural order scans: the player's input, else the last message unless it is a
    system line."""
    if user_input:
        return user_input
    last = chat[-1] if chat else None
    return last.text if last is not None and not last.is_system else ""


def choose_speakers(
    strategy: ActivationStrategy,
    members: Sequence[Candidate],
    chat: Sequence[ChatLine],
    *,
    user_input: str | None,
    allow_self_responses: bool,
    rng: RandomSource,
) -> list[str]:
    """The speakers of one turn under ``strategy``, in order.

    ``members`` are the group's members whose cards are stored, in the group's order (muted ones
    included: they are left out here). ``chat`` is the conversation so far, *without* the
    player's new message; ``user_input`` is that message (``None`` or empty when the turn was
    asked without one: auto mode, "Next speaker"). An empty answer means nobody replies.
    """
    enabled = [m for m in members if not m.muted]
    is_user_input = bool(user_input)
    if strategy == "list":
        return _unique([m.character_id for m in enabled])
    if strategy == "manual":
        if is_user_input or not enabled:
            return []
        return [shuffled(enabled, rng)[0].character_id]
    if strategy == "pooled":
        return pooled_order(enabled, chat, is_user_input=is_user_input, rng=rng)
    last = chat[-1] if chat else None
    return natural_order(
        enabled,
        activation_text(chat, user_input),
        last,
        allow_self_responses=allow_self_responses,
        is_user_input=is_user_input,
        rng=rng,
    )


def swipe_speaker(
    members: Sequence[Candidate], chat: Sequence[ChatLine], rng: RandomSource
) -> str | None:
    """Who a regenerate or continue speaks as: the last message's speaker; when the last
    message is the player's (or a system line), the latest member who spoke, else anyone at
    random. ``None`` when that speaker is no longer a member."""
    ids = {m.character_id for m in members}
    if not chat:
        return None
    last = chat[-1]
    if not last.is_user and not last.is_system:
        return last.character_id if last.character_id in ids else None
    for line in reversed(chat):
        if not line.is_user and not line.is_system and line.character_id in ids:
            return line.character_id
    return shuffled(members, rng)[0].character_id if members else None


__all__ = [
    "DEFAULT_TALKATIVENESS",
    "Candidate",
    "ChatLine",
    "RandomSource",
    "activation_text",
    "choose_speakers",
    "natural_order",
    "pooled_order",
    "shuffled",
    "swipe_speaker",
    "talkativeness_of",
    "words",
]
