"""Messages derived from a session log (``spec/API.md`` "Message origin and display semantics").

``role`` is what the model sees; ``origin.kind`` is what a frontend should show. They are kept
independent: a runtime context injection is ``role: "user"`` with ``origin.kind: "context"``, and
a steering input is ``role: "user"`` with ``origin.kind: "steering"``. Tool results keep role
``tool`` and read as context.
"""

from __future__ import annotations

from collections.abc import Iterable

from innkeeper_hostapi.sessions import (
    ORIGIN_PRODUCER_MAX_CHARS,
    AssistantMessage,
    DerivedMessage,
    MessageOrigin,
    SessionEvent,
    SystemMessage,
    ToolResult,
    TurnEnd,
    TurnStart,
    UserMessage,
    text_of,
)

__all__ = ["derive_messages", "has_open_turn"]

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
                out[index] = _complete(out[index])
            open_turn = None
            pending = []
            continue
        message = _message(event, open_turn)
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


def _complete(message: DerivedMessage) -> DerivedMessage:
    return DerivedMessage(
        id=message.id,
        seq=message.seq,
        role=message.role,
        text=message.text,
        content=message.content,
        origin=message.origin,
        incomplete_turn=False,
        turn=message.turn,
    )


def _message(event: SessionEvent, open_turn: int | None) -> DerivedMessage | None:
    data = event.data
    incomplete = open_turn is not None
    if isinstance(data, UserMessage):
        return DerivedMessage(
            id=data.message_id,
            seq=event.seq,
            role="user",
            text=text_of(data.content),
            content=data.content,
            origin=data.origin,
            incomplete_turn=incomplete,
            turn=data.turn if data.turn is not None else open_turn,
        )
    if isinstance(data, SystemMessage):
        return DerivedMessage(
            id=data.message_id,
            seq=event.seq,
            role=data.role,
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
        )
    return None
