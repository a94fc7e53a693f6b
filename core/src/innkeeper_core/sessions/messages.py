"""Messages derived from a session log: the pure projection lives in ``innkeeper_hostapi`` so
plugins that page history themselves derive exactly what the host derives."""

from __future__ import annotations

from collections.abc import Iterable

from innkeeper_hostapi.messages import (
    complete_message,
    derive_message,
    derive_messages,
    failed_turn,
    has_open_turn,
    stopped_request,
)
from innkeeper_hostapi.providers import ChatMessage, ChatToolCall
from innkeeper_hostapi.sessions import DerivedMessage, ToolCall

__all__ = [
    "chat_message",
    "complete_message",
    "derive_message",
    "derive_messages",
    "failed_turn",
    "has_open_turn",
    "stopped_request",
    "to_chat_calls",
]


def to_chat_calls(calls: Iterable[ToolCall]) -> tuple[ChatToolCall, ...]:
    return tuple(ChatToolCall(id=c.id, name=c.name, arguments=c.arguments) for c in calls)


def chat_message(derived: DerivedMessage) -> ChatMessage | None:
    """The request message of a derived one, or ``None`` when it is not sent.

    User and assistant messages without text are left out, except an assistant message that
    calls tools; a tool result is always sent (a call without its answer is refused by
    OpenAI-compatible servers).
    """
    if derived.role == "tool":
        return ChatMessage(role="tool", content=derived.text, tool_call_id=derived.tool_call_id)
    if derived.role == "assistant" and derived.tool_calls:
        return ChatMessage(
            role="assistant", content=derived.text, tool_calls=to_chat_calls(derived.tool_calls)
        )
    if derived.role in ("user", "assistant") and derived.text:
        return ChatMessage(role=derived.role, content=derived.text)
    return None
