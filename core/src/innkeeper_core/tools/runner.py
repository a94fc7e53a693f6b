"""Runs one tool call: arguments, guards, policy (and approval), the handler, a bounded result.

Order (``docs/sessions.md`` "Tools, sandbox and approval"): an unknown tool or invalid
arguments are answered at once; then every guard, in order (the first reason blocks, a guard
that fails blocks too: guards are safety checks); then the tool's risk against the sandbox
mode and approval policy (a call that needs a person waits for one); then the handler, under a
timeout. The handler runs in its own task, registered with the tool, so unloading the tool's
plugin interrupts a running call instead of leaving it behind.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from dataclasses import dataclass
from typing import Any

from innkeeper_core.tools.policy import ToolPolicy, decide
from innkeeper_core.tools.registry import ArgumentsInvalid, ToolEntry, ToolRegistry, bounded
from innkeeper_hostapi.providers import ChatToolCall
from innkeeper_hostapi.tools import (
    MAX_GUARD_REASON_CHARS,
    MAX_TOOL_ERROR_CHARS,
    MAX_TOOL_RESULT_CHARS,
    SandboxModeName,
    ToolError,
    ToolInvocation,
    stricter,
)

__all__ = ["CallOutcome", "ToolRunner"]

log = logging.getLogger("innkeeper.tools")


@dataclass(frozen=True, slots=True)
class CallOutcome:
    """What the model reads for one call; ``status`` is body-free, for logs and events."""

    content: str
    is_error: bool
    status: (
        str  # ok | error | invalid | unknown | blocked | refused | denied | timeout | interrupted
    )


def _error(status: str, message: str) -> CallOutcome:
    return CallOutcome(bounded(message, MAX_TOOL_ERROR_CHARS), True, status)


def interrupted(reason: str) -> CallOutcome:
    """The result recorded for a call that was stopped (cancel, unload, restart, step limit)."""
    return _error("interrupted", f"interrupted: {reason}")


class ToolRunner:
    """Runs calls against the registry and the policy; one instance per host."""

    def __init__(
        self, registry: ToolRegistry, policy: ToolPolicy, *, call_timeout_s: float
    ) -> None:
        self.registry = registry
        self.policy = policy
        self.call_timeout_s = call_timeout_s

    async def run(
        self,
        call: ChatToolCall,
        *,
        session_id: str,
        turn: int,
        step: int,
        delegation_depth: int,
        workspace_id: str | None,
        pinned: SandboxModeName | None,
    ) -> CallOutcome:
        entry = self.registry.get(call.name)
        if entry is None:
            return _error("unknown", f"error: there is no tool named {call.name!r}")
        try:
            arguments = entry.parse(call.arguments)
        except ArgumentsInvalid as exc:
            return _error("invalid", f"error: {exc}")
        effective = await self.policy.effective(session_id)
        mode = (
            effective.sandbox_mode if pinned is None else stricter(pinned, effective.sandbox_mode)
        )
        invocation = ToolInvocation(
            session_id=session_id,
            turn=turn,
            step=step,
            call_id=call.id,
            name=call.name,
            arguments=arguments,
            sandbox_mode=mode,
            delegation_depth=delegation_depth,
            workspace_id=workspace_id,
        )
        reason = await self._guards(invocation)
        if reason is not None:
            return _error("blocked", f"blocked: {reason}")
        verdict = decide(entry.risk, mode, effective.approval_policy)
        if verdict == "refuse":
            return _error(
                "refused",
                f"refused: the tool's risk {entry.risk} is above the sandbox mode {mode} "
                f"and the approval policy is {effective.approval_policy}",
            )
        if verdict == "ask":
            info = self.policy.new_pending(
                session_id, call.id, call.name, turn, entry.risk, effective, mode
            )
            answer = await self.policy.ask(info, self.policy.defaults.approval_timeout_s)
            if answer == "deny":
                return _error("denied", "refused: a person denied this call")
            if answer == "timeout":
                return _error("timeout", "refused: nobody approved this call in time")
        return await self._handle(entry, invocation)

    async def _guards(self, invocation: ToolInvocation) -> str | None:
        for guard in self.registry.guards.items:
            try:
                result = guard.func(invocation)
                reason = await result if inspect.isawaitable(result) else result
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("tool guard %s failed: %s", guard.name, type(exc).__name__)
                return f"the guard {guard.name} failed ({type(exc).__name__})"
            if reason:
                return bounded(str(reason), MAX_GUARD_REASON_CHARS)
        return None

    async def _handle(self, entry: ToolEntry, invocation: ToolInvocation) -> CallOutcome:
        timeout = entry.timeout_s or self.call_timeout_s
        task = asyncio.get_running_loop().create_task(
            entry.handler(invocation), name=f"tool:{entry.owner}:{entry.name}"
        )
        entry.running.add(task)
        task.add_done_callback(entry.running.discard)
        try:
            value = await asyncio.wait_for(asyncio.shield(task), timeout)
        except TimeoutError:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            return _error("timeout", f"error: the tool did not finish within {timeout:g} s")
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                task.cancel()  # the turn was cancelled: stop the call with it
                await asyncio.gather(task, return_exceptions=True)
                raise
            return interrupted(f"the tool {entry.name} was unloaded while it ran")
        except ToolError as exc:
            return _error("error", f"error: {exc}")
        except Exception as exc:
            log.warning("tool %s of %s failed: %s", entry.name, entry.owner, type(exc).__name__)
            return _error("error", f"error: the tool failed ({type(exc).__name__}: {exc})")
        return CallOutcome(bounded(_text(value), MAX_TOOL_RESULT_CHARS), False, "ok")


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except ValueError:
        return str(value)
