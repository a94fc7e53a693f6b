"""The chat a request's activation scans: the newest messages of a session, read from the host.

A long story's whole chat is counted by the host, never copied or walked here (issue 18 "Long
stories"): :meth:`SessionController.recent_messages` returns the newest chat messages with text
and how many there are, so a turn reads its scan window (128 messages / 64 KiB by default), not
the story.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import msgspec

from innkeeper_hostapi.agents import TurnContext
from innkeeper_hostapi.sessions import (
    DerivedMessage,
    InboxItem,
    Role,
    SessionController,
    SessionNotFound,
    text_of,
)
from innkeeper_tavern.pure.worldbook import ActivationMessage, ScanLimits

from .adapters import ActivationInput

__all__ = ["ChatHistory", "read_history"]


@dataclass(frozen=True, slots=True)
class ChatHistory:
    """The chat as activation and the macros see it: the scanned tail and a few counts."""

    activation: ActivationInput
    has_assistant: bool
    last_user: str
    last_char: str
    last_message: str
    message_count: int
    #: User messages with text, this request's claimed input included (the Author's Note
    #: frequency counts these).
    user_count: int = 0


#: The roles of the chat activation scans.
_CHAT_ROLES: Final[tuple[Role, ...]] = ("user", "assistant")


async def _newest_text(
    sessions: SessionController | None,
    session_id: str | None,
    durable: Sequence[DerivedMessage],
    counts: Mapping[Role, int],
    role: Role,
) -> str:
    """The text of the newest chat message of ``role``: from the tail already read, else (the
    tail holds none, but the session has some) read back on its own."""
    found = next((m.text for m in reversed(durable) if m.role == role), None)
    if found is not None or not counts.get(role) or sessions is None or not session_id:
        return found or ""
    try:
        newest = await sessions.recent_messages(session_id, roles=(role,), limit=1)
    except SessionNotFound:
        return ""
    return newest.messages[-1].text if newest.messages else ""


def _ids_in(claimed: Sequence[InboxItem], durable: Sequence[DerivedMessage]) -> bool:
    ids = {m.id for m in durable}
    return all(item.id in ids for item in claimed)


async def _whole_chat(sessions: SessionController, session_id: str) -> list[DerivedMessage]:
    try:
        snapshot = await sessions.messages(session_id, roles=_CHAT_ROLES)
    except SessionNotFound:
        return []
    return [m for m in snapshot.messages if m.text]


async def read_history(
    sessions: SessionController | None,
    session_id: str | None,
    turn: TurnContext | None,
    limits: ScanLimits,
) -> ChatHistory:
    """The durable chat of ``session_id`` plus the turn's claimed input not yet in it, bounded
    by ``limits`` (newest first), with the activation metadata the audit records."""
    claimed = turn.claimed if turn is not None else ()
    # ``durable``: the newest chat messages with text, enough for the scan window, the
    # claimed input and the newest message; ``durable_count``: how many the session has.
    durable: list[DerivedMessage] = []
    counts: dict[Role, int] = {}
    if session_id and sessions is not None:
        try:
            recent = await sessions.recent_messages(
                session_id, roles=_CHAT_ROLES, limit=max(1, limits.max_messages + len(claimed))
            )
        except SessionNotFound:
            recent = None
        if recent is not None:
            durable = list(recent.messages)
            counts = dict(recent.text_counts)
            if len(durable) < sum(counts.values()) and not _ids_in(claimed, durable):
                # A claimed item older than the tail (a real turn's claim is its newest
                # input): whether it is in the chat takes the whole chat.
                durable = await _whole_chat(sessions, session_id)
    durable_count = sum(counts.values())
    has_assistant = counts.get("assistant", 0) > 0
    durable_ids = {m.id for m in durable}
    pending = [
        ActivationMessage(id=item.id, role="user", text=text_of(item.content))
        for item in claimed
        if item.id not in durable_ids
    ]
    chat_length = durable_count + len(pending)
    first = max(0, chat_length - limits.max_messages) if limits.max_messages else chat_length
    # ``durable`` starts at index ``durable_count - len(durable)`` of the whole chat.
    start = min(first, durable_count) - (durable_count - len(durable))
    tail = [
        ActivationMessage(
            id=m.id, role="assistant" if m.role == "assistant" else "user", text=m.text
        )
        for m in durable[start:]
    ] + pending[max(0, first - durable_count) :]
    bounded: list[ActivationMessage] = []
    used = 0
    truncated = chat_length > limits.max_messages
    for item in reversed(tail):
        room = limits.max_chars - used
        if room <= 0:
            truncated = True
            break
        if len(item.text) > room:
            item = msgspec.structs.replace(item, text=item.text[:room])
            truncated = True
        bounded.append(item)
        used += len(item.text) + 1
    bounded.reverse()
    last_user = (
        pending[-1].text
        if pending
        else await _newest_text(sessions, session_id, durable, counts, "user")
    )
    last_char = await _newest_text(sessions, session_id, durable, counts, "assistant")
    last_message = pending[-1].text if pending else durable[-1].text if durable else ""
    metadata = {
        "kind": "durable-plus-claimed-input" if turn is not None else "durable-history-only",
        "durableMessageCount": durable_count,
        "claimedMessageCount": len(claimed),
        "includedClaimedMessageCount": len(pending),
        "duplicateClaimedMessageCount": len(claimed) - len(pending),
        "scannedMessageCount": len(bounded),
        "scannedCharacters": sum(len(m.text) for m in bounded),
        "maxMessages": limits.max_messages,
        "maxCharacters": limits.max_chars,
        "truncated": truncated,
        "claimEventSeq": turn.claim_seq if turn is not None else None,
    }
    return ChatHistory(
        activation=ActivationInput(
            messages=tuple(bounded),
            text="\n".join(m.text for m in bounded),
            metadata=metadata,
            chat_length=chat_length,
        ),
        has_assistant=has_assistant,
        last_user=last_user,
        last_char=last_char,
        last_message=last_message,
        message_count=chat_length,
        user_count=counts.get("user", 0) + len(pending),
    )
