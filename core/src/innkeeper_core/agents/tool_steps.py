"""The tool part of a turn's steps: the history sent with tool messages, results as events,
and the calls a crash left without a result."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from innkeeper_core.agents.hub import Partial
from innkeeper_core.agents.turn_errors import TurnFailed, TurnInterrupted
from innkeeper_core.sessions.messages import to_chat_calls
from innkeeper_core.tools.runner import CallOutcome, interrupted
from innkeeper_hostapi.agents import PRE_STEP, PreStep, TurnContext
from innkeeper_hostapi.providers import ChatMessage, ChatToolCall
from innkeeper_hostapi.sessions import (
    AssistantMessage,
    SandboxMode,
    SessionEvent,
    ToolCall,
    ToolResult,
    TurnStart,
    text_content,
)

if TYPE_CHECKING:
    from innkeeper_core.agents.interrupts import TurnInterrupts
    from innkeeper_core.agents.services import TurnServices
    from innkeeper_hostapi.tools import SandboxModeName

__all__ = [
    "MISSING_RESULT",
    "answer_calls",
    "answer_missing",
    "pre_step",
    "result_event",
    "run_tools",
    "unanswered_calls",
]

log = logging.getLogger("innkeeper.agents")


#: What the model reads for a call whose result is not in the history (a fork cut between the
#: call and its result); request-only, never written.
MISSING_RESULT = "interrupted: no result was recorded for this call"


def answer_missing(messages: list[ChatMessage]) -> list[ChatMessage]:
    """``messages`` where every tool call is directly followed by an answer: calls the history
    has no result for get a request-only ``tool`` message (servers refuse unanswered calls)."""
    out: list[ChatMessage] = []
    pending: list[str] = []
    for message in messages:
        if message.role == "tool" and message.tool_call_id in pending:
            pending.remove(message.tool_call_id)
        elif pending:
            out.extend(
                ChatMessage(role="tool", content=MISSING_RESULT, tool_call_id=call_id)
                for call_id in pending
            )
            pending = []
        out.append(message)
        if message.role == "assistant" and message.tool_calls:
            pending = [call.id for call in message.tool_calls]
    out.extend(
        ChatMessage(role="tool", content=MISSING_RESULT, tool_call_id=call_id)
        for call_id in pending
    )
    return out


def result_event(
    message_id: str, call: ChatToolCall, outcome: CallOutcome, turn: int
) -> ToolResult:
    return ToolResult(
        message_id=message_id,
        tool_call_id=call.id,
        name=call.name,
        content=text_content(outcome.content),
        turn=turn,
        is_error=outcome.is_error,
    )


def unanswered_calls(events: Sequence[SessionEvent], turn: int) -> list[ChatToolCall]:
    """The tool calls of ``turn`` (the open turn of a log) that have no ``tool/result``."""
    start = next(
        (
            i
            for i in range(len(events) - 1, -1, -1)
            if isinstance(events[i].data, TurnStart) and events[i].data.turn == turn  # type: ignore[union-attr]
        ),
        None,
    )
    if start is None:
        return []
    calls: dict[str, ToolCall] = {}
    for event in events[start:]:
        data = event.data
        if isinstance(data, AssistantMessage):
            calls.update((c.id, c) for c in data.tool_calls)
        elif isinstance(data, ToolResult):
            calls.pop(data.tool_call_id, None)
    return list(to_chat_calls(calls.values()))


async def run_tools(
    services: TurnServices,
    context: TurnContext,
    calls: tuple[ChatToolCall, ...],
    pinned: SandboxModeName | None,
    *,
    workspace_id: str | None,
    interrupts: TurnInterrupts,
) -> None:
    """Run the calls one after another, recording each result as soon as it is known. A
    cancel interrupts the running call; it and the calls after it get interrupted results."""
    runner = services.tools
    session_id = context.session_id
    for index, call in enumerate(calls):
        started = {"turn": context.turn, "step": context.step, "callId": call.id}
        services.hub.publish(session_id, Partial("tool/started", {**started, "name": call.name}))
        try:
            if interrupts.cancelled:
                raise TurnInterrupted
            outcome = await interrupts.run(
                runner.run(
                    call,
                    session_id=session_id,
                    turn=context.turn,
                    step=context.step,
                    delegation_depth=context.delegation_depth,
                    workspace_id=workspace_id,
                    pinned=pinned,
                )
            )
        except TurnInterrupted:
            reason = interrupts.reason or "the turn was cancelled"
            await answer_calls(services, context, calls[index:], interrupted(reason))
            raise
        log.info(
            "session %s turn %d tool %s: %s",
            session_id,
            context.turn,
            call.name,
            outcome.status,
        )
        await answer_calls(services, context, (call,), outcome)


async def answer_calls(
    services: TurnServices,
    context: TurnContext,
    calls: tuple[ChatToolCall, ...],
    outcome: CallOutcome,
) -> None:
    """Record ``outcome`` as the result of each of ``calls``, in one transaction."""
    await services.store.append_many(
        context.session_id,
        [result_event(services.new_id(), call, outcome, context.turn) for call in calls],
    )


async def pre_step(services: TurnServices, context: TurnContext) -> SandboxModeName | None:
    """``agent/pre-step``: serial listeners; a pinned mode is recorded when it differs."""
    session_id = context.session_id
    notice = PreStep(
        session_id=session_id,
        turn=context.turn,
        step=context.step,
        delegation_depth=context.delegation_depth,
        claim_seq=context.claim_seq,
    )
    try:
        await services.bus.emit(PRE_STEP, notice)
    except Exception as exc:
        raise TurnFailed("PRE_STEP_FAILED", type(exc).__name__) from exc
    if notice.pinned is None:
        return None
    if (await services.policy.effective(session_id)).sandbox_mode != notice.pinned:
        await services.sessions.append(session_id, SandboxMode(mode=notice.pinned))
    return notice.pinned
