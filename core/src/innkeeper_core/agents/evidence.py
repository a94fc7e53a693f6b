"""What a request leaves as evidence: the parameters and usage recorded, and the
``request/assembly`` of an array a request projector rewrote."""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from innkeeper_hostapi.agents import REQUEST_PROJECTOR, TurnContext
from innkeeper_hostapi.providers import PARAMETER_FIELDS, CallParams, ChatMessage, FinalMessage
from innkeeper_hostapi.sessions import AssemblyEntry, CallParamsRecord, RequestAssembly, Usage

if TYPE_CHECKING:
    from innkeeper_core.agents.agent import Agent

__all__ = ["project_request", "record_params", "usage_of", "wire_message"]


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


async def project_request(
    agent: Agent, context: TurnContext, messages: tuple[ChatMessage, ...], refs: dict[int, int]
) -> tuple[ChatMessage, ...]:
    """Let the installed request projector rewrite the array; record what is sent."""
    projector = agent.manager.slots.get(REQUEST_PROJECTOR)
    if projector is None:
        return messages
    projected = await projector.project(context, messages)
    if projected is None or projected == messages:
        return messages
    entries = tuple(
        AssemblyEntry(role=m.role, ref=refs[id(m)], name=m.name)
        if id(m) in refs
        else AssemblyEntry(role=m.role, content=m.content, name=m.name)
        for m in projected
    )
    wire = [wire_message(m) for m in projected]
    digest = hashlib.sha256(json.dumps(wire, ensure_ascii=False).encode()).hexdigest()
    await agent.manager.sessions.append(
        agent.session_id,
        RequestAssembly(
            turn=context.turn,
            step=context.step,
            projector=projector.name,
            entries=entries,
            sha256=digest,
        ),
    )
    return tuple(projected)


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
