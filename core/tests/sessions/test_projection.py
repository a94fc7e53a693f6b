"""The incremental conversation equals a full re-derivation of the log, whatever happens.

Random sequences of appends (user, steering, context, system prompts over the inline limit,
assistant replies, tool results, inbox inserts/cancels/claims), turn starts and ends of every
kind, forks at any seq, batched appends and restarts of the store are replayed against a real
store; after each step every session's cached conversation is compared with
``derive_messages`` / ``has_open_turn`` / ``stopped_request`` over ``read_all``. Small cache
bounds force shedding and releases along the way.
"""

from __future__ import annotations

import asyncio
import itertools
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from innkeeper_core.agents.tool_steps import answer_missing
from innkeeper_core.sessions import (
    EventStore,
    chat_message,
    derive_messages,
    failed_turn,
    has_open_turn,
    stopped_request,
)
from innkeeper_core.sessions.projection import (
    MAX_INLINE_MESSAGE_CHARS,
    ConversationCache,
)
from innkeeper_hostapi.providers import ChatMessage
from innkeeper_hostapi.sessions import (
    AssistantMessage,
    EventData,
    InboxItem,
    InboxSpliced,
    MessageOrigin,
    Role,
    SystemMessage,
    ToolCall,
    ToolResult,
    TurnEnd,
    TurnEndReason,
    TurnStart,
    UserMessage,
    text_content,
)

ROLE_SETS: list[tuple[Role, ...] | None] = [
    None,
    ("user", "assistant"),
    ("user", "assistant", "tool"),
    ("system",),
]

lengths = st.sampled_from([0, 1, 40, 300, MAX_INLINE_MESSAGE_CHARS + 1])
message_op = st.one_of(
    st.tuples(st.just("user"), lengths, st.sampled_from(["user", "steering", "context"])),
    # (kind, length, interrupted, calls a tool)
    st.tuples(st.just("assistant"), lengths, st.booleans(), st.booleans()),
    st.tuples(st.just("system"), lengths, st.sampled_from(["system", "developer"])),
    st.tuples(st.just("tool"), lengths, st.booleans()),
    st.tuples(st.just("splice"), st.sampled_from(["insert", "cancel", "claim"])),
)
op = st.one_of(
    message_op,
    st.tuples(st.just("start")),
    st.tuples(st.just("end"), st.sampled_from(["completed", "interrupted", "error"])),
    st.tuples(st.just("batch"), st.lists(message_op, min_size=1, max_size=4)),
    st.tuples(st.just("fork"), st.floats(0, 1)),
    st.tuples(st.just("switch"), st.integers(0, 5)),
    st.tuples(st.just("restart")),
    st.tuples(st.just("release")),
)


class Story:
    """Replays ops against a store and checks the cache after each."""

    def __init__(self, root: Path, bounds: tuple[int, int]) -> None:
        self.root = root
        self.bounds = bounds
        self.counter = itertools.count(1)
        self.sessions: list[str] = []
        self.current = ""
        self.last_call: str | None = None
        self.open: dict[str, int | None] = {}
        self.store: EventStore
        self.cache: ConversationCache

    async def open_store(self) -> None:
        self.store = await EventStore.open(self.root)
        self.cache = ConversationCache(
            self.store, max_session_chars=self.bounds[0], max_total_chars=self.bounds[1]
        )

    async def close_store(self) -> None:
        self.cache.close()
        await self.store.close()

    def text(self, length: int) -> str:
        n = next(self.counter)
        return (f"{n}:" + "abcdefghij" * (length // 10 + 1))[:length] if length else ""

    def message(self, spec: tuple[Any, ...]) -> EventData:
        kind = spec[0]
        turn = self.open.get(self.current)
        mid = f"m{next(self.counter)}"
        if kind == "user":
            return UserMessage(
                message_id=mid,
                content=text_content(self.text(spec[1])),
                origin=MessageOrigin(kind=spec[2]),
                turn=turn if spec[2] != "context" else None,
            )
        if kind == "assistant":
            calls = (ToolCall(id=f"c{mid}", name="dice", arguments="{}"),) if spec[3] else ()
            if calls:
                self.last_call = f"c{mid}"
            return AssistantMessage(
                message_id=mid,
                content=text_content(self.text(spec[1])),
                turn=turn or 0,
                interrupted=spec[2],
                tool_calls=calls,
            )
        if kind == "system":
            return SystemMessage(
                message_id=mid, content=text_content(self.text(spec[1])), role=spec[2], turn=turn
            )
        if kind == "tool":
            # Half the results answer the latest call (so calls get answered, or twice).
            call = self.last_call if spec[2] and self.last_call else f"c{mid}"
            return ToolResult(
                message_id=mid,
                tool_call_id=call,
                name="dice",
                content=text_content(self.text(spec[1])),
                turn=turn,
            )
        item = InboxItem(id=mid, content=text_content("queued"))
        if spec[1] == "insert":
            return InboxSpliced(op="insert", target="next-turn", start=0, inserted=(item,))
        if spec[1] == "cancel":
            return InboxSpliced(op="cancel", target="next-turn", start=0, removed_count=1)
        return InboxSpliced(
            op="claim", target="next-turn", start=0, removed_count=1, claim_event_seqs=(1,)
        )

    async def step(self, spec: tuple[Any, ...]) -> None:
        kind = spec[0]
        sid = self.current
        if kind == "start":
            if self.open[sid] is None:
                last = (await self.store.inspect(sid)).last_turn
                await self.store.append(sid, TurnStart(turn=last + 1))
                self.open[sid] = last + 1
        elif kind == "end":
            turn = self.open[sid]
            if turn is not None:
                await self.store.append(sid, TurnEnd(turn=turn, reason=TurnEndReason(kind=spec[1])))
                self.open[sid] = None
        elif kind == "batch":
            await self.store.append_many(sid, [self.message(s) for s in spec[1]])
        elif kind == "fork":
            if self.open[sid] is None:
                last = (await self.store.inspect(sid)).last_seq
                child = await self.store.fork(sid, round(spec[1] * last))
                self.sessions.append(child.id)
                self.open[child.id] = None
                self.current = child.id
        elif kind == "switch":
            self.current = self.sessions[spec[1] % len(self.sessions)]
        elif kind == "restart":
            await self.close_store()
            await self.open_store()
        elif kind == "release":
            self.cache.release(sid)
        else:
            await self.store.append(sid, self.message(spec))

    async def check(self) -> None:
        for sid in self.sessions:
            events = await self.store.read_all(sid)
            full = derive_messages(events)
            for roles in ROLE_SETS:
                got, incomplete, through, stopped, failed = await self.cache.messages(
                    sid, roles=roles
                )
                expected = [m for m in full if roles is None or m.role in roles]
                assert list(got) == expected
                assert incomplete == has_open_turn(events)
                assert through == (events[-1].seq if events else 0)
                assert stopped == stopped_request(events)
                assert failed == failed_turn(events)
            # The request history, built once per message, is the same chat.
            history = await self.cache.history(sid)
            chat, seqs = history.messages, history.seqs
            sent = list(zip(chat, seqs, strict=True))
            assert sent == [(built, m.seq) for m in full if (built := chat_message(m)) is not None]
            # Each message is found by identity (never an equal copy), and "answered" says
            # exactly when answer_missing would change nothing.
            assert [history.seq_of(m) for m in chat] == list(seqs)
            assert all(
                history.seq_of(ChatMessage(role=m.role, content=m.content)) is None
                for m in chat[:3]
            )
            assert history.answered == (answer_missing(list(chat)) == list(chat))
            # The newest messages with text, found walking back from the end.
            for roles, limit in ((("user", "assistant"), 3), (("assistant",), 1), (("user",), 50)):
                recent = await self.cache.recent(sid, roles=roles, limit=limit)
                texted = [m for m in full if m.role in roles and m.text]
                assert list(recent.messages) == texted[-limit:]
                assert recent.text_counts == {
                    r: sum(1 for m in texted if m.role == r) for r in roles
                }
        stats = self.cache.stats()
        assert all(chars <= self.bounds[0] for chars in stats.per_session.values())
        assert stats.chars == sum(stats.per_session.values())
        assert stats.chars <= max(self.bounds[1], max(stats.per_session.values(), default=0))


async def play(ops: list[tuple[Any, ...]], bounds: tuple[int, int], check_every: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        story = Story(Path(tmp), bounds)
        await story.open_store()
        try:
            first = (await story.store.create_session()).id
            story.sessions.append(first)
            story.open[first] = None
            story.current = first
            await story.check()  # the cache follows sessions from an empty start too
            for spec in ops:
                await story.step(spec)
                if check_every:
                    await story.check()
            await story.check()
        finally:
            await story.close_store()


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    ops=st.lists(op, max_size=40),
    bounds=st.sampled_from([(8 * 1024 * 1024, 64 * 1024 * 1024), (700, 1500), (50, 50)]),
)
def test_incremental_conversation_equals_full_derivation(
    ops: list[tuple[Any, ...]], bounds: tuple[int, int]
) -> None:
    asyncio.run(play(ops, bounds, check_every=True))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(op, min_size=40, max_size=150))
def test_long_sequences_checked_at_the_end(ops: list[tuple[Any, ...]]) -> None:
    """Without intermediate reads the cache is built late and then extended only."""
    asyncio.run(play(ops, (8 * 1024 * 1024, 64 * 1024 * 1024), check_every=False))


async def test_an_idle_conversation_is_released(tmp_path: Path) -> None:
    now = [0.0]
    async with await EventStore.open(tmp_path) as store:
        cache = ConversationCache(store, idle_release_s=60, monotonic=lambda: now[0])
        quiet, busy = (await store.create_session()).id, (await store.create_session()).id
        for sid in (quiet, busy):
            await store.append(sid, UserMessage(message_id=f"m-{sid}", content=text_content("hi")))
            await cache.messages(sid)
        assert cache.stats().sessions == 2
        now[0] = 61.0
        await cache.messages(busy)  # reads sweep: the quiet one idled past the limit
        assert set(cache.stats().per_session) == {busy}
        got, *_ = await cache.messages(quiet)  # rebuilt on its next read
        assert [m.text for m in got] == ["hi"]
        cache.close()
