"""Messages derived from a session log (``docs/contract/sessions.md#messages``).

Pure functions over :class:`~innkeeper_hostapi.sessions.SessionEvent` shared by the host (its
``messages`` read and live projection) and plugins that page history themselves (the Tavern v2
``/messages`` route).

``role`` is what the model sees; ``origin.kind`` is what a frontend should show. They are kept
independent: a runtime context injection is ``role: "user"`` with ``origin.kind: "context"``, and
a steering input is ``role: "user"`` with ``origin.kind: "steering"``. Tool results keep role
``tool`` and read as context.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .sessions import (
    ORIGIN_PRODUCER_MAX_CHARS,
    AssistantMessage,
    DerivedMessage,
    FailedTurn,
    MessageOrigin,
    SessionEvent,
    StoppedRequest,
    SystemMessage,
    ToolResult,
    TurnEnd,
    TurnStart,
    UserMessage,
    text_of,
)

__all__ = [
    "complete_message",
    "derive_message",
    "derive_messages",
    "failed_turn",
    "has_open_turn",
    "stopped_request",
]

_ASSISTANT_ORIGIN = MessageOrigin(kind="assistant")


def derive_messages(events: Iterable[SessionEvent]) -> list[DerivedMessage]:
    """Project ``events`` (oldest first) to messages.

    A message inside a turn that has no ``turn/end`` among ``events`` (the turn is running, or
    the log was cut inside it by a fork or a crash) gets ``incomplete_turn=True``. A message's
    turn is the enclosing ``turn/start``..``turn/end`` span; messages outside every turn (e.g.
    context appended between turns) are never incomplete.
    """
    out: list[DerivedMessage] = []
    open_turn: int | None = None
    # Indexes in ``out`` of the messages of the currently open turn.
    pending: list[int] = []
    for event in events:
        data = event.data
        if isinstance(data, TurnStart):
            # A new turn while one is open means the old one was cut: it stays incomplete.
            open_turn = data.turn
            pending = []
            continue
        if isinstance(data, TurnEnd):
            for index in pending:
                out[index] = complete_message(out[index])
            open_turn = None
            pending = []
            continue
        message = derive_message(event, open_turn)
        if message is None:
            continue
        if open_turn is not None:
            pending.append(len(out))
        out.append(message)
    return out


def has_open_turn(events: Iterable[SessionEvent]) -> bool:
    """Whether the last ``turn/start`` among ``events`` has no matching ``turn/end``."""
    open_turn = False
    for event in events:
        if isinstance(event.data, TurnStart):
            open_turn = True
        elif isinstance(event.data, TurnEnd):
            open_turn = False
    return open_turn


def _last_ended_turn(events: Sequence[SessionEvent], kind: str) -> tuple[int, int] | None:
    """``(start index, end index)`` of the last turn if it ended with reason ``kind`` and no
    turn started after it; else ``None``."""
    end_index = next(
        (i for i in range(len(events) - 1, -1, -1) if isinstance(events[i].data, TurnEnd)), None
    )
    if end_index is None:
        return None
    end = events[end_index].data
    assert isinstance(end, TurnEnd)
    if end.reason.kind != kind:
        return None
    # A turn started after this end is running: the ended one is no longer the last.
    if any(isinstance(e.data, TurnStart) for e in events[end_index + 1 :]):
        return None
    start_index = next(
        (i for i in range(end_index - 1, -1, -1) if _starts(events[i], end.turn)), None
    )
    return None if start_index is None else (start_index, end_index)


def _first_user_seq(events: Sequence[SessionEvent]) -> int | None:
    return next(
        (e.seq for e in events if isinstance(e.data, UserMessage) and e.data.origin.kind == "user"),
        None,
    )


def stopped_request(events: Sequence[SessionEvent]) -> StoppedRequest | None:
    """The last turn, if it ended ``interrupted`` after a real user message (``origin.kind``
    ``user``) and before any assistant text; else ``None``. Running turns, completed replies and
    context-only turns never qualify."""
    span = _last_ended_turn(events, "interrupted")
    if span is None:
        return None
    start_index, end_index = span
    inside = events[start_index + 1 : end_index]
    if any(
        isinstance(e.data, AssistantMessage) and text_of(e.data.content).strip() for e in inside
    ):
        return None
    user_seq = _first_user_seq(inside)
    if user_seq is None:
        return None
    return StoppedRequest(
        user_event_id=user_seq,
        turn_start_event_id=events[start_index].seq,
        turn_end_event_id=events[end_index].seq,
    )


def failed_turn(events: Sequence[SessionEvent]) -> FailedTurn | None:
    """The last turn, if it ended with ``error`` and no turn started after it; else ``None``."""
    span = _last_ended_turn(events, "error")
    if span is None:
        return None
    start_index, end_index = span
    end = events[end_index].data
    assert isinstance(end, TurnEnd)
    return FailedTurn(
        turn=end.turn,
        turn_start_event_id=events[start_index].seq,
        turn_end_event_id=events[end_index].seq,
        user_event_id=_first_user_seq(events[start_index + 1 : end_index]),
        code=end.reason.code,
        message=end.reason.message,
    )


def _starts(event: SessionEvent, turn: int) -> bool:
    return isinstance(event.data, TurnStart) and event.data.turn == turn


def complete_message(message: DerivedMessage) -> DerivedMessage:
    """``message`` with ``incomplete_turn`` cleared (its turn ended)."""
    return DerivedMessage(
        id=message.id,
        seq=message.seq,
        role=message.role,
        text=message.text,
        content=message.content,
        origin=message.origin,
        incomplete_turn=False,
        turn=message.turn,
        tool_calls=message.tool_calls,
        tool_call_id=message.tool_call_id,
        is_error=message.is_error,
        continues=message.continues,
    )


def derive_message(event: SessionEvent, open_turn: int | None) -> DerivedMessage | None:
    """The message ``event`` derives to inside ``open_turn`` (``None`` for non-messages)."""
    data = event.data
    incomplete = open_turn is not None
    if isinstance(data, UserMessage | SystemMessage):
        return DerivedMessage(
            id=data.message_id,
            seq=event.seq,
            role="user" if isinstance(data, UserMessage) else data.role,
            text=text_of(data.content),
            content=data.content,
            origin=data.origin,
            incomplete_turn=incomplete,
            turn=data.turn if data.turn is not None else open_turn,
        )
    if isinstance(data, AssistantMessage):
        return DerivedMessage(
            id=data.message_id,
            seq=event.seq,
            role="assistant",
            text=text_of(data.content),
            content=data.content,
            origin=_ASSISTANT_ORIGIN,
            incomplete_turn=incomplete,
            turn=data.turn,
            tool_calls=data.tool_calls,
            continues=data.continues,
        )
    if isinstance(data, ToolResult):
        return DerivedMessage(
            id=data.message_id,
            seq=event.seq,
            role="tool",
            text=text_of(data.content),
            content=data.content,
            origin=MessageOrigin(
                kind="context", producer=data.name[:ORIGIN_PRODUCER_MAX_CHARS], form="tool"
            ),
            incomplete_turn=incomplete,
            turn=data.turn if data.turn is not None else open_turn,
            tool_call_id=data.tool_call_id,
            is_error=data.is_error,
        )
    return None
