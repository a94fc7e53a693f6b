"""What a request leaves as evidence: the parameters and usage recorded, and the
``request/assembly`` of an array a request projector rewrote."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

from innkeeper_core.sessions.projection import MAX_INLINE_MESSAGE_CHARS, MAX_SESSION_CHARS
from innkeeper_hostapi.agents import REQUEST_PROJECTOR, TurnContext
from innkeeper_hostapi.providers import PARAMETER_FIELDS, CallParams, ChatMessage, FinalMessage
from innkeeper_hostapi.sessions import AssemblyEntry, CallParamsRecord, RequestAssembly, Usage

if TYPE_CHECKING:
    from innkeeper_core.agents.services import TurnServices

__all__ = [
    "WireDigest",
    "project_request",
    "record_params",
    "usage_of",
    "wire_message",
]


def record_params(params: CallParams) -> CallParamsRecord:
    return CallParamsRecord(**{attr: getattr(params, attr) for attr in PARAMETER_FIELDS.values()})


def usage_of(final: FinalMessage) -> Usage | None:
    u = final.usage
    if u is None:
        return None
    return Usage(
        prompt_tokens=u.prompt_tokens,
        completion_tokens=u.completion_tokens,
        total_tokens=u.total_tokens,
        reasoning_tokens=u.reasoning_tokens,
    )


#: ``json.dumps(..., ensure_ascii=False)`` without building an encoder per call.
_JSON: Final = json.JSONEncoder(ensure_ascii=False)


class WireDigest:
    """The ``request/assembly`` digest of a sent array, remembering each message's encoded
    form between steps so a step encodes only the messages it has not sent before.

    A message encodes the same way whenever its fields are equal (messages are immutable), so
    the cache is keyed by the message's value: a projector that rebuilds an unchanged message
    as a new object still hits it. It keeps only messages of the last array digested and, like
    the conversation projection, none over :data:`MAX_INLINE_MESSAGE_CHARS` (a turn's system
    prompt, a deferred body) and at most :data:`MAX_SESSION_CHARS` encoded bytes.
    """

    def __init__(self) -> None:
        self._encoded: dict[ChatMessage, bytes] = {}

    def __call__(self, messages: Sequence[ChatMessage]) -> str:
        """``sha256`` of ``json.dumps([wire_message(m) ...], ensure_ascii=False)``, without
        re-encoding the messages of the previous array that are sent again."""
        previous = self._encoded
        current: dict[ChatMessage, bytes] = {}
        held = 0
        digest = hashlib.sha256(b"[")
        for i, message in enumerate(messages):
            encoded = previous.get(message) or current.get(message)
            if encoded is None:
                encoded = _JSON.encode(wire_message(message)).encode()
            if (
                len(message.content) <= MAX_INLINE_MESSAGE_CHARS
                and held + len(encoded) <= MAX_SESSION_CHARS
                and message not in current
            ):
                current[message] = encoded
                held += len(encoded)
            if i:
                digest.update(b", ")  # json.dumps's item separator
            digest.update(encoded)
        digest.update(b"]")
        self._encoded = current
        return digest.hexdigest()


async def project_request(
    services: TurnServices,
    digest: WireDigest,
    context: TurnContext,
    messages: tuple[ChatMessage, ...],
    refs_of: Callable[[Sequence[ChatMessage]], Sequence[int | None]],
) -> tuple[ChatMessage, ...]:
    """Let the installed request projector rewrite the array; record what is sent.

    ``refs_of`` gives, for messages of ``messages``, the seq of the durable event each was
    built from (``None``: request-only, recorded inline); it is asked only about the messages
    sent, so recording a trimmed request costs what it sends, not the whole history. ``digest``
    is the session's own (it remembers the array it digested last)."""
    projector = services.slots.get(REQUEST_PROJECTOR)
    if projector is None:
        return messages
    projected = await projector.project(context, messages)
    if projected is None or projected == messages:
        return messages
    refs = _named_refs(messages, projected, list(refs_of(projected)), refs_of)
    entries = tuple(
        AssemblyEntry(role=m.role, content=m.content, name=m.name)
        if ref is None
        else AssemblyEntry(role=m.role, ref=ref, name=m.name)
        for m, ref in zip(projected, refs, strict=True)
    )
    await services.sessions.append(
        context.session_id,
        RequestAssembly(
            turn=context.turn,
            step=context.step,
            projector=projector.name,
            entries=entries,
            sha256=digest(projected),
        ),
    )
    return tuple(projected)


def _named_refs(
    built: Sequence[ChatMessage],
    projected: Sequence[ChatMessage],
    refs: list[int | None],
    refs_of: Callable[[Sequence[ChatMessage]], Sequence[int | None]],
) -> list[int | None]:
    """A history message the projector only gave a ``name`` (a speaker's name) is still that
    durable event: recorded by reference, with the name beside it, so naming the speakers
    does not copy the whole history into every ``request/assembly``."""
    renamed = [i for i, ref in enumerate(refs) if ref is None and projected[i].name is not None]
    if not renamed:
        return refs
    # The contents are the history's own str objects (hashes cached): a cheap index.
    index = {(m.role, m.content, m.tool_call_id, m.tool_calls): m for m in built if m.name is None}
    originals = {
        i: index.get((projected[i].role, projected[i].content, None, projected[i].tool_calls))
        for i in renamed
        if projected[i].tool_call_id is None
    }
    found = {i: m for i, m in originals.items() if m is not None}
    for i, ref in zip(found, refs_of(list(found.values())), strict=True):
        refs[i] = ref
    return refs


def wire_message(message: ChatMessage) -> dict[str, Any]:
    """A sent message as ``request/assembly``'s digest covers it (tool fields only when set,
    so the digest of a request without tools is unchanged)."""
    out: dict[str, Any] = {"role": message.role, "content": message.content, "name": message.name}
    if message.tool_call_id is not None:
        out["toolCallId"] = message.tool_call_id
    if message.tool_calls:
        out["toolCalls"] = [
            {"id": c.id, "name": c.name, "arguments": c.arguments} for c in message.tool_calls
        ]
    return out
