"""Public LLM provider types: requests, streamed output, classified errors, the provider protocol.

A provider turns a :class:`ProviderRequest` into an async stream of :class:`TextDelta` (and
optionally :class:`ReasoningDelta` and :class:`ToolCallDelta`) items ending with exactly one
:class:`FinalMessage`. A request may offer tools (``tools``, ``tool_choice``); the model's
calls arrive as fragments while streaming and complete in ``FinalMessage.tool_calls``. It fails
with :class:`ProviderError`, whose ``kind`` drives the host's retry policy
(``docs/contract/loader.md#parameter-fallback``). Cancelling the consuming
task (or closing the iterator) cancels the request.

This module imports only the standard library, msgspec and the sampler field table
(:mod:`innkeeper_hostapi.sampler`, which imports only those two).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Final, Literal, Protocol, TypeAlias, get_args

import msgspec

# ParamName and PARAMETER_FIELDS are part of this module's API (re-exported from the table).
from .sampler import PARAMETER_FIELDS as PARAMETER_FIELDS
from .sampler import ParamName as ParamName
from .sampler import SamplerFields

#: The call-config parameters the host may omit, one at a time, after an explicit
#: invalid-parameter rejection (``docs/contract/loader.md#parameter-fallback``).
#: The spec names four; issue 10 (item 4) extends the same rule to every mapped Chat Completion
#: sampler, so a server that rejects ``top_k`` still answers without it.
FALLBACK_PARAMETERS: Final[tuple[ParamName, ...]] = get_args(ParamName)

#: At most this many parameter-fallback retries per request (one per parameter).
MAX_PARAMETER_RETRIES: Final = len(FALLBACK_PARAMETERS)

#: Most tool calls one assistant message may carry (more is a provider error).
MAX_TOOL_CALLS_PER_MESSAGE: Final = 64
#: Longest argument text of one streamed tool call (bytes; more is a provider error).
MAX_TOOL_CALL_ARGUMENT_BYTES: Final = 1024 * 1024

#: Longest provider error message kept (the rest is cut; messages are diagnostics, not bodies).
PROVIDER_MESSAGE_MAX_CHARS: Final = 2000


ChatRole: TypeAlias = Literal["system", "developer", "user", "assistant", "tool"]

ProviderErrorKind: TypeAlias = Literal[
    "invalid-parameter", "invalid-request", "auth", "quota", "network", "server"
]
"""Classified failure: only ``invalid-parameter`` may trigger the parameter fallback."""


class Model(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True, rename="camel"):
    """Base of the provider structs: immutable, keyword-only, camelCase."""


class ChatToolCall(Model, frozen=True):
    """A tool call of an assistant message: ``arguments`` is the model's raw JSON text."""

    id: str
    name: str
    arguments: str


class ChatMessage(Model, frozen=True):
    """One message of a provider request.

    An ``assistant`` message may carry ``tool_calls`` (its ``content`` may then be empty); a
    ``tool`` message answers one of them by ``tool_call_id``.
    """

    role: ChatRole
    content: str
    name: str | None = None
    tool_call_id: str | None = None
    tool_calls: tuple[ChatToolCall, ...] = ()


class ToolSpec(Model, frozen=True):
    """A tool offered to the model: its name, description and the JSON Schema of its
    arguments object."""

    name: str
    description: str
    parameters: dict[str, Any]


# msgspec allows a frozen struct over the non-frozen table; mypy applies the stdlib
# dataclass rule (a runtime error there, not here) and still treats every field as read-only.
class CallParams(SamplerFields, frozen=True, kw_only=True):  # type: ignore[misc]
    """Sampling parameters of a request (the fields of :class:`SamplerFields`); ``None`` means
    "not sent, provider default".

    ``extras`` carries provider-specific fields verbatim (e.g. ``top_p``); the fallback never
    touches them.
    """

    extras: dict[str, Any] = msgspec.field(default_factory=dict)

    def get(self, name: ParamName) -> object:
        """The value of a fallback parameter by its spec name."""
        return getattr(self, PARAMETER_FIELDS[name])

    def without(self, name: ParamName) -> CallParams:
        """A copy with ``name`` omitted (``self`` is never changed)."""
        return msgspec.structs.replace(self, **{PARAMETER_FIELDS[name]: None})

    def active(self) -> tuple[ParamName, ...]:
        """The fallback parameters this request actually sets, in spec order."""
        return tuple(name for name in _PARAM_NAMES if self.get(name) is not None)


_PARAM_NAMES: Final[tuple[ParamName, ...]] = tuple(PARAMETER_FIELDS)


class ProviderRequest(Model, frozen=True):
    """A prepared request. It is never mutated: a retry builds a new one."""

    messages: tuple[ChatMessage, ...]
    params: CallParams = CallParams()
    model: str | None = None
    #: Tools the model may call (none: a plain chat request).
    tools: tuple[ToolSpec, ...] = ()
    #: ``auto``, ``none``, ``required`` or a tool name; ``None`` sends nothing (server default).
    tool_choice: str | None = None


class Usage(Model, frozen=True):
    """Token accounting; fields the provider did not report stay ``None``."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    reasoning_tokens: int | None = None


class TextDelta(Model, tag_field="kind", tag="text", frozen=True):
    """A piece of reply text, in order."""

    text: str


class ReasoningDelta(Model, tag_field="kind", tag="reasoning", frozen=True):
    """A piece of reasoning text (models that expose it), in order."""

    text: str


class ToolCallDelta(Model, tag_field="kind", tag="tool-call", frozen=True):
    """A fragment of the ``index``-th tool call of the reply: its ``id`` and ``name`` when the
    provider first says them, then pieces of its ``arguments`` text, in order."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


class FinalMessage(Model, tag_field="kind", tag="final", frozen=True):
    """The end of a successful stream: the full text, the complete tool calls (in order) and
    what the provider reported."""

    text: str
    tool_calls: tuple[ChatToolCall, ...] = ()
    reasoning: str | None = None
    finish_reason: str | None = None
    usage: Usage | None = None
    model: str | None = None
    effective: CallParams | None = None


#: One item of a provider stream.
StreamItem: TypeAlias = TextDelta | ReasoningDelta | ToolCallDelta | FinalMessage


class ProviderError(Exception):
    """A classified provider failure carrying the provider's own message.

    ``parameter`` names the rejected parameter when ``kind == "invalid-parameter"`` and the
    provider said which; ``output_started`` tells whether any delta was produced before failing.
    """

    def __init__(
        self,
        kind: ProviderErrorKind,
        message: str,
        *,
        parameter: ParamName | None = None,
        status: int | None = None,
        provider: str | None = None,
        output_started: bool = False,
    ) -> None:
        message = message[:PROVIDER_MESSAGE_MAX_CHARS]
        super().__init__(f"{kind}: {message}")
        self.kind: ProviderErrorKind = kind
        self.message = message
        self.parameter: ParamName | None = parameter
        self.status = status
        self.provider = provider
        self.output_started = output_started


class Provider(Protocol):
    """An LLM backend. ``name`` identifies it in config and in ``request/header`` events."""

    @property
    def name(self) -> str:
        """Stable provider id (``synthetic``, ``openai``...)."""
        ...

    def accepts(self, name: ParamName, value: object = None) -> bool:
        """Whether this provider (its configured profile) sends parameter ``name`` — with
        ``value``, when one is given (a profile lists the ``reasoningEffort`` values its server
        takes). The host omits the others before the request and records each omission
        (``docs/contract/loader.md#parameter-fallback``: an unsupported
        reasoning effort is omitted, never replaced by a guessed one)."""
        ...

    def stream(self, request: ProviderRequest) -> AsyncIterator[StreamItem]:
        """Stream the reply: deltas, then exactly one :class:`FinalMessage`.

        Raises :class:`ProviderError`. Cancelling the consumer cancels the request.
        """
        ...
