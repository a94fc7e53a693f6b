"""Accumulates streamed tool-call fragments into complete calls (OpenAI ``tool_calls`` deltas).

OpenAI-compatible servers stream each call of a reply as fragments keyed by ``index``: the
first fragment carries ``id`` and ``function.name``, later ones pieces of
``function.arguments``. Several calls may interleave. Some servers omit ``index`` (then a new
``id`` starts a new call and a fragment without one continues the last call) or resend the
``id`` on every fragment.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from innkeeper_hostapi.providers import (
    MAX_TOOL_CALL_ARGUMENT_BYTES,
    MAX_TOOL_CALLS_PER_MESSAGE,
    ChatToolCall,
    ProviderError,
    ToolCallDelta,
)

__all__ = ["ToolCallAccumulator"]


@dataclass(slots=True)
class _Call:
    id: str | None = None
    name: str | None = None
    arguments: list[str] = field(default_factory=list)
    size: int = 0


class ToolCallAccumulator:
    """Collects fragments; :meth:`calls` returns the finished calls in ``index`` order."""

    def __init__(self, provider: str) -> None:
        self._provider = provider
        self._calls: dict[int, _Call] = {}
        self._last: int | None = None

    def __bool__(self) -> bool:
        return bool(self._calls)

    def _index(self, index: int | None, call_id: str | None) -> int:
        if index is not None:
            return index
        if call_id is not None:
            for known, call in self._calls.items():
                if call.id == call_id:
                    return known
            return max(self._calls, default=-1) + 1
        return self._last if self._last is not None else 0

    def add(
        self, index: int | None, call_id: str | None, name: str | None, arguments: str | None
    ) -> ToolCallDelta:
        """Record one fragment and return it as a stream item."""
        at = self._index(index, call_id)
        if at < 0 or (at not in self._calls and len(self._calls) >= MAX_TOOL_CALLS_PER_MESSAGE):
            raise self._error(f"more than {MAX_TOOL_CALLS_PER_MESSAGE} tool calls in one reply")
        call = self._calls.setdefault(at, _Call())
        self._last = at
        if call_id and call.id is None:
            call.id = call_id
        if name:
            # A server that resends the name on every fragment repeats the same name.
            call.name = name if call.name is None or call.name == name else call.name + name
        piece = arguments or ""
        if piece:
            call.size += len(piece.encode())
            if call.size > MAX_TOOL_CALL_ARGUMENT_BYTES:
                raise self._error(
                    f"tool call arguments larger than {MAX_TOOL_CALL_ARGUMENT_BYTES} bytes"
                )
            call.arguments.append(piece)
        return ToolCallDelta(
            index=at,
            id=call_id or None,
            name=name or None,
            arguments=piece,
        )

    def calls(self) -> tuple[ChatToolCall, ...]:
        """The complete calls; a call without a name is a provider error, one without an id
        gets ``call_<index>``."""
        out: list[ChatToolCall] = []
        for at in sorted(self._calls):
            call = self._calls[at]
            if not call.name:
                raise self._error(f"tool call {at} has no function name")
            out.append(
                ChatToolCall(
                    id=call.id or f"call_{at}",
                    name=call.name,
                    arguments="".join(call.arguments),
                )
            )
        return tuple(out)

    def _error(self, message: str) -> ProviderError:
        return ProviderError("server", message, provider=self._provider, output_started=True)
