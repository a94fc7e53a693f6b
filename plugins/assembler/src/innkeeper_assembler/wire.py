"""The array side of placement, pure: carriers into the host's array, the history budget, and
the request's shape (squashed system messages, speaker names, the continue prefill).

The host builds the array (its system message, then the durable history); the Assembler's
projector and its preview call, in this order, :func:`trim_history` (when a source gave a
budget), :func:`project` and :func:`shape_request`. History messages stay the very objects the
host built unless the shape rewrites them (names), so the host records them by reference.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import msgspec

from innkeeper_hostapi.assembly import RequestKind, RequestShape
from innkeeper_hostapi.providers import ChatMessage

__all__ = [
    "REPLY_RESERVE_TOKENS",
    "SQUASH_JOINER",
    "Carrier",
    "estimate_tokens",
    "project",
    "shape_request",
    "trim_history",
]

#: Tokens SillyTavern reserves for priming the reply.
REPLY_RESERVE_TOKENS: Final = 3
#: How squashed system messages are joined (SillyTavern: one newline).
SQUASH_JOINER: Final = "\n"


@dataclass(frozen=True, slots=True)
class Carrier:
    """A request-only message: ``depth`` ``None`` means the start of the chat; ``chat`` marks
    the chat's first message (a greeting), which counts as history; ``merge`` ``False`` keeps
    it apart when system messages are squashed."""

    depth: int | None
    order: int
    message: ChatMessage
    keys: tuple[str, ...]
    chat: bool = False
    merge: bool = True


def _prefix(messages: Sequence[ChatMessage]) -> int:
    count = 0
    while count < len(messages) and messages[count].role in ("system", "developer"):
        count += 1
    return count


def project(
    messages: Sequence[ChatMessage], carriers: Sequence[Carrier]
) -> tuple[tuple[ChatMessage, ...], tuple[int, ...]]:
    """Insert ``carriers`` into ``messages`` (leading system/developer messages, then history).

    Chat-start carriers go first, in their order; a ``chat`` carrier (the greeting) then counts
    as the oldest history message. Depth ``d`` goes before the last ``d`` history messages (0 =
    after the last one), clamped to the start of the history (the greeting included). A depth
    that would fall inside a tool exchange (between an assistant message that calls tools and
    its ``tool`` answers, which servers require to follow it directly) moves before that
    assistant message. The history messages are the same objects (the host records them by
    reference). Returns the array and the indexes of the request-only messages in it.
    """
    prefix = _prefix(messages)
    first = [c.message for c in carriers if c.depth is None and c.chat]
    history = [*first, *messages[prefix:]] if first else messages[prefix:]
    count = len(history)
    out: list[ChatMessage] = list(messages[:prefix])
    inserted: list[int] = []
    if first:  # the chat-start messages come before the greeting, the history's first one
        out.extend(c.message for c in carriers if c.depth is None and not c.chat)
        inserted.extend(range(prefix, len(out)))
    at: dict[int, list[ChatMessage]] = {}
    for carrier in carriers:  # already in chronological order (see placement._carriers)
        if carrier.depth is None:
            if first:
                continue
            index = 0
        else:
            index = max(0, count - carrier.depth)
        while 0 < index < count and history[index].role == "tool":
            index -= 1
        at.setdefault(index, []).append(carrier.message)
    done = 0
    # The history is copied in runs between insertion points: a long chat costs slices, not
    # a Python step per message (issue 18 "Long stories").
    for index in sorted(at):
        if index > count:
            break  # a negative depth falls after the end: never sent, as before
        out.extend(history[done:index])
        done = index
        for message in at[index]:
            inserted.append(len(out))
            out.append(message)
    out.extend(history[done:])
    if first:  # the greeting is request-only too; it sits among the first messages
        start = prefix
        for message in first:
            found = next(j for j in range(start, len(out)) if out[j] is message)
            inserted.append(found)
            start = found + 1
        inserted.sort()
    return tuple(out), tuple(inserted)


def _named(message: ChatMessage, shape: RequestShape, own: str = "") -> ChatMessage:
    name = shape.user_name if message.role == "user" else own or shape.assistant_name
    if not name:
        return message
    if shape.history_names == "name":
        return msgspec.structs.replace(message, name=name)
    return msgspec.structs.replace(message, content=f"{name}: {message.content}")


def shape_request(
    messages: Sequence[ChatMessage],
    request_only: Sequence[int],
    carriers: Sequence[Carrier],
    shape: RequestShape | None,
    kind: RequestKind = "normal",
) -> tuple[tuple[ChatMessage, ...], tuple[int, ...]]:
    """Apply ``shape`` to a projected array (see :class:`RequestShape`).

    ``request_only`` are the indexes :func:`project` returned; ``carriers`` the plan's (their
    ``merge`` flags). Speaker names apply to history ``user``/``assistant`` messages (a
    renamed message is a new object: the host records it inline); the continue prefill moves
    the last history message to the end; squashing merges runs of request-only system messages
    without a name. Returns the array and its request-only indexes.
    """
    if shape is None:
        return tuple(messages), tuple(request_only)
    carried = set(request_only)
    apart = {id(c.message) for c in carriers if not c.merge}
    # Each history reply's own speaker (a group chat), matched from the newest backwards.
    own: dict[int, str] = {}
    if shape.assistant_names:
        names = iter(reversed(shape.assistant_names))
        for index in range(len(messages) - 1, -1, -1):
            if index not in carried and messages[index].role == "assistant":
                found = next(names, None)
                if found is None:
                    break
                own[index] = found
    rows: list[tuple[ChatMessage, bool]] = []
    for index, message in enumerate(messages):
        is_carrier = index in carried
        if (
            not is_carrier
            and shape.history_names != "none"
            and message.role in ("user", "assistant")
        ):
            message = _named(message, shape, own.get(index, ""))
        rows.append((message, is_carrier))
    if kind == "continue" and shape.continue_prefill:
        last = next((i for i in range(len(rows) - 1, -1, -1) if not rows[i][1]), None)
        if last is not None and last >= _prefix(messages) and rows[last][0].role == "assistant":
            rows.append(rows.pop(last))
    if shape.squash_system:
        squashed: list[tuple[ChatMessage, bool]] = []
        run: list[ChatMessage] = []

        def mergeable(row: tuple[ChatMessage, bool]) -> bool:
            message, is_carrier = row
            return (
                is_carrier
                and message.role == "system"
                and message.name is None
                and id(message) not in apart
            )

        def flush() -> None:
            if len(run) == 1:
                squashed.append((run[0], True))
            elif run:
                text = SQUASH_JOINER.join(m.content for m in run)
                squashed.append((ChatMessage(role="system", content=text), True))
            run.clear()

        for row in rows:
            if mergeable(row):
                run.append(row[0])
                continue
            flush()
            squashed.append(row)
        flush()
        rows = squashed
    return tuple(m for m, _ in rows), tuple(i for i, (_, c) in enumerate(rows) if c)


def estimate_tokens(message: ChatMessage) -> int:
    """The token estimate of one message: ``ceil(characters / 3.5)`` (the estimator Tavern's
    world-info budget uses), at least 1. Computed as ``ceil(2c / 7)`` in integers, which is
    the same number."""
    return (2 * len(message.content) + 6) // 7 or 1


def _is_chat(carrier: Carrier) -> bool:
    """A ``chat`` carrier (the greeting) is the chat's first message."""
    return carrier.depth is None and carrier.chat


def _sent_sizes(history: Sequence[ChatMessage], shape: RequestShape | None) -> list[int]:
    """Each history message's length as it is sent: with the speaker's name before it when
    ``shape`` prefixes names (:func:`shape_request` names the same messages the same way)."""
    sizes = [len(m.content) for m in history]
    if shape is None or shape.history_names != "content":
        return sizes
    names = iter(reversed(shape.assistant_names))
    for index in range(len(history) - 1, -1, -1):
        message = history[index]
        if message.role == "assistant":
            own = next(names, None) if shape.assistant_names else None
            name = own or shape.assistant_name
        elif message.role == "user":
            name = shape.user_name
        else:
            continue
        if name:
            sizes[index] += len(name) + 2
    return sizes


def trim_history(
    messages: Sequence[ChatMessage],
    carriers: Sequence[Carrier],
    tokens: int,
    shape: RequestShape | None = None,
) -> tuple[tuple[ChatMessage, ...], tuple[Carrier, ...], int]:
    """Keep the newest history messages that fit ``tokens`` (SillyTavern's rule).

    Leading system/developer messages and request-only carriers are always sent and counted
    first (plus :data:`REPLY_RESERVE_TOKENS`); then history messages, newest first, whole, while
    they fit; the first that does not fit ends the walk (it and everything older are left out).
    A history message counts as sent, with the speaker's name ``shape`` puts before it. A
    chat-start carrier in a chat role (the greeting) is the oldest chat message. A kept
    ``tool`` answer keeps the assistant message that called it. Returns the messages, the
    carriers and how many chat messages were left out.
    """
    prefix = 0
    while prefix < len(messages) and messages[prefix].role in ("system", "developer"):
        prefix += 1
    chat_start = [c for c in carriers if _is_chat(c)]
    fixed = [c for c in carriers if not _is_chat(c)]
    room = tokens - REPLY_RESERVE_TOKENS
    room -= sum(estimate_tokens(m) for m in messages[:prefix])
    room -= sum(estimate_tokens(c.message) for c in fixed)
    history = messages[prefix:]
    sizes = _sent_sizes(history, shape)
    keep = len(history)
    while keep > 0:
        start = keep - 1
        message = history[start]
        if message.role == "tool":
            while start > 0 and history[start].role == "tool":
                start -= 1  # a tool exchange is kept or left out as a whole
            cost = sum((2 * n + 6) // 7 or 1 for n in sizes[start:keep])
        else:
            cost = (2 * sizes[start] + 6) // 7 or 1  # estimate_tokens, inlined
        if cost > room:
            break
        room -= cost
        keep = start
    kept_start: list[Carrier] = []
    for carrier in reversed(chat_start if keep == 0 else []):
        if estimate_tokens(carrier.message) > room:
            break
        room -= estimate_tokens(carrier.message)
        kept_start.append(carrier)
    dropped = keep + len(chat_start) - len(kept_start)
    if not dropped:
        return tuple(messages), tuple(carriers), 0
    out_carriers = tuple(c for c in carriers if not _is_chat(c) or c in kept_start)
    return (*messages[:prefix], *history[keep:]), out_carriers, dropped
