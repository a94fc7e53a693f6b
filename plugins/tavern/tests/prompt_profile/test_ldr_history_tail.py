"""Activation reads only the chat's tail, and sees what a walk over the whole chat saw.

``read_history`` asks the host for the newest chat messages with text and their counts
(``recent_messages``) instead of every derived message. For random stories (empty replies,
tool-call-only replies, tool results, system prompts, bodies long enough to be deferred, a
session held over its character bound) and random scan limits and claimed input, its result
equals the reference below, which reads and walks the whole chat.
"""

from __future__ import annotations

import random
from pathlib import Path

from innkeeper_core.sessions import EventStore, StoreSessionController
from innkeeper_core.sessions.projection import MAX_INLINE_MESSAGE_CHARS, ConversationCache
from innkeeper_hostapi.agents import TurnContext
from innkeeper_hostapi.sessions import (
    AssistantMessage,
    EventData,
    InboxItem,
    SystemMessage,
    ToolCall,
    ToolResult,
    UserMessage,
    text_content,
    text_of,
)
from innkeeper_tavern.features.prompt_profile.adapters import ActivationInput
from innkeeper_tavern.features.prompt_profile.history import ChatHistory, read_history
from innkeeper_tavern.pure.worldbook import ActivationMessage, ScanLimits


async def reference(
    sessions: StoreSessionController, session_id: str, turn: TurnContext | None, limits: ScanLimits
) -> ChatHistory:
    """What a walk over the whole chat gives (the specification ``read_history`` meets)."""
    everything = (await sessions.messages(session_id, roles=("user", "assistant"))).messages
    durable = [m for m in everything if m.text]
    claimed = turn.claimed if turn is not None else ()
    known = {m.id for m in durable}
    pending = [item for item in claimed if item.id not in known]
    chat = [ActivationMessage(id=m.id, role=m.role, text=m.text) for m in durable]
    chat += [ActivationMessage(id=i.id, role="user", text=text_of(i.content)) for i in pending]
    window = chat[max(0, len(chat) - limits.max_messages) :] if limits.max_messages else []
    scanned: list[ActivationMessage] = []
    budget = limits.max_chars
    cut = len(chat) > limits.max_messages
    for message in window[::-1]:
        if budget <= 0:
            cut = True
            break
        text = message.text[:budget]
        cut = cut or len(text) < len(message.text)
        scanned.insert(0, ActivationMessage(id=message.id, role=message.role, text=text))
        budget -= len(text) + 1
    users = [m.text for m in chat if m.role == "user"]
    replies = [m.text for m in durable if m.role == "assistant"]
    metadata = dict(
        kind="durable-history-only" if turn is None else "durable-plus-claimed-input",
        durableMessageCount=len(known),
        claimedMessageCount=len(claimed),
        includedClaimedMessageCount=len(pending),
        duplicateClaimedMessageCount=len(claimed) - len(pending),
        scannedMessageCount=len(scanned),
        scannedCharacters=sum(len(m.text) for m in scanned),
        maxMessages=limits.max_messages,
        maxCharacters=limits.max_chars,
        truncated=cut,
        claimEventSeq=None if turn is None else turn.claim_seq,
    )
    text = "\n".join(m.text for m in scanned)
    activation = ActivationInput(
        messages=tuple(scanned), text=text, metadata=metadata, chat_length=len(chat)
    )
    return ChatHistory(
        activation,
        bool(replies),
        users[-1] if users else "",
        replies[-1] if replies else "",
        chat[-1].text if chat else "",
        len(chat),
        len(users),
    )


def story_event(rng: random.Random, n: int) -> EventData:
    length = rng.choice([0, 5, 40, 300, MAX_INLINE_MESSAGE_CHARS + 1])
    text = (f"{n}:" + "lorem ipsum " * (length // 12 + 1))[:length] if length else ""
    kind = rng.choice(["user", "user", "assistant", "assistant", "calls", "tool", "system"])
    mid = f"m{n}"
    if kind == "user":
        return UserMessage(message_id=mid, content=text_content(text), turn=1)
    if kind == "assistant":
        return AssistantMessage(message_id=mid, content=text_content(text), turn=1)
    if kind == "calls":
        call = ToolCall(id=f"c{n}", name="dice", arguments="{}")
        return AssistantMessage(
            message_id=mid, content=text_content(""), turn=1, tool_calls=(call,)
        )
    if kind == "tool":
        return ToolResult(
            message_id=mid, tool_call_id=f"c{n - 1}", name="dice", content=text_content(text)
        )
    return SystemMessage(message_id=mid, content=text_content(text), turn=1)


async def test_the_tail_read_equals_the_whole_chat_walk(tmp_path: Path) -> None:
    rng = random.Random(18)
    async with await EventStore.open(tmp_path) as store:
        # A small per-session bound: old bodies are deferred and read back on demand.
        cache = ConversationCache(store, max_session_chars=4_000)
        sessions = StoreSessionController(store, cache)
        session = (await store.create_session()).id
        empty = (await store.create_session()).id
        n = 0
        for round_ in range(12):
            for _ in range(rng.choice([1, 5, 30])):
                n += 1
                await store.append(session, story_event(rng, n))
            for _ in range(6):
                limits = ScanLimits(
                    max_messages=rng.choice([0, 1, 3, 20, 128]),
                    max_chars=rng.choice([0, 10, 500, 65_536]),
                )
                read = await sessions.messages(session, roles=("user",))
                durable_users = [m for m in read.messages if m.text]
                claimed: tuple[InboxItem, ...] = ()
                if durable_users and rng.random() < 0.5:  # a claimed item already in the chat
                    newest = durable_users[-1]
                    claimed = (InboxItem(id=newest.id, content=newest.content),)
                if rng.random() < 0.5:  # and one not (yet) in it
                    item = InboxItem(id=f"claim{round_}", content=text_content("claimed now"))
                    claimed = (*claimed, item)
                turn = (
                    TurnContext(
                        session_id=session,
                        turn=round_ + 1,
                        delegation_depth=0,
                        claimed=claimed,
                        claim_seq=n,
                    )
                    if rng.random() < 0.8
                    else None
                )
                for sid in (session, empty, "no-such-session"):
                    got = await read_history(sessions, sid, turn, limits)
                    if sid == "no-such-session":
                        expected = await read_history(None, sid, turn, limits)
                    else:
                        expected = await reference(sessions, sid, turn, limits)
                    assert got == expected
        cache.close()


async def test_the_newest_user_text_is_found_beyond_the_scanned_tail(tmp_path: Path) -> None:
    """A tail of assistant messages only: the newest user text is read back on its own."""
    async with await EventStore.open(tmp_path) as store:
        sessions = StoreSessionController(store)
        session = (await store.create_session()).id
        await store.append(session, UserMessage(message_id="u", content=text_content("hello")))
        for i in range(5):
            await store.append(
                session, AssistantMessage(message_id=f"a{i}", content=text_content(f"a{i}"), turn=1)
            )
        got = await read_history(sessions, session, None, ScanLimits(max_messages=2))
        assert got.last_user == "hello" and got.last_char == "a4"
        assert [m.text for m in got.activation.messages] == ["a3", "a4"]
        assert got.activation.metadata["durableMessageCount"] == 6
        assert got == await reference(sessions, session, None, ScanLimits(max_messages=2))
        sessions.conversations.close()
