"""The history budget: the newest whole history messages that fit, request-only."""

from __future__ import annotations

import math

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from innkeeper_assembler.placement import (
    REPLY_RESERVE_TOKENS,
    Carrier,
    ModuleItems,
    Plan,
    build_plan,
    estimate_tokens,
    project,
    trim_history,
)
from innkeeper_hostapi.assembly import (
    ChatStart,
    Contribution,
    HistoryBudget,
    Module,
    RequestShape,
    Strategy,
)
from innkeeper_hostapi.providers import ChatMessage, ChatRole, ChatToolCall


def text(tokens: int) -> str:
    return "x" * int(tokens * 3.5)


def msg(role: ChatRole, tokens: int, tag: str = "") -> ChatMessage:
    return ChatMessage(role=role, content=(tag + text(tokens))[: int(tokens * 3.5)])


def plan_for(*items: Contribution) -> Plan:
    module = Module(source="s")
    strategy = Strategy(id="x", name="x", backend="advanced", modules=(module,))
    return build_plan(strategy, [ModuleItems(module, items)])


def test_the_smallest_budget_counts_and_is_never_a_message() -> None:
    plan = plan_for(
        Contribution(key="a", text="", placement=HistoryBudget(tokens=500)),
        Contribution(key="b", text="ignored", placement=HistoryBudget(tokens=200)),
        Contribution(key="c", text="Hi", placement=ChatStart(role="system")),
    )
    assert plan.history_tokens == 200
    assert [c.message.content for c in plan.carriers] == ["Hi"]
    assert plan.metadata()["historyTokens"] == 200
    assert plan_for(Contribution(key="c", text="Hi")).history_tokens is None


def test_newest_whole_messages_fit_and_the_walk_stops_at_the_first_misfit() -> None:
    system = msg("system", 10)
    history = [
        msg("user", 5, "a"),
        msg("assistant", 50, "b"),
        msg("user", 20, "c"),
        msg("assistant", 20, "d"),
    ]
    depth = ChatMessage(role="system", content=text(7))
    carriers = (Carrier(depth=1, order=0, message=depth, keys=("s:d",)),)
    budget = REPLY_RESERVE_TOKENS + 10 + 7 + 20 + 20 + 30  # room for c, d, not b (a would fit)
    kept, out_carriers, dropped = trim_history([system, *history], carriers, budget)
    assert kept == (system, history[2], history[3]) and dropped == 2
    assert out_carriers == carriers
    # The depth item is still placed relative to the kept tail.
    projected, _ = project(kept, out_carriers)
    assert projected == (system, history[2], depth, history[3])
    # Everything fits: the very same array.
    whole, _, none = trim_history([system, *history], carriers, 10_000)
    assert whole == (system, *history) and none == 0


def test_a_message_counts_with_the_speaker_name_put_before_it() -> None:
    # A group chat (names_behavior 0): every reply is sent as "Name: text", the player's
    # own messages as they are; the budget counts what is sent, as SillyTavern does.
    shape = RequestShape(
        history_names="content",
        user_name="",
        assistant_name="Bramwell",
        assistant_names=("Ada", ""),
    )
    history = [
        ChatMessage(role="assistant", content=text(8)),  # "Ada: …" when sent
        ChatMessage(role="user", content=text(8)),
        ChatMessage(role="assistant", content=text(8)),  # "Bramwell: …" (the speaker)
    ]
    sent = [len("Ada: ") + len(text(8)), len(text(8)), len("Bramwell: ") + len(text(8))]
    cost = [math.ceil(n / 3.5) for n in sent]
    assert cost == [10, 8, 11]
    budget = REPLY_RESERVE_TOKENS + cost[1] + cost[2] + cost[0] - 1
    kept, _, dropped = trim_history(history, (), budget, shape)
    assert kept == tuple(history[1:]) and dropped == 1
    kept, _, dropped = trim_history(history, (), budget + 1, shape)
    assert kept == tuple(history) and dropped == 0
    # Names in `name` (names_behavior 1) add nothing to the content.
    named = msgspec.structs.replace(shape, history_names="name")
    assert trim_history(history, (), sum(map(estimate_tokens, history)) + 3, named)[2] == 0


def test_a_greeting_is_the_oldest_chat_message_and_tool_exchanges_stay_whole() -> None:
    greeting = Carrier(
        depth=None,
        order=9,
        message=ChatMessage(role="assistant", content=text(5)),
        keys=("s:g",),
        chat=True,
    )
    prompt = Carrier(
        depth=None, order=0, message=ChatMessage(role="system", content=text(5)), keys=("s:p",)
    )
    call = ChatMessage(
        role="assistant",
        content="",
        tool_calls=(ChatToolCall(id="t1", name="roll", arguments="{}"),),
    )
    answer = ChatMessage(role="tool", content=text(30), tool_call_id="t1")
    history = [msg("user", 10, "u"), call, answer, msg("assistant", 10, "r")]
    cost = sum(estimate_tokens(m) for m in history)
    budget = REPLY_RESERVE_TOKENS + estimate_tokens(prompt.message) + cost
    kept, carriers, dropped = trim_history(history, (prompt, greeting), budget)
    assert kept == tuple(history) and carriers == (prompt,) and dropped == 1
    kept, carriers, dropped = trim_history(history, (prompt, greeting), budget + 5)
    assert carriers == (prompt, greeting) and dropped == 0
    # Not enough for the tool answer and its call together: both are left out.
    small = REPLY_RESERVE_TOKENS + estimate_tokens(prompt.message) + 10 + 20
    kept, carriers, dropped = trim_history(history, (prompt, greeting), small)
    assert kept == (history[3],) and dropped == 4
    assert msgspec.json.encode(kept)  # still a valid array


# -- the slice-based insertion and the inlined estimate equal a message-by-message walk ------


def walk_chat(messages: list[ChatMessage]) -> list[ChatMessage]:
    """The history after the leading system/developer messages."""
    for index, message in enumerate(messages):
        if message.role not in ("system", "developer"):
            return messages[index:]
    return []


def walk_project(messages: list[ChatMessage], carriers: list[Carrier]) -> list[ChatMessage]:
    """One step per history position: the carriers placed there, then the message."""
    chat = walk_chat(messages)
    out = messages[: len(messages) - len(chat)]
    for position in range(len(chat) + 1):
        for carrier in carriers:
            at = 0 if carrier.depth is None else max(0, len(chat) - carrier.depth)
            while 0 < at < len(chat) and chat[at].role == "tool":
                at -= 1
            if at == position:
                out.append(carrier.message)
        if position < len(chat):
            out.append(chat[position])
    return out


roles = st.sampled_from(["user", "assistant", "tool", "system"])
chats = st.lists(st.tuples(roles, st.integers(0, 400)), max_size=30)
placements = st.lists(st.one_of(st.none(), st.integers(0, 35)), max_size=6)


@settings(max_examples=200, deadline=None)
@given(chat=chats, depths=placements, tokens=st.integers(0, 3_000))
def test_projection_and_trim_equal_the_per_message_walk(
    chat: list[tuple[ChatRole, int]], depths: list[int | None], tokens: int
) -> None:
    messages = [
        ChatMessage(role=role, content=f"{n}:" + "y" * size) for n, (role, size) in enumerate(chat)
    ]
    carriers = [
        Carrier(depth=d, order=i, message=ChatMessage(role="system", content=f"c{i}"), keys=())
        for i, d in enumerate(depths)
    ]
    projected, inserted = project(messages, carriers)
    assert list(projected) == walk_project(messages, carriers)
    assert [projected[i] for i in inserted] == [
        m for m in projected if m.content.startswith("c") and m.role == "system"
    ]
    for message in messages:
        assert estimate_tokens(message) == max(1, math.ceil(len(message.content) / 3.5))
    # The trim keeps the leading system messages and a suffix of the chat.
    kept, _, _ = trim_history(messages, carriers, tokens)
    head = len(messages) - len(walk_chat(messages))
    assert list(kept[:head]) == messages[:head]
    assert list(kept[head:]) == messages[len(messages) - len(kept) + head :]
