"""A turn's cancel state: whether it was interrupted, why, and the part a cancel stops now."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from innkeeper_core.agents.turn_errors import TurnInterrupted

__all__ = ["MAX_CANCEL_REASON_CHARS", "TurnInterrupts"]

T = TypeVar("T")

#: Longest cancel reason kept in ``turn/end`` (a short code, never a body).
MAX_CANCEL_REASON_CHARS = 200


class TurnInterrupts:
    """The interrupt of one session's running turn.

    A cancel sets the flag (no further step starts) and stops the interruptible part running
    now, a provider stream or a tool call, which then raises :class:`TurnInterrupted`.
    """

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.cancelled = False
        #: The cancel's reason, cut to :data:`MAX_CANCEL_REASON_CHARS` (``None``: none given).
        self.reason: str | None = None
        #: The interruptible part of the turn running now (a provider stream or tool calls).
        self._work_task: asyncio.Task[Any] | None = None

    def reset(self) -> None:
        """A new turn starts uncancelled."""
        self.cancelled, self.reason = False, None

    def interrupt(self, reason: str | None) -> None:
        """Stop the interruptible part running now; no further step starts."""
        self.cancelled = True
        if reason is not None:
            self.reason = reason[:MAX_CANCEL_REASON_CHARS]
        task = self._work_task
        # A guard that cancels from inside the call keeps its own answer (``blocked``); the
        # flag stops the turn right after it.
        if task is not None and not task.done() and task is not asyncio.current_task():
            task.cancel()

    def end(self) -> tuple[str | None, str | None]:
        """``turn/end`` code and message of a cancel (with a reason: ``CANCELLED``)."""
        reason = self.reason
        return ("CANCELLED", reason) if reason is not None else (None, None)

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` in a sub-task so a cancel interrupts only it (``TurnInterrupted``)."""
        task = asyncio.get_running_loop().create_task(coro, name=f"work:{self.session_id}")
        self._work_task = task
        try:
            return await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if task.cancelled() and (current is None or not current.cancelling()):
                raise TurnInterrupted from None
            raise
        finally:
            self._work_task = None
