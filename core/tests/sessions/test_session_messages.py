"""Derived messages: role and origin.kind independent; incompleteTurn per turn."""

from __future__ import annotations

from innkeeper_core.sessions import derive_messages, has_open_turn, stopped_request
from innkeeper_hostapi.sessions import (
    AssistantMessage,
    EventData,
    InboxItem,
    InboxSpliced,
    MessageOrigin,
    SessionEvent,
    StoppedRequest,
    SystemMessage,
    ToolResult,
    TurnEnd,
    TurnEndReason,
    TurnStart,
    UserMessage,
    text_content,
)


def log(*datas: EventData) -> list[SessionEvent]:
    return [SessionEvent(seq=i, at=1000 + i, data=d) for i, d in enumerate(datas, start=1)]


def done(turn: int) -> TurnEnd:
    return TurnEnd(turn=turn, reason=TurnEndReason(kind="completed"))


def test_roles_and_origins_are_independent() -> None:
    events = log(
        InboxSpliced(
            op="insert",
            target="next-turn",
            start=0,
            inserted=(InboxItem(id="q1", content=text_content("hello")),),
        ),
        TurnStart(turn=1),
        InboxSpliced(
            op="claim", target="next-turn", start=0, removed_count=1, claim_event_seqs=(1,)
        ),
        SystemMessage(message_id="sys", content=text_content("You are a bard."), turn=1),
        UserMessage(message_id="q1", content=text_content("hello"), turn=1),
        UserMessage(
            message_id="ctx",
            content=text_content("<world>rain</world>"),
            origin=MessageOrigin(kind="context", producer="tavern", form="lore", summary="weather"),
        ),
        AssistantMessage(message_id="a1", content=text_content("Hi "), turn=1),
        ToolResult(message_id="t1", tool_call_id="c1", name="dice", content=text_content("4")),
        SystemMessage(message_id="dev", content=text_content("be brief"), role="developer"),
        UserMessage(
            message_id="s1",
            content=text_content("faster"),
            origin=MessageOrigin(kind="steering"),
        ),
        done(1),
    )
    messages = derive_messages(events)
    summary = [(m.id, m.seq, m.role, m.origin.kind, m.text) for m in messages]
    assert summary == [
        ("sys", 4, "system", "system", "You are a bard."),
        ("q1", 5, "user", "user", "hello"),
        ("ctx", 6, "user", "context", "<world>rain</world>"),
        ("a1", 7, "assistant", "assistant", "Hi "),
        ("t1", 8, "tool", "context", "4"),
        ("dev", 9, "developer", "system", "be brief"),
        ("s1", 10, "user", "steering", "faster"),
    ]
    ctx = messages[2]
    assert ctx.origin == MessageOrigin(
        kind="context", producer="tavern", form="lore", summary="weather"
    )
    assert ctx.content == text_content("<world>rain</world>")
    assert messages[4].origin.producer == "dice"
    assert all(not m.incomplete_turn for m in messages)
    assert all(m.turn == 1 for m in messages)
    assert not has_open_turn(events)


def test_incomplete_turn_marks_only_the_open_turn() -> None:
    events = log(
        TurnStart(turn=1),
        UserMessage(message_id="u1", content=text_content("one")),
        AssistantMessage(message_id="a1", content=text_content("reply"), turn=1),
        done(1),
        UserMessage(
            message_id="between", content=text_content("ctx"), origin=MessageOrigin(kind="context")
        ),
        TurnStart(turn=2),
        UserMessage(message_id="u2", content=text_content("two")),
        AssistantMessage(message_id="a2", content=text_content("par"), turn=2, interrupted=True),
    )
    flags = {m.id: m.incomplete_turn for m in derive_messages(events)}
    assert flags == {"u1": False, "a1": False, "between": False, "u2": True, "a2": True}
    assert has_open_turn(events)


def test_a_turn_cut_by_a_new_turn_stays_incomplete() -> None:
    events = log(
        TurnStart(turn=1),
        UserMessage(message_id="u1", content=text_content("cut")),
        TurnStart(turn=2),
        UserMessage(message_id="u2", content=text_content("next")),
        done(2),
    )
    flags = {m.id: m.incomplete_turn for m in derive_messages(events)}
    assert flags == {"u1": True, "u2": False}


def test_non_message_events_are_skipped_and_empty_log_is_empty() -> None:
    assert derive_messages([]) == []
    assert not has_open_turn([])
    events = log(InboxSpliced(op="cancel", target="next-step", start=0, removed_count=0))
    assert derive_messages(events) == []


def interrupted(turn: int) -> TurnEnd:
    return TurnEnd(turn=turn, reason=TurnEndReason(kind="interrupted"))


def test_stopped_request_is_the_last_interrupted_human_turn_without_reply_text() -> None:
    base: list[EventData] = [
        TurnStart(turn=1),
        UserMessage(message_id="u1", content=text_content("one")),
        AssistantMessage(message_id="a1", content=text_content("reply"), turn=1),
        done(1),
        TurnStart(turn=2),
        UserMessage(
            message_id="ctx", content=text_content("c"), origin=MessageOrigin(kind="context")
        ),
        UserMessage(message_id="u2", content=text_content("two")),
        AssistantMessage(message_id="a2", content=text_content("  "), turn=2, interrupted=True),
    ]
    assert stopped_request(log(*base, interrupted(2))) == StoppedRequest(
        user_event_id=7, turn_start_event_id=5, turn_end_event_id=9
    )
    # Not when: completed, running, reply text exists, only context, or a newer turn started.
    assert stopped_request(log(*base, done(2))) is None
    assert stopped_request(log(*base)) is None
    with_text: list[EventData] = [
        *base[:-1],
        AssistantMessage(message_id="a2", content=text_content("hal"), turn=2),
    ]
    assert stopped_request(log(*with_text, interrupted(2))) is None
    context_only: list[EventData] = [TurnStart(turn=1), base[5], interrupted(1)]
    assert stopped_request(log(*context_only)) is None
    assert stopped_request(log(*base, interrupted(2), TurnStart(turn=3))) is None
    assert stopped_request(log()) is None
