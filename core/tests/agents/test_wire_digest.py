"""The ``request/assembly`` digest stays the digest of the whole sent array when unchanged
messages are reused from one step to the next."""

from __future__ import annotations

import hashlib
import json

from innkeeper_core.agents.evidence import WireDigest, wire_message
from innkeeper_core.sessions.projection import MAX_INLINE_MESSAGE_CHARS
from innkeeper_hostapi.providers import ChatMessage, ChatToolCall


def whole(messages: list[ChatMessage]) -> str:
    wire = [wire_message(m) for m in messages]
    return hashlib.sha256(json.dumps(wire, ensure_ascii=False).encode()).hexdigest()


def test_digest_equals_the_whole_array_digest_across_steps() -> None:
    digest = WireDigest()
    assert digest([]) == whole([])
    history = [
        ChatMessage(role="user", content="Hé — “quotes” and \\ backslash\n", name="Ann"),
        ChatMessage(
            role="assistant",
            content="",
            tool_calls=(ChatToolCall(id="c1", name="look", arguments='{"at": "door"}'),),
        ),
        ChatMessage(role="tool", content="a door", tool_call_id="c1"),
    ]
    steps = [
        [ChatMessage(role="system", content="x" * (MAX_INLINE_MESSAGE_CHARS + 1)), *history],
        [ChatMessage(role="system", content="prompt 2"), *history],
        # A message equal to a cached one but another object, and one reordered.
        [history[2], ChatMessage(role="user", content=history[0].content, name="Ann")],
        [*history, ChatMessage(role="assistant", content="日本語 reply")],
    ]
    for step in steps:
        assert digest(step) == whole(step)


def test_a_new_message_in_a_freed_object_slot_is_encoded_anew() -> None:
    digest = WireDigest()
    first = ChatMessage(role="user", content="one")
    assert digest([first]) == whole([first])
    del first  # its id may now be reused by the next object
    second = ChatMessage(role="user", content="two")
    assert digest([second]) == whole([second])
