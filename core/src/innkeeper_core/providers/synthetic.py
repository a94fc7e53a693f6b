"""The ``synthetic`` provider: offline, deterministic, scriptable. The default provider.

Without a script it streams ``"Synthetic reply to: <last user text>"`` word by word, honouring
``maxTokens`` (one word = one token) and ``stop``. Tests script it with :meth:`enqueue` (FIFO
replies, one per request) or a ``script`` callable, including replies that carry MVU update
commands (:func:`mvu_update_block`), errors before or after some output, per-chunk delays (for
cancellation), parameter rejections (``reject``) and tool calls (``SyntheticReply.calling``:
each call's arguments stream as several :class:`ToolCallDelta` fragments, like a real server).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import re
from collections import deque
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from innkeeper_hostapi.providers import (
    CallParams,
    ChatToolCall,
    FinalMessage,
    ParamName,
    ProviderError,
    ProviderRequest,
    ReasoningDelta,
    StreamItem,
    TextDelta,
    ToolCallDelta,
    Usage,
)

__all__ = [
    "MAX_RECORDED_REQUESTS",
    "SYNTHETIC_ECHO_MAX_CHARS",
    "SyntheticProvider",
    "SyntheticReply",
    "default_reply_text",
    "mvu_update_block",
]

#: Requests the provider keeps for inspection (tests read the last ones).
MAX_RECORDED_REQUESTS: Final = 32
#: Longest part of the user's text echoed by the default reply.
SYNTHETIC_ECHO_MAX_CHARS: Final = 200

_WORDS: Final = re.compile(r"\s*\S+\s*|\s+")
#: Letters of the padding words (``reply_chars``).
_LETTERS: Final = "etaoinshrdlucmfwypvbgkjqxz"


@dataclass(frozen=True, slots=True)
class SyntheticReply:
    """A scripted reply.

    ``chunks`` overrides word-by-word chunking. ``error`` is raised after ``error_after``
    chunks (0 = before any output). ``delay_s`` sleeps before each chunk. ``tool_calls`` are
    streamed after the text (the finish reason is then ``tool_calls``).
    """

    text: str = ""
    chunks: Sequence[str] | None = None
    reasoning: str | None = None
    error: ProviderError | None = None
    error_after: int = 0
    delay_s: float = 0.0
    finish_reason: str = "stop"
    tool_calls: Sequence[ChatToolCall] = ()

    @classmethod
    def calling(
        cls, *calls: tuple[str, Mapping[str, object]] | ChatToolCall, text: str = ""
    ) -> SyntheticReply:
        """A reply that calls tools: ``("name", {args})`` pairs get ids ``call_1``, ``call_2``…"""
        built = tuple(
            c
            if isinstance(c, ChatToolCall)
            else ChatToolCall(
                id=f"call_{i}", name=c[0], arguments=json.dumps(c[1], ensure_ascii=False)
            )
            for i, c in enumerate(calls, 1)
        )
        return cls(text=text, tool_calls=built, finish_reason="tool_calls")

    @classmethod
    def with_mvu(cls, text: str, sets: Mapping[str, object]) -> SyntheticReply:
        """A reply whose text ends with an ``<UpdateVariable>`` block of ``_.set`` commands."""
        return cls(text=f"{text}\n{mvu_update_block(sets)}")


#: Builds a reply from the request; ``None`` falls back to the default reply.
Script = Callable[[ProviderRequest], SyntheticReply | None]


def mvu_update_block(sets: Mapping[str, object]) -> str:
    """An MVU ``<UpdateVariable>`` block with one ``_.set('path', value);`` per entry.

    Values are written as JSON. Paths must not contain quotes (MVU has no escape for them).
    """
    lines = []
    for path, value in sets.items():
        if "'" in path or '"' in path or "\n" in path:
            raise ValueError(f"MVU path {path!r} cannot contain quotes or newlines")
        lines.append(f"_.set('{path}', {json.dumps(value, ensure_ascii=False)});")
    return "<UpdateVariable>\n" + "\n".join(lines) + "\n</UpdateVariable>"


def default_reply_text(request: ProviderRequest, reply_chars: int = 0) -> str:
    """The unscripted reply: a deterministic function of the last user message.

    With ``reply_chars`` above its length the echo is followed by pseudo-random words (seeded by
    the user's text, so the same request gets the same reply) up to exactly that many
    characters: prose that does not compress better than real replies would.
    """
    last = next((m.content for m in reversed(request.messages) if m.role == "user"), "")
    echo = " ".join(last.split())[:SYNTHETIC_ECHO_MAX_CHARS]
    text = f"Synthetic reply to: {echo}" if echo else "Synthetic reply."
    if len(text) >= reply_chars:
        return text
    rng = random.Random(hashlib.sha256(last.encode("utf-8")).digest())
    parts = [text]
    size = len(text)
    while size < reply_chars:
        word = "".join(rng.choices(_LETTERS, k=rng.randint(2, 9)))
        parts.append(word)
        size += len(word) + 1
    return " ".join(parts)[:reply_chars]


def _words(text: str) -> list[str]:
    return _WORDS.findall(text)


@dataclass
class SyntheticProvider:
    """Deterministic offline provider. ``requests`` records the last
    :data:`MAX_RECORDED_REQUESTS` requests it received, oldest first (bounded: a long story
    played against it must not keep every prompt it was sent).

    ``reject`` lists parameters it refuses with an ``invalid-parameter`` error when set, like a
    server that does not support them.
    """

    script: Script | None = None
    reject: Collection[ParamName] = ()
    #: Parameters its profile does not send (the host omits them before the request).
    unsupported: Collection[ParamName] = ()
    #: The ``reasoningEffort`` values its profile sends (``None``: any).
    reasoning_efforts: Collection[str] | None = None
    #: Pad unscripted replies to this many characters (0: the short echo reply).
    reply_chars: int = 0
    name: str = "synthetic"
    requests: list[ProviderRequest] = field(default_factory=list)
    _queue: deque[SyntheticReply] = field(default_factory=deque)

    def accepts(self, name: ParamName, value: object = None) -> bool:
        """Every parameter except those listed in ``unsupported``; a ``reasoningEffort``
        value only if ``reasoning_efforts`` lists it (when set)."""
        if name in self.unsupported:
            return False
        efforts = self.reasoning_efforts
        return name != "reasoningEffort" or value is None or efforts is None or value in efforts

    def enqueue(self, *replies: SyntheticReply | str) -> None:
        """Queue replies; each request takes the oldest one before ``script``/default apply."""
        for reply in replies:
            self._queue.append(SyntheticReply(text=reply) if isinstance(reply, str) else reply)

    def _reply(self, request: ProviderRequest) -> SyntheticReply:
        if self._queue:
            return self._queue.popleft()
        if self.script is not None:
            scripted = self.script(request)
            if scripted is not None:
                return scripted
        return SyntheticReply(text=default_reply_text(request, self.reply_chars))

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamItem]:
        """Stream the reply chunk by chunk, then the final message."""
        self.requests.append(request)
        if len(self.requests) > MAX_RECORDED_REQUESTS:
            del self.requests[0]
        params = request.params
        for name in params.active():
            if name in self.reject:
                raise ProviderError(
                    "invalid-parameter",
                    f"Unsupported parameter: '{name}' is not supported by this model.",
                    parameter=name,
                    status=400,
                    provider=self.name,
                )
        reply = self._reply(request)
        chunks = list(reply.chunks) if reply.chunks is not None else _words(reply.text)
        finish = reply.finish_reason
        if params.max_tokens is not None and len(chunks) > params.max_tokens:
            chunks = chunks[: params.max_tokens]
            finish = "length"
        text = "".join(chunks)
        for stop in params.stop or ():
            if stop and stop in text:
                text = text[: text.index(stop)]
                finish = "stop"
        if reply.reasoning:
            yield ReasoningDelta(text=reply.reasoning)
        sent = 0
        for index, chunk in enumerate(chunks):
            if reply.error is not None and index == reply.error_after:
                raise _started(reply.error, index > 0 or bool(reply.reasoning))
            if reply.delay_s:
                await asyncio.sleep(reply.delay_s)
            piece = chunk[: max(0, len(text) - sent)]
            if piece:
                sent += len(piece)
                yield TextDelta(text=piece)
        if reply.error is not None and reply.error_after >= len(chunks):
            raise _started(reply.error, bool(chunks) or bool(reply.reasoning))
        for index, call in enumerate(reply.tool_calls):
            if reply.delay_s:
                await asyncio.sleep(reply.delay_s)
            half = len(call.arguments) // 2
            yield ToolCallDelta(index=index, id=call.id, name=call.name, arguments="")
            yield ToolCallDelta(index=index, arguments=call.arguments[:half])
            yield ToolCallDelta(index=index, arguments=call.arguments[half:])
        # An estimate (four characters a token): splitting every message of a long history
        # into words cost more than the rest of a turn.
        prompt_tokens = sum(len(m.content) for m in request.messages) // 4
        completion_tokens = len(_words(text))
        yield FinalMessage(
            text=text,
            tool_calls=tuple(reply.tool_calls),
            reasoning=reply.reasoning,
            finish_reason=finish,
            usage=Usage(
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                total_tokens=prompt_tokens + completion_tokens,
            ),
            model=request.model or "synthetic",
            effective=CallParams(
                temperature=params.temperature,
                max_tokens=params.max_tokens,
                reasoning_effort=params.reasoning_effort,
                stop=params.stop,
                extras=dict(params.extras),
            ),
        )


def _started(error: ProviderError, started: bool) -> ProviderError:
    """A copy of a scripted error that says whether output had started (errors are reused)."""
    return ProviderError(
        error.kind,
        error.message,
        parameter=error.parameter,
        status=error.status,
        provider=error.provider or "synthetic",
        output_started=started,
    )
