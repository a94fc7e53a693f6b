"""Group play: who speaks each turn of a group session, and as whom the turn is assembled
(docs/groups.md "Group playthroughs").

A session plays a group when it, or its nearest bound ancestor (a branch), is bound in
:class:`~innkeeper_tavern.state.groups.sessions.GroupSessionStore`. Each turn's speaker is
decided once, when the turn's prompt is first assembled, and recorded durably in the session's
own log as an ``ext`` event :data:`SPEAKER_EVENT` ``{turn, characterId, name}`` before the
request is sent: forks inherit it with the history, the messages route reads it back, and a
restart reads it again. The speaker is, in this order:

1. the member the player picked for this turn ("Let X speak"), whatever the strategy;
2. for a ``continue`` or ``impersonate`` turn, the swipe speaker (the last reply's);
3. the next member queued by this round (several members answering one message);
4. the group's strategy (:func:`~innkeeper_tavern.pure.groups.speakers.choose_speakers`); the
   other members it chose are queued and answer next, one turn each, each turn asked for when
   the previous one completed. When the strategy chooses nobody (``manual`` after the player's
   message), the swipe speaker answers (a turn has begun; it must have a speaker).

Auto mode (the group's ``autoMode``): after a round completes, :func:`GroupPlay.after_round`
waits the group's delay and asks for another round without input. A player's message, a stop or
a turn that did not complete ends the chain.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from innkeeper_hostapi import PluginContext
from innkeeper_hostapi.agents import AGENTS, SESSIONS, TurnContext, TurnEnded
from innkeeper_hostapi.sessions import (
    ExtensionEvent,
    Role,
    SessionController,
    SessionError,
    SessionNotFound,
)
from innkeeper_tavern.features.prompt_profile.adapters import RecordCache
from innkeeper_tavern.features.prompt_profile.group_view import (
    GroupGreeting,
    GroupView,
    JoinedCards,
)
from innkeeper_tavern.pure.formats.card import CharacterCard
from innkeeper_tavern.pure.formats.macros import MacroEnv
from innkeeper_tavern.pure.groups.model import Group
from innkeeper_tavern.pure.groups.speakers import (
    ChatLine,
    RandomSource,
    choose_speakers,
    swipe_speaker,
)
from innkeeper_tavern.state.groups.sessions import GroupSessionStore
from innkeeper_tavern.state.groups.store import GroupStore
from innkeeper_tavern.state.resources import TavernResources
from innkeeper_tavern.state.session_bindings.model import Selection

from .members import MemberCard, display_name, joined_cards

_ASSISTANT: Final[tuple[Role, ...]] = ("assistant",)
_CHAT: Final[tuple[Role, ...]] = ("user", "assistant")
#: The ``ext`` event naming a turn's speaker.
SPEAKER_EVENT: Final = "pmp-dsh-tavern:group-speaker"
#: How many ancestors a branch's group is looked up through.
MAX_ANCESTRY: Final = 64
#: How many recent messages speaker choice reads (mentions, the last speaker, the pool).
CHOICE_WINDOW: Final = 64
#: Longest chain of speakers one round (or auto mode) asks for before it stops on its own.
MAX_ROUND_SPEAKERS: Final = 64


@dataclass(frozen=True, slots=True)
class Speaker:
    """Who spoke one turn."""

    character_id: str
    name: str

    def wire(self) -> dict[str, str]:
        """``{characterId, name}``."""
        return {"characterId": self.character_id, "name": self.name}


class GroupPlayError(Exception):
    """A group-play request that cannot be served: HTTP ``status`` and a stable ``code``."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


GROUP_SPEAKER_UNKNOWN: Final = "GROUP_SPEAKER_UNKNOWN"
GROUP_SESSION_NOT_GROUP: Final = "GROUP_SESSION_NOT_GROUP"
GROUP_TURN_OPEN: Final = "GROUP_TURN_OPEN"


def speakers_of(events: Sequence[Any]) -> dict[int, Speaker]:
    """Turn → speaker from a session's events (the last record of a turn wins)."""
    out: dict[int, Speaker] = {}
    for event in events:
        data = event.data
        if isinstance(data, ExtensionEvent) and data.name == SPEAKER_EVENT:
            payload = data.payload
            turn, cid, name = payload.get("turn"), payload.get("characterId"), payload.get("name")
            if isinstance(turn, int) and isinstance(cid, str) and isinstance(name, str):
                out[turn] = Speaker(cid, name)
    return out


class GroupPlay:
    """Speaker per turn, the loader's group view, rounds and auto mode."""

    def __init__(
        self,
        ctx: PluginContext,
        resources: TavernResources,
        groups: GroupStore,
        bindings: GroupSessionStore,
        *,
        rng: Callable[[str, int], RandomSource] | None = None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        logger: logging.Logger | None = None,
    ) -> None:
        self.ctx = ctx
        self.groups = groups
        self.bindings = bindings
        self.cards: RecordCache[CharacterCard] = RecordCache(resources.characters)
        # Seeded by session and turn, so a replayed turn would choose alike; tests inject one.
        self._rng = rng or (lambda sid, turn: random.Random(f"{sid}:{turn}"))
        self._now = now
        self._log = logger or logging.getLogger(__name__)
        self._speakers: dict[str, dict[int, Speaker]] = {}
        self._picks: dict[str, str] = {}
        self._rounds: dict[str, list[str]] = {}
        self._chain: dict[str, int] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._group_cache: dict[str, str | None] = {}

    # -- host ----------------------------------------------------------------------------------
    def _sessions(self) -> SessionController:
        sessions = self.ctx.get_optional(SESSIONS)
        if sessions is None:
            raise GroupPlayError(501, "PLAY_HOST_UNAVAILABLE", "the host has no sessions")
        return sessions

    # -- binding -------------------------------------------------------------------------------
    async def group_id_of(self, session_id: str) -> str | None:
        """The group ``session_id`` plays (its own binding, else its nearest ancestor's)."""
        if session_id in self._group_cache:
            return self._group_cache[session_id]
        sessions = self.ctx.get_optional(SESSIONS)
        current: str | None = session_id
        found: str | None = None
        for _ in range(MAX_ANCESTRY):
            if current is None:
                break
            found = self.bindings.group_of(current)
            if found is not None or sessions is None:
                break
            try:
                parent = (await sessions.inspect(current)).header.parent
            except SessionNotFound:
                break
            current = parent.session_id if parent is not None else None
        self._group_cache[session_id] = found
        return found

    def forget(self, session_id: str) -> None:
        """Drop what is cached about ``session_id`` (its binding changed)."""
        self._group_cache.pop(session_id, None)

    async def bind(self, session_id: str, group_id: str) -> None:
        """Make ``session_id`` a group session (a playthrough's root)."""
        await self.bindings.bind(session_id, group_id, self._now().isoformat())
        self._group_cache[session_id] = group_id

    async def group_of(self, session_id: str) -> Group | None:
        """The stored group ``session_id`` plays (``None``: no group, or it was deleted)."""
        gid = await self.group_id_of(session_id)
        return self.groups.find(gid) if gid is not None else None

    async def members(self, group: Group) -> list[MemberCard]:
        """The members whose cards are stored, in the group's order."""
        out: list[MemberCard] = []
        for member in group.members:
            found = await self.cards.get(member.character_id)
            if found is None:
                continue
            card = found[0].body
            out.append(MemberCard(member.character_id, display_name(card), member.muted, card))
        return out

    # -- speakers ------------------------------------------------------------------------------
    async def speakers(self, session_id: str) -> dict[int, Speaker]:
        """Turn → speaker of ``session_id`` (read from its log once, then kept current)."""
        known = self._speakers.get(session_id)
        if known is None:
            known = speakers_of(await self._events(session_id))
            self._speakers[session_id] = known
        return known

    async def _events(self, session_id: str) -> list[Any]:
        sessions = self._sessions()
        out: list[Any] = []
        before: int | None = None
        through: int | None = None
        while True:
            page = await sessions.page(
                session_id, before_seq=before, limit=1000, through_seq=through
            )
            through = page.through_seq if through is None else through
            out.extend(page.events)
            if not page.has_more or page.next_before_seq is None:
                break
            if before is not None and page.next_before_seq >= before:
                break
            before = page.next_before_seq
        return out

    async def _chat(
        self, session_id: str, turn: TurnContext | None
    ) -> tuple[list[ChatLine], str | None]:
        """The recent chat as speaker choice reads it, without the turn's claimed input, and
        that input's text (``None`` for a turn without one)."""
        sessions = self._sessions()
        recent = await sessions.recent_messages(session_id, roles=_CHAT, limit=CHOICE_WINDOW)
        claimed = {item.id for item in turn.claimed} if turn is not None else set()
        spoken = await self.speakers(session_id)
        lines: list[ChatLine] = []
        user_input: list[str] = []
        for message in recent.messages:
            if message.id in claimed:
                user_input.append(message.text)
                continue
            if message.role == "user":
                lines.append(ChatLine(message.text, is_user=True))
                continue
            who = spoken.get(message.turn) if message.turn is not None else None
            lines.append(
                ChatLine(
                    message.text,
                    character_id=who.character_id if who else None,
                    name=who.name if who else "",
                )
            )
        if turn is not None and not user_input:
            user_input = [
                "".join(getattr(b, "text", "") for b in item.content)
                for item in turn.claimed
                if item.id not in {m.id for m in recent.messages}
            ]
        text = "\n".join(t for t in user_input if t) or None
        return lines, text

    async def _decide(
        self, session_id: str, turn: TurnContext, group: Group, members: list[MemberCard]
    ) -> MemberCard:
        by_id = {m.character_id: m for m in members}
        pick = self._picks.pop(session_id, None)
        if pick in by_id:  # the player's pick answers alone: no queued speaker follows
            assert pick is not None
            self._rounds.pop(session_id, None)
            return by_id[pick]
        rng = self._rng(session_id, turn.turn)
        chat, user_input = await self._chat(session_id, turn)
        candidates = [m.candidate() for m in members]
        if turn.kind != "normal":
            keep = swipe_speaker(candidates, chat, rng)
            if keep in by_id:
                assert keep is not None
                return by_id[keep]
        queued = self._rounds.get(session_id)
        while queued:
            nxt = queued.pop(0)
            if nxt in by_id:
                return by_id[nxt]
        if user_input:  # the player wrote: a new round, a new chain, no waiting auto round
            self._chain[session_id] = 0
            waiting = self._tasks.pop(session_id, None)
            if waiting is not None and not waiting.done():
                waiting.cancel()
        chosen = choose_speakers(
            group.activation_strategy,
            candidates,
            chat,
            user_input=user_input,
            allow_self_responses=group.allow_self_responses,
            rng=rng,
        )
        chosen = [c for c in chosen if c in by_id]
        if not chosen:
            keep = swipe_speaker(candidates, chat, rng)
            enabled = [m.character_id for m in members if not m.muted] or list(by_id)
            chosen = [keep if keep in by_id else enabled[0]] if by_id else []
        if not chosen:
            raise GroupPlayError(409, GROUP_SPEAKER_UNKNOWN, "the group has no member to speak")
        self._rounds[session_id] = chosen[1:]
        return by_id[chosen[0]]

    async def _record(self, session_id: str, turn: int, member: MemberCard) -> Speaker:
        speaker = Speaker(member.character_id, member.name)
        await self._sessions().append(
            session_id,
            ExtensionEvent(name=SPEAKER_EVENT, payload={"turn": turn, **speaker.wire()}),
        )
        (await self.speakers(session_id))[turn] = speaker
        return speaker

    async def speaker_for(
        self, session_id: str, turn: TurnContext | None, group: Group, members: list[MemberCard]
    ) -> MemberCard:
        """The member who speaks ``turn`` (decided and recorded on its first call; a preview
        reads the player's pick or the last speaker and records nothing)."""
        by_id = {m.character_id: m for m in members}
        if turn is None:
            pick = self._picks.get(session_id)
            if pick in by_id:
                assert pick is not None
                return by_id[pick]
            chat, _ = await self._chat(session_id, None)
            keep = swipe_speaker([m.candidate() for m in members], chat, random.Random(0))
            enabled = [m for m in members if not m.muted] or members
            return by_id[keep] if keep in by_id else enabled[0]
        done = (await self.speakers(session_id)).get(turn.turn)
        if done is not None and done.character_id in by_id:
            return by_id[done.character_id]
        member = await self._decide(session_id, turn, group, members)
        await self._record(session_id, turn.turn, member)
        return member

    # -- the loader's hook ---------------------------------------------------------------------
    async def view(
        self, session_id: str, turn: TurnContext | None, selection: Selection
    ) -> GroupView | None:
        """The loader's :data:`GroupViewHook`: ``None`` unless ``session_id`` plays a group."""
        group = await self.group_of(session_id)
        if group is None:
            return None
        members = await self.members(group)
        if not members:
            return None
        speaker = await self.speaker_for(session_id, turn, group, members)
        spoken = await self.speakers(session_id)
        assistants = await self._sessions().messages(session_id, roles=_ASSISTANT)
        names = tuple(
            (spoken[m.turn].name if m.turn in spoken else "") if m.turn is not None else ""
            for m in assistants.messages
        )
        member_names = ", ".join(m.name for m in members)
        join = None
        if group.generation_mode != "swap":

            def join(user: str) -> JoinedCards:
                env = MacroEnv(char=speaker.name, user=user, group=member_names)
                return joined_cards(group, members, speaker.character_id, env)

        return GroupView(
            group_id=group.id,
            speaker_id=speaker.character_id,
            speaker_name=speaker.name,
            member_names=member_names,
            greetings=tuple(GroupGreeting(m.name, m.card.data.first_message) for m in members),
            assistant_names=names,
            join=join,
        )

    # -- turn control --------------------------------------------------------------------------
    async def pick(self, session_id: str, character_id: str) -> MemberCard:
        """The player's "Let X speak": ``character_id`` speaks the next turn, even when
        muted. 404 ``GROUP_SPEAKER_UNKNOWN`` for a member whose card is not stored."""
        group = await self.group_of(session_id)
        if group is None:
            raise GroupPlayError(409, GROUP_SESSION_NOT_GROUP, "this session plays no group")
        members = {m.character_id: m for m in await self.members(group)}
        if character_id not in members:
            raise GroupPlayError(
                404, GROUP_SPEAKER_UNKNOWN, "speakerId is not a member of this group"
            )
        self._picks[session_id] = character_id
        return members[character_id]

    async def keep_swipe_speaker(self, source: str, child: str, reply_seq: int) -> None:
        """A reply swipe (a branch whose ``stateSource`` names the replaced reply): the child's
        next turn is spoken by that reply's speaker (SillyTavern's swipe keeps the speaker)."""
        if await self.group_id_of(source) is None:
            return
        turn = next(
            (
                e.data.turn
                for e in await self._events(source)
                if e.seq == reply_seq and isinstance(getattr(e.data, "turn", None), int)
            ),
            None,
        )
        speaker = (await self.speakers(source)).get(turn) if turn is not None else None
        if speaker is not None:
            self._picks[child] = speaker.character_id

    async def reply(self, session_id: str, speaker_id: str | None) -> int:
        """A turn without the player's input: ``speaker_id`` speaks, else the strategy's
        next speaker ("Next speaker"). The player's request starts a new chain."""
        if speaker_id is not None:
            await self.pick(session_id, speaker_id)
        elif await self.group_of(session_id) is None:
            raise GroupPlayError(409, GROUP_SESSION_NOT_GROUP, "this session plays no group")
        self._rounds.pop(session_id, None)
        self._chain[session_id] = 0
        return await self._reply(session_id)

    async def _reply(self, session_id: str) -> int:
        agents = self.ctx.get_optional(AGENTS)
        if agents is None:
            raise GroupPlayError(501, "PLAY_HOST_UNAVAILABLE", "the host has no agents")
        try:
            return await agents.reply(session_id)
        except SessionError as exc:
            self._picks.pop(session_id, None)
            raise GroupPlayError(409, GROUP_TURN_OPEN, str(exc)) from None

    def stop(self, session_id: str) -> bool:
        """End the session's chain: no queued speaker answers, auto mode waits for the player.
        ``True`` when something was pending."""
        pending = bool(self._rounds.pop(session_id, None))
        self._picks.pop(session_id, None)
        task = self._tasks.pop(session_id, None)
        if task is not None and not task.done():
            task.cancel()
            pending = True
        self._chain[session_id] = MAX_ROUND_SPEAKERS  # until the player writes again
        return pending

    def pending(self, session_id: str) -> dict[str, Any]:
        """What the session will do next, body-free."""
        task = self._tasks.get(session_id)
        return {
            "queued": list(self._rounds.get(session_id, ())),
            "pick": self._picks.get(session_id),
            "waiting": task is not None and not task.done(),
        }

    async def on_turn_ended(self, event: TurnEnded) -> None:
        """After a group turn: the round's next speaker, or auto mode's next round."""
        sid = event.session_id
        if await self.group_id_of(sid) is None:
            return
        if event.reason != "completed":
            self._rounds.pop(sid, None)
            self._chain[sid] = MAX_ROUND_SPEAKERS
            return
        group = await self.group_of(sid)
        if group is None:
            return
        count = self._chain.get(sid, 0) + 1
        self._chain[sid] = count
        if count >= MAX_ROUND_SPEAKERS:
            self._rounds.pop(sid, None)
            return
        if self._rounds.get(sid):
            delay = 0.0
        elif group.auto_mode:
            delay = float(group.auto_mode_delay)
        else:
            return
        old = self._tasks.pop(sid, None)
        if old is not None and not old.done():
            old.cancel()
        self._tasks[sid] = asyncio.get_running_loop().create_task(
            self._follow(sid, delay), name=f"tavern:group-follow:{sid}"
        )

    async def _follow(self, session_id: str, delay: float) -> None:
        agents = self.ctx.get_optional(AGENTS)
        if agents is None:
            return
        await agents.wait_idle(session_id)
        if delay:
            await asyncio.sleep(delay)
            await agents.wait_idle(session_id)
        if agents.is_running(session_id):
            return
        try:
            await agents.reply(session_id)
        except SessionError:  # the player's input is queued: its turn answers instead
            self._rounds.pop(session_id, None)
        except Exception:
            self._log.exception("a group follow-up turn could not start")

    async def close(self) -> None:
        """Cancel every waiting follow-up (plugin unload)."""
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


__all__ = [
    "GROUP_SESSION_NOT_GROUP",
    "GROUP_SPEAKER_UNKNOWN",
    "GROUP_TURN_OPEN",
    "SPEAKER_EVENT",
    "GroupPlay",
    "GroupPlayError",
    "Speaker",
    "speakers_of",
]
