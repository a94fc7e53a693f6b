"""The conversation projection: each live session's derived messages, kept up to date as events
land instead of re-derived from the whole log on every read (issue 18 "Long stories").

A session's :class:`_Conversation` is built once from the log (one read) and then extended by
the store's append listener, which sees every committed event in commit order. It equals
:func:`~innkeeper_core.sessions.messages.derive_messages`, :func:`has_open_turn` and
:func:`stopped_request` over the full log at every point (a property test checks this).

Forks are new sessions (their own conversation, built from their inherited prefix); the log is
append-only, so nothing already derived changes except ``incomplete_turn`` when a turn ends. A
gap in the seqs seen by the listener (which cannot happen while the store is the only writer)
drops the conversation; the next read rebuilds it.

Memory is bounded per session and globally (all limits are characters of message text held):

* a message longer than :data:`MAX_INLINE_MESSAGE_CHARS` (a turn's assembled system prompt) is
  kept as a placeholder; its body is read from the store only when a read asks for its role;
* a session holding more than :data:`MAX_SESSION_CHARS` turns its oldest bodies into
  placeholders;
* past :data:`MAX_TOTAL_CHARS` over all sessions, or after :data:`IDLE_RELEASE_S` without a
  read, a session's conversation is released (least recently used first) and rebuilt on the
  next read.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Final, NamedTuple, cast

import msgspec

from innkeeper_hostapi.providers import ChatMessage
from innkeeper_hostapi.sessions import (
    AssistantMessage,
    DerivedMessage,
    FailedTurn,
    Role,
    SessionEvent,
    StoppedRequest,
    TurnEnd,
    TurnStart,
    UserMessage,
    text_of,
)

from .messages import chat_message, complete_message, derive_message
from .store import EventStore

__all__ = [
    "HISTORY_ROLES",
    "IDLE_RELEASE_S",
    "MAX_INLINE_MESSAGE_CHARS",
    "MAX_SESSION_CHARS",
    "MAX_TOTAL_CHARS",
    "ConversationCache",
    "ConversationRead",
    "ConversationStats",
    "RecentRead",
    "RequestHistory",
]

log = logging.getLogger("innkeeper.sessions.projection")

#: Longest message body held in memory; longer ones are read back from the store on demand.
MAX_INLINE_MESSAGE_CHARS: Final = 16 * 1024
#: Most message text one session's conversation holds in memory.
MAX_SESSION_CHARS: Final = 8 * 1024 * 1024
#: Most message text all conversations hold together.
MAX_TOTAL_CHARS: Final = 64 * 1024 * 1024
#: A conversation not read for this long is released.
IDLE_RELEASE_S: Final = 600.0
#: How often (at most) reads and appends look for idle conversations.
_SWEEP_INTERVAL_S: Final = 5.0

_EMPTY: Final[tuple[()]] = ()
#: Roles of the history a request sends after the turn's system prompt.
HISTORY_ROLES: Final[frozenset[Role]] = frozenset(("user", "assistant", "tool"))


@dataclass(slots=True)
class _TurnSpan:
    """What :func:`stopped_request` needs of the latest ``turn/start`` span."""

    turn: int
    start_seq: int
    user_seq: int | None = None
    assistant_text: bool = False


@dataclass(slots=True)
class _Conversation:
    """One session's derived messages and the state to extend them."""

    messages: list[DerivedMessage] = field(default_factory=list)
    #: Indexes in ``messages`` whose body is not held (read from the store on demand).
    deferred: set[int] = field(default_factory=set)
    through_seq: int = 0
    open_turn: int | None = None
    #: Indexes of the open turn's messages (completed when its ``turn/end`` lands).
    pending: list[int] = field(default_factory=list)
    span: _TurnSpan | None = None
    stopped: StoppedRequest | None = None
    failed: FailedTurn | None = None
    chars: int = 0
    #: Next index that may still hold its body (the oldest are deferred first).
    oldest_inline: int = 0
    #: The request history (:data:`HISTORY_ROLES` with text) as the model is sent it, built
    #: once per message; ``None`` where the body is deferred.
    chat: list[ChatMessage | None] = field(default_factory=list)
    chat_seqs: list[int] = field(default_factory=list)
    #: History entries already passed by :meth:`shed`.
    chat_shed: int = 0
    #: ``id()`` of each held history message -> its index in ``chat``. Entries are never
    #: removed (a shed message's id may be reused by a later object): a lookup is trusted only
    #: when the history read holds that very object at that index (:meth:`RequestHistory.seq_of`).
    chat_index: dict[int, int] = field(default_factory=dict)
    #: Indexes of the ``None`` entries of ``chat`` (bodies not held).
    chat_missing: list[int] = field(default_factory=list)
    #: Tool calls of the latest assistant message that calls tools with no answer yet, and
    #: whether a call was left unanswered before a later message (a fork cut between a call and
    #: its result): only then does a request need request-only answers (``answer_missing``).
    tool_pending: list[str] = field(default_factory=list)
    tool_gap: bool = False
    #: Messages with text, per role (deferred bodies included: they are long texts).
    text_counts: dict[Role, int] = field(default_factory=dict)

    def apply(self, event: SessionEvent) -> int:
        """Extend by one event; returns the change in held characters."""
        self.through_seq = event.seq
        data = event.data
        if isinstance(data, TurnStart):
            self.open_turn = data.turn
            self.pending = []
            self.span = _TurnSpan(turn=data.turn, start_seq=event.seq)
            self.stopped = None  # a turn started after the last end
            self.failed = None
            return 0
        if isinstance(data, TurnEnd):
            for index in self.pending:
                self.messages[index] = complete_message(self.messages[index])
            self.open_turn = None
            self.pending = []
            span = self.span
            self.stopped = None
            self.failed = None
            if span is not None and span.turn == data.turn and data.reason.kind == "error":
                self.failed = FailedTurn(
                    turn=data.turn,
                    turn_start_event_id=span.start_seq,
                    turn_end_event_id=event.seq,
                    user_event_id=span.user_seq,
                    code=data.reason.code,
                    message=data.reason.message,
                )
            if (
                span is not None
                and span.turn == data.turn
                and data.reason.kind == "interrupted"
                and not span.assistant_text
                and span.user_seq is not None
            ):
                self.stopped = StoppedRequest(
                    user_event_id=span.user_seq,
                    turn_start_event_id=span.start_seq,
                    turn_end_event_id=event.seq,
                )
            return 0
        span = self.span
        if span is not None:
            if isinstance(data, AssistantMessage) and text_of(data.content).strip():
                span.assistant_text = True
            elif (
                span.user_seq is None
                and isinstance(data, UserMessage)
                and data.origin.kind == "user"
            ):
                span.user_seq = event.seq
        message = derive_message(event, self.open_turn)
        if message is None:
            return 0
        index = len(self.messages)
        if self.open_turn is not None:
            self.pending.append(index)
        heavy = len(message.text) > MAX_INLINE_MESSAGE_CHARS
        if message.text:
            self.text_counts[message.role] = self.text_counts.get(message.role, 0) + 1
        sent = chat_message(message)
        if sent is not None:
            self._track_answers(sent)
            if heavy:
                self.chat_missing.append(len(self.chat))
                self.chat.append(None)
            else:
                self.chat_index[id(sent)] = len(self.chat)
                self.chat.append(sent)
            self.chat_seqs.append(event.seq)
        if heavy:
            self.messages.append(_placeholder(message))
            self.deferred.add(index)
            return 0
        self.messages.append(message)
        self.chars += len(message.text)
        return len(message.text)

    def shed(self, limit: int) -> int:
        """Defer the oldest bodies until at most ``limit`` characters are held; returns the
        characters released."""
        released = 0
        while self.chars > limit and self.oldest_inline < len(self.messages):
            index = self.oldest_inline
            self.oldest_inline += 1
            message = self.messages[index]
            deferred = index in self.deferred
            # A deferred body was a long text: it is in the history when its role is. A held
            # message is when it is sent (a tool exchange is sent without text).
            in_chat = (
                message.role in HISTORY_ROLES if deferred else chat_message(message) is not None
            )
            position: int | None = None
            if in_chat:
                position = self.chat_shed
                self.chat_shed += 1
            if not deferred and not message.text:
                continue  # nothing to release
            if deferred:
                continue
            if position is not None and self.chat[position] is not None:
                self.chat[position] = None
                self.chat_missing.append(position)
            self.messages[index] = _placeholder(message)
            self.deferred.add(index)
            self.chars -= len(message.text)
            released += len(message.text)
        return released

    def _track_answers(self, sent: ChatMessage) -> None:
        """Follow tool calls and their answers as ``answer_missing`` walks them."""
        pending = self.tool_pending
        if sent.role == "tool" and sent.tool_call_id in pending:
            pending.remove(sent.tool_call_id)
        elif pending:
            self.tool_gap = True
            pending.clear()
        if sent.role == "assistant" and sent.tool_calls:
            self.tool_pending = [call.id for call in sent.tool_calls]

    def has_text(self, index: int) -> bool:
        """Whether message ``index`` has text (a deferred body always has: only texts are)."""
        return bool(self.messages[index].text) or index in self.deferred


def _placeholder(message: DerivedMessage) -> DerivedMessage:
    return msgspec.structs.replace(message, text="", content=_EMPTY)


class ConversationRead(NamedTuple):
    """One read of a conversation, all from the same moment."""

    messages: tuple[DerivedMessage, ...]
    incomplete_turn: bool
    through_seq: int
    stopped_request: StoppedRequest | None
    failed_turn: FailedTurn | None


class RecentRead(NamedTuple):
    """The newest messages with text of some roles, and how many there are in all."""

    #: Oldest first.
    messages: tuple[DerivedMessage, ...]
    #: Messages with text of each asked role in the whole conversation.
    text_counts: dict[Role, int]
    incomplete_turn: bool
    through_seq: int


class RequestHistory:
    """The request history at one moment (:meth:`ConversationCache.history`).

    ``messages`` are shared between requests (built once per message); :meth:`seq_of` says
    which durable event a message of the array came from, by identity, without building a map
    of the whole history for every request.
    """

    __slots__ = ("_extra", "_index", "_own", "answered", "messages", "seqs")

    def __init__(
        self,
        messages: tuple[ChatMessage, ...],
        seqs: tuple[int, ...],
        index: dict[int, int],
        extra: dict[int, int],
        answered: bool,
    ) -> None:
        self.messages = messages
        self.seqs = seqs
        self._index = index
        self._extra = extra
        #: Messages outside the history with a durable event (the turn's system message).
        self._own: dict[int, tuple[ChatMessage, int]] = {}
        #: No tool call lacks its answer: ``answer_missing(messages)`` would change nothing.
        self.answered = answered

    def add_ref(self, message: ChatMessage, seq: int) -> None:
        """Make :meth:`seqs_of` find ``message`` (built from event ``seq``) too."""
        self._own[id(message)] = (message, seq)

    def seq_of(self, message: ChatMessage) -> int | None:
        """The seq of the event ``message`` (this very object) was built from, or ``None``
        when it is neither one of :attr:`messages` nor added by :meth:`add_ref`."""
        return self.seqs_of((message,))[0]

    def seqs_of(self, messages: Sequence[ChatMessage]) -> list[int | None]:
        """:meth:`seq_of` of each of ``messages`` (one tight loop: a long story's request asks
        this for every message it sends)."""
        held, seqs, count = self.messages, self.seqs, len(self.messages)
        index, extra, own = self._index.get, self._extra.get, self._own
        out: list[int | None] = []
        for message in messages:
            key = id(message)
            at = index(key)
            if at is None or at >= count or held[at] is not message:
                at = extra(key)
                if at is None or at >= count or held[at] is not message:
                    mine = own.get(key)
                    out.append(mine[1] if mine is not None and mine[0] is message else None)
                    continue
            out.append(seqs[at])
        return out


@dataclass(frozen=True, slots=True)
class ConversationStats:
    """What the cache holds: for tests, benchmarks and operations."""

    sessions: int
    chars: int
    deferred: int
    #: Held characters of each cached session.
    per_session: dict[str, int]


class ConversationCache:
    """Incrementally maintained conversations of the live sessions (see the module doc).

    ``install`` subscribes to the store's append listener; reads go through :meth:`messages`.
    """

    def __init__(
        self,
        store: EventStore,
        *,
        max_session_chars: int = MAX_SESSION_CHARS,
        max_total_chars: int = MAX_TOTAL_CHARS,
        idle_release_s: float = IDLE_RELEASE_S,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._max_session = max_session_chars
        self._max_total = max_total_chars
        self._idle = idle_release_s
        self._monotonic = monotonic
        #: session id -> conversation, least recently read first.
        self._conversations: OrderedDict[str, _Conversation] = OrderedDict()
        self._last_read: dict[str, float] = {}
        #: Sessions being built: events the listener saw meanwhile.
        self._building: dict[str, list[list[SessionEvent]]] = {}
        self._chars = 0
        self._next_sweep = 0.0
        self._remove = store.add_listener(self._on_append)

    def close(self) -> None:
        """Stop following the store and drop everything held."""
        self._remove()
        self._conversations.clear()
        self._last_read.clear()
        self._chars = 0

    # ------------------------------------------------------------------ reads

    async def messages(
        self, session_id: str, *, roles: Collection[Role] | None = None
    ) -> ConversationRead:
        """Messages, ``incomplete_turn``, ``through_seq``, ``stopped_request`` and
        ``failed_turn`` now; ``roles`` keeps only messages of those roles (and reads back only
        their deferred bodies)."""
        conversation = await self._current(session_id)
        if roles is None:
            indexes: Sequence[int] = range(len(conversation.messages))
        else:
            wanted = frozenset(roles)
            indexes = [i for i, m in enumerate(conversation.messages) if m.role in wanted]
        through = conversation.through_seq
        stopped, failed = conversation.stopped, conversation.failed
        incomplete = conversation.open_turn is not None
        picked = await self._with_bodies(session_id, conversation, indexes)
        return ConversationRead(tuple(picked), incomplete, through, stopped, failed)

    async def history(self, session_id: str) -> RequestHistory:
        """The request history now: the messages a request sends (:func:`chat_message`: the
        :data:`HISTORY_ROLES` messages with text, tool calls and tool results) as
        ``ChatMessage``s (built once per message and shared between requests), and each one's
        seq. Deferred bodies are read back from the store. Nothing here walks the whole
        history in Python: a long story's request costs what it sends (issue 18)."""
        conversation = await self._current(session_id)
        seqs = tuple(conversation.chat_seqs)
        answered = not conversation.tool_gap and not conversation.tool_pending
        extra: dict[int, int] = {}
        if not conversation.chat_missing:
            chat = tuple(cast("list[ChatMessage]", conversation.chat))
        else:
            filled = list(conversation.chat)
            missing = list(conversation.chat_missing)
            bodies = await self._store.read_seqs(session_id, [seqs[n] for n in missing])
            for n in missing:
                message = derive_message(bodies[seqs[n]], None)
                assert message is not None, bodies[seqs[n]].data
                built = chat_message(message)
                assert built is not None, message.role
                filled[n] = built
                extra[id(built)] = n
            chat = tuple(cast("list[ChatMessage]", filled))
        return RequestHistory(chat, seqs, conversation.chat_index, extra, answered)

    async def recent(self, session_id: str, *, roles: Collection[Role], limit: int) -> RecentRead:
        """The newest ``limit`` messages of ``roles`` that have text (oldest first, deferred
        bodies read back) and how many such messages each role has in all; walks back from
        the newest message only as far as it needs."""
        conversation = await self._current(session_id)
        wanted = frozenset(roles)
        indexes: list[int] = []
        messages = conversation.messages
        position = len(messages) - 1
        while len(indexes) < limit and position >= 0:
            if messages[position].role in wanted and conversation.has_text(position):
                indexes.append(position)
            position -= 1
        indexes.reverse()
        counts = {role: conversation.text_counts.get(role, 0) for role in wanted}
        incomplete, through = conversation.open_turn is not None, conversation.through_seq
        picked = await self._with_bodies(session_id, conversation, indexes)
        return RecentRead(tuple(picked), counts, incomplete, through)

    async def _with_bodies(
        self, session_id: str, conversation: _Conversation, indexes: Sequence[int]
    ) -> list[DerivedMessage]:
        """The messages at ``indexes``, their deferred bodies read back from the store."""
        picked = [conversation.messages[i] for i in indexes]
        missing = [(n, picked[n].seq) for n, i in enumerate(indexes) if i in conversation.deferred]
        if missing:
            bodies = await self._store.read_seqs(session_id, [seq for _, seq in missing])
            for n, seq in missing:
                data = bodies[seq].data
                content = getattr(data, "content", _EMPTY)
                picked[n] = msgspec.structs.replace(
                    picked[n], text=text_of(content), content=content
                )
        return picked

    def release(self, session_id: str) -> None:
        """Forget one session's conversation (rebuilt on its next read)."""
        conversation = self._conversations.pop(session_id, None)
        self._last_read.pop(session_id, None)
        if conversation is not None:
            self._chars -= conversation.chars

    def stats(self) -> ConversationStats:
        """Sizes held now."""
        return ConversationStats(
            sessions=len(self._conversations),
            chars=self._chars,
            deferred=sum(len(c.deferred) for c in self._conversations.values()),
            per_session={sid: c.chars for sid, c in self._conversations.items()},
        )

    def release_idle(self) -> int:
        """Release every conversation not read for ``idle_release_s``; returns how many."""
        cutoff = self._monotonic() - self._idle
        idle = [sid for sid, at in self._last_read.items() if at <= cutoff]
        for sid in idle:
            self.release(sid)
        return len(idle)

    # ------------------------------------------------------------------ maintenance

    async def _current(self, session_id: str) -> _Conversation:
        conversation = self._conversations.get(session_id)
        if conversation is None:
            conversation = await self._build(session_id)
        else:
            self._conversations.move_to_end(session_id)
        self._last_read[session_id] = self._monotonic()
        self._sweep()
        return conversation

    async def _build(self, session_id: str) -> _Conversation:
        buffers = self._building.setdefault(session_id, [])
        seen: list[SessionEvent] = []
        buffers.append(seen)
        try:
            events = await self._store.read_all(session_id)
        finally:
            buffers.remove(seen)
            if not buffers:
                del self._building[session_id]
        raced = self._conversations.get(session_id)
        if raced is not None:  # another read built it meanwhile; it is kept current
            return raced
        conversation = _Conversation()
        for event in events:
            conversation.apply(event)
        for event in seen:
            if event.seq <= conversation.through_seq:
                continue
            if event.seq != conversation.through_seq + 1:  # pragma: no cover - defensive
                log.warning("conversation of %s saw a seq gap; not cached", session_id)
                return conversation
            conversation.apply(event)
        conversation.shed(self._max_session)
        self._conversations[session_id] = conversation
        self._chars += conversation.chars
        self._enforce_total()
        return conversation

    def _on_append(self, session_id: str, events: Sequence[SessionEvent]) -> None:
        for buffer in self._building.get(session_id, ()):
            buffer.extend(events)
        conversation = self._conversations.get(session_id)
        if conversation is None or not events:
            return
        if events[0].seq != conversation.through_seq + 1:
            log.warning("conversation of %s saw a seq gap; released", session_id)
            self.release(session_id)
            return
        added = 0
        for event in events:
            added += conversation.apply(event)
        if conversation.chars > self._max_session:
            added -= conversation.shed(self._max_session)
        self._chars += added
        self._enforce_total()
        self._sweep()

    def _enforce_total(self) -> None:
        while self._chars > self._max_total and len(self._conversations) > 1:
            oldest = next(iter(self._conversations))
            self.release(oldest)

    def _sweep(self) -> None:
        now = self._monotonic()
        if now < self._next_sweep:
            return
        self._next_sweep = now + _SWEEP_INTERVAL_S
        self.release_idle()
