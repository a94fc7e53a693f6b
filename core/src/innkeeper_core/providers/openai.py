"""OpenAI-compatible ``/chat/completions`` streaming client (OpenAI, DeepSeek, local servers).

Streams server-sent events over an ``aiohttp.ClientSession`` the host owns. Errors are
classified for the retry policy (``docs/contract/loader.md#parameter-fallback``): 401/403 auth,
402/429 quota, 400/422 invalid parameter (when the server names one of ours) or invalid request,
5xx/408 server, transport failures network. Cancelling the consumer closes the connection, which
stops generation on the server.

Tools are sent as ``tools``/``tool_choice``; streamed ``tool_calls`` deltas (ids, names,
argument fragments, several calls per reply, ``finish_reason: tool_calls``) are yielded as
:class:`ToolCallDelta` items and completed in ``FinalMessage.tool_calls``.

Logs carry status codes and error kinds, never prompts, replies or provider message text.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import aiohttp
import msgspec
from aiohttp.http_exceptions import LineTooLong

from innkeeper_hostapi.providers import (
    PARAMETER_FIELDS,
    CallParams,
    ChatMessage,
    FinalMessage,
    ParamName,
    ProviderError,
    ProviderErrorKind,
    ProviderRequest,
    ReasoningDelta,
    StreamItem,
    TextDelta,
    Usage,
)

from .redact import redact
from .tool_calls import ToolCallAccumulator

__all__ = [
    "DEFAULT_BASE_URL",
    "MAX_ERROR_BODY_BYTES",
    "MAX_SSE_LINE_BYTES",
    "OpenAICompatibleProvider",
    "OpenAIConfig",
    "build_body",
    "classify_http_error",
]

log = logging.getLogger("innkeeper.providers.openai")

DEFAULT_BASE_URL: Final = "https://api.openai.com/v1"
#: Most bytes of an error response body read for classification.
MAX_ERROR_BODY_BYTES: Final = 64 * 1024
#: Longest single SSE line accepted (a chunk is far smaller; this bounds a broken server).
MAX_SSE_LINE_BYTES: Final = 4 * 1024 * 1024
DEFAULT_CONNECT_TIMEOUT_S: Final = 30.0
#: Longest silence between two streamed chunks.
DEFAULT_READ_TIMEOUT_S: Final = 120.0

# Wire names of our fallback parameters, as servers spell them in errors.
_WIRE_PARAMS: Final[dict[str, ParamName]] = {
    "temperature": "temperature",
    "max_tokens": "maxTokens",
    "max_completion_tokens": "maxTokens",
    "max_output_tokens": "maxTokens",
    "reasoning_effort": "reasoningEffort",
    "reasoning.effort": "reasoningEffort",
    "stop": "stop",
    "top_p": "topP",
    "top_k": "topK",
    "min_p": "minP",
    "top_a": "topA",
    "frequency_penalty": "frequencyPenalty",
    "presence_penalty": "presencePenalty",
    "repetition_penalty": "repetitionPenalty",
    "repeat_penalty": "repetitionPenalty",
    "seed": "seed",
    "verbosity": "verbosity",
}
# ``stop`` is an ordinary English word, so in free text it only counts when quoted.
_PARAM_IN_MESSAGE: Final = re.compile(
    r"\b(temperature|max_tokens|max_completion_tokens|max_output_tokens|reasoning_effort"
    r"|top_p|top_k|min_p|top_a|frequency_penalty|presence_penalty|repetition_penalty"
    r"|repeat_penalty|verbosity)\b"
    r"|['\"`](stop)['\"`]"
)
_PARAM_ERROR_CODES: Final = frozenset(
    {"unsupported_parameter", "unsupported_value", "invalid_parameter", "invalid_value"}
)


#: Parameters every OpenAI-compatible server takes (the OpenAI Chat Completions API).
_STANDARD: Final[frozenset[ParamName]] = frozenset(
    {
        "temperature",
        "maxTokens",
        "stop",
        "topP",
        "frequencyPenalty",
        "presencePenalty",
        "seed",
        "reasoningEffort",
        "verbosity",
    }
)
#: Samplers only some servers accept (SillyTavern sends them to such back ends only).
_EXTENDED: Final[frozenset[ParamName]] = frozenset({"topK", "minP", "topA", "repetitionPenalty"})
#: Provider profiles: which parameters a kind of server accepts (``[provider] profile``).
PROFILES: Final[dict[str, frozenset[ParamName]]] = {
    "openai": _STANDARD,
    "deepseek": _STANDARD - {"seed", "reasoningEffort", "verbosity"},
    "openrouter": _STANDARD | _EXTENDED,
    "vllm": (_STANDARD - {"verbosity"}) | {"topK", "minP", "repetitionPenalty"},
    "llamacpp": (_STANDARD - {"verbosity", "reasoningEffort"})
    | {"topK", "minP", "repetitionPenalty"},
}
DEFAULT_PROFILE: Final = "openai"
#: The OpenAI API's ``reasoning_effort`` values (models take subsets; a server rejecting one for
#: its model gets the request again without it, through the parameter fallback).
_OPENAI_EFFORTS: Final = frozenset({"none", "minimal", "low", "medium", "high", "xhigh"})
#: The ``reasoningEffort`` values each profile sends (`docs/contract/loader.md#parameter-fallback`:
#: an unsupported effort is omitted, no alternative name is guessed). A profile absent here takes
#: the OpenAI values when ``reasoningEffort`` is accepted at all; ``[provider] reasoning_efforts``
#: replaces the list.
REASONING_EFFORTS: Final[dict[str, frozenset[str]]] = {
    "openai": _OPENAI_EFFORTS,
    "openrouter": _OPENAI_EFFORTS | {"max"},
    "vllm": frozenset({"low", "medium", "high"}),
}
#: Wire names of the parameters: the CallParams field names are the OpenAI names (``maxTokens``
#: uses ``OpenAIConfig.max_tokens_field``).
_WIRE_NAME: Final[dict[ParamName, str]] = {
    name: field for name, field in PARAMETER_FIELDS.items() if name != "maxTokens"
}


@dataclass(frozen=True, slots=True)
class OpenAIConfig:
    """Where and how to call an OpenAI-compatible server. ``api_key`` never appears in repr."""

    model: str
    base_url: str = DEFAULT_BASE_URL
    api_key: str = field(default="", repr=False)
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S
    read_timeout_s: float = DEFAULT_READ_TIMEOUT_S
    #: Send ``stream_options.include_usage`` (some local servers reject it; set False there).
    stream_usage: bool = True
    #: Field name for ``maxTokens`` (``max_completion_tokens`` for OpenAI reasoning models).
    max_tokens_field: str = "max_tokens"
    #: Role used for ``developer`` messages (most compatible servers only know ``system``).
    developer_role: Literal["developer", "system"] = "system"
    extra_headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    #: Which parameters the server accepts (a key of :data:`PROFILES`).
    profile: str = DEFAULT_PROFILE
    #: Parameters accepted on top of the profile (``[provider] extra_parameters``).
    extra_parameters: frozenset[ParamName] = frozenset()
    #: Wire-name overrides (llama.cpp calls ``repetitionPenalty`` ``repeat_penalty``).
    wire_names: Mapping[str, str] = field(default_factory=dict)
    #: ``reasoningEffort`` values sent (``[provider] reasoning_efforts``); ``None``: the
    #: profile's (:data:`REASONING_EFFORTS`).
    reasoning_efforts: frozenset[str] | None = None

    def accepts(self, name: ParamName, value: object = None) -> bool:
        """Whether the profile (or ``extra_parameters``) sends ``name``, and for
        ``reasoningEffort`` whether it sends ``value`` (when given)."""
        if name not in PROFILES.get(self.profile, _STANDARD) and name not in self.extra_parameters:
            return False
        if name != "reasoningEffort" or value is None:
            return True
        return value in self.supported_efforts

    @property
    def supported_efforts(self) -> frozenset[str]:
        """The ``reasoningEffort`` values this configuration sends."""
        if self.reasoning_efforts is not None:
            return self.reasoning_efforts
        return REASONING_EFFORTS.get(self.profile, _OPENAI_EFFORTS)

    @property
    def url(self) -> str:
        """The ``/chat/completions`` endpoint."""
        return self.base_url.rstrip("/") + "/chat/completions"


# ---------------------------------------------------------------- wire (lenient: servers vary)


class _Function(msgspec.Struct):
    name: str | None = None
    arguments: str | None = None


class _ToolCallDelta(msgspec.Struct):
    index: int | None = None
    id: str | None = None
    function: _Function | None = None


class _Delta(msgspec.Struct):
    content: str | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None
    tool_calls: list[_ToolCallDelta] | None = None


class _Choice(msgspec.Struct):
    delta: _Delta | None = None
    finish_reason: str | None = None


class _Details(msgspec.Struct):
    reasoning_tokens: int | None = None


class _Usage(msgspec.Struct):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    completion_tokens_details: _Details | None = None


class _Chunk(msgspec.Struct):
    choices: list[_Choice] | None = None
    usage: _Usage | None = None
    model: str | None = None
    error: dict[str, Any] | None = None


_EMPTY_DELTA: Final = _Delta()
_CHUNK_DECODER: Final = msgspec.json.Decoder(_Chunk)
_ENCODER: Final = msgspec.json.Encoder()


def build_body(config: OpenAIConfig, request: ProviderRequest) -> dict[str, Any]:
    """The JSON body for ``request``: only parameters that are set are sent."""
    messages: list[dict[str, Any]] = []
    for message in request.messages:
        messages.append(_wire_message(config, message))
    body: dict[str, Any] = {
        "model": request.model or config.model,
        "messages": messages,
        "stream": True,
    }
    if config.stream_usage:
        body["stream_options"] = {"include_usage": True}
    params = request.params
    wire = {**_WIRE_NAME, "maxTokens": config.max_tokens_field}
    if config.profile == "llamacpp":
        wire["repetitionPenalty"] = "repeat_penalty"
    wire.update(config.wire_names)  # type: ignore[arg-type]
    for name in params.active():
        value = params.get(name)
        body[wire[name]] = list(value) if name == "stop" else value  # type: ignore[call-overload]
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                },
            }
            for tool in request.tools
        ]
    if request.tool_choice is not None:
        body["tool_choice"] = _tool_choice(request.tool_choice)
    for key, value in params.extras.items():
        body.setdefault(key, value)
    return body


def _tool_choice(choice: str) -> str | dict[str, Any]:
    if choice in ("auto", "none", "required"):
        return choice
    return {"type": "function", "function": {"name": choice}}


def _wire_message(config: OpenAIConfig, message: ChatMessage) -> dict[str, Any]:
    role = config.developer_role if message.role == "developer" else message.role
    out: dict[str, Any] = {"role": role, "content": message.content}
    if message.name is not None:
        out["name"] = message.name
    if message.tool_call_id is not None:
        out["tool_call_id"] = message.tool_call_id
    if message.tool_calls:
        # A reply that only calls tools has no text: servers expect ``content: null``.
        out["content"] = message.content or None
        out["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in message.tool_calls
        ]
    return out


def _error_fields(body: bytes) -> tuple[str, str | None, str | None]:
    """``(message, param, code)`` from an error body in any of the common shapes."""
    try:
        decoded = msgspec.json.decode(body)
    except msgspec.DecodeError:
        text = body.decode("utf-8", "replace").strip()
        return text or "(empty error body)", None, None
    error: Any = decoded.get("error", decoded) if isinstance(decoded, dict) else decoded
    if isinstance(error, str):
        return error, None, None
    if not isinstance(error, dict):
        return str(error), None, None
    message = error.get("message") or error.get("detail") or error.get("msg") or str(error)
    param = error.get("param")
    code = error.get("code") or error.get("type")
    return (
        str(message),
        param if isinstance(param, str) else None,
        code if isinstance(code, str) else None,
    )


def _named_param(message: str, param: str | None) -> ParamName | None:
    if param is not None and param in _WIRE_PARAMS:
        return _WIRE_PARAMS[param]
    match = _PARAM_IN_MESSAGE.search(message)
    if match is None:
        return None
    return _WIRE_PARAMS[match.group(1) or match.group(2)]


def classify_http_error(status: int, body: bytes, *, provider: str = "openai") -> ProviderError:
    """Classify a non-2xx response of an OpenAI-compatible server."""
    message, param, code = _error_fields(body)
    kind: ProviderErrorKind
    parameter: ParamName | None = None
    if status in (401, 403):
        kind = "auth"
    elif status in (402, 429):
        kind = "quota"
    elif status in (400, 422):
        parameter = _named_param(message, param)
        is_param_error = parameter is not None or (code in _PARAM_ERROR_CODES)
        kind = "invalid-parameter" if is_param_error else "invalid-request"
    elif status == 408 or status >= 500:
        kind = "server"
    else:
        kind = "invalid-request"
    return ProviderError(kind, message, parameter=parameter, status=status, provider=provider)


class OpenAICompatibleProvider:
    """Streams chat completions from an OpenAI-compatible server."""

    def __init__(
        self, session: aiohttp.ClientSession, config: OpenAIConfig, *, name: str = "openai"
    ) -> None:
        self._session = session
        self.config = config
        self._name = name

    def accepts(self, name: ParamName, value: object = None) -> bool:
        """Whether the configured profile sends ``name`` (with ``value``, when given)."""
        return self.config.accepts(name, value)

    @property
    def name(self) -> str:
        """Provider id used in config and ``request/header`` events."""
        return self._name

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        headers.update(self.config.extra_headers)
        if self.config.api_key:
            headers["Authorization"] = f"Bearer {self.config.api_key}"
        return headers

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamItem]:
        """POST the request with ``stream: true`` and yield deltas, then the final message."""
        body = build_body(self.config, request)
        timeout = aiohttp.ClientTimeout(
            total=None,
            connect=self.config.connect_timeout_s,
            sock_read=self.config.read_timeout_s,
        )
        started = False
        text: list[str] = []
        reasoning: list[str] = []
        finish: str | None = None
        usage: Usage | None = None
        model: str | None = None
        calls = ToolCallAccumulator(self._name)
        try:
            async with self._session.post(
                self.config.url,
                data=_ENCODER.encode(body),
                headers=self._headers(),
                timeout=timeout,
            ) as response:
                if response.status >= 300:
                    raw = await response.content.read(MAX_ERROR_BODY_BYTES)
                    error = classify_http_error(response.status, raw, provider=self._name)
                    log.warning(
                        "provider %s rejected the request: status=%d kind=%s parameter=%s",
                        self._name,
                        response.status,
                        error.kind,
                        error.parameter,
                    )
                    raise error
                try:
                    async for payload in _sse_data(response.content):
                        if payload == b"[DONE]":
                            break
                        try:
                            chunk = _CHUNK_DECODER.decode(payload)
                        except msgspec.DecodeError as exc:
                            raise ProviderError(
                                "server",
                                "malformed stream chunk from provider",
                                provider=self._name,
                                output_started=started,
                            ) from exc
                        if chunk.error is not None:
                            message, _, _ = _error_fields(_ENCODER.encode({"error": chunk.error}))
                            raise ProviderError(
                                "server", message, provider=self._name, output_started=started
                            )
                        model = chunk.model or model
                        if chunk.usage is not None:
                            usage = _usage(chunk.usage)
                        for choice in (chunk.choices or ())[:1]:
                            delta = choice.delta or _EMPTY_DELTA
                            thought = delta.reasoning_content or delta.reasoning
                            if thought:
                                started = True
                                reasoning.append(thought)
                                yield ReasoningDelta(text=thought)
                            if delta.content:
                                started = True
                                text.append(delta.content)
                                yield TextDelta(text=delta.content)
                            for fragment in delta.tool_calls or ():
                                started = True
                                function = fragment.function
                                yield calls.add(
                                    fragment.index,
                                    fragment.id,
                                    function.name if function else None,
                                    function.arguments if function else None,
                                )
                            if choice.finish_reason is not None:
                                finish = choice.finish_reason
                except BaseException:
                    # Cancelled or failed mid-stream: drop the connection so the server stops.
                    response.close()
                    raise
        except ProviderError as exc:
            key = self.config.api_key
            if key and key in exc.message:  # a server that echoes the key it refused
                exc.message = redact(exc.message, key)
                exc.args = (f"{exc.kind}: {exc.message}",)
            raise
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.warning("provider %s network failure: %s", self._name, type(exc).__name__)
            raise ProviderError(
                "network",
                f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__,
                provider=self._name,
                output_started=started,
            ) from exc
        yield FinalMessage(
            text="".join(text),
            tool_calls=calls.calls(),
            reasoning="".join(reasoning) or None,
            finish_reason=finish,
            usage=usage,
            model=model,
            effective=_effective(request.params),
        )


def _effective(params: CallParams) -> CallParams:
    return CallParams(
        temperature=params.temperature,
        max_tokens=params.max_tokens,
        reasoning_effort=params.reasoning_effort,
        stop=params.stop,
        extras=dict(params.extras),
    )


def _usage(wire: _Usage) -> Usage:
    details = wire.completion_tokens_details
    return Usage(
        prompt_tokens=wire.prompt_tokens,
        completion_tokens=wire.completion_tokens,
        total_tokens=wire.total_tokens,
        reasoning_tokens=details.reasoning_tokens if details is not None else None,
    )


async def _sse_data(content: aiohttp.StreamReader) -> AsyncIterator[bytes]:
    """Yield the ``data`` of each server-sent event (multi-line data joined with ``\\n``)."""
    data: list[bytes] = []
    while True:
        try:
            line = await content.readuntil(b"\n", max_size=MAX_SSE_LINE_BYTES)
        except LineTooLong as exc:
            raise ProviderError("server", "stream line too long") from exc
        if not line:
            if data:
                yield b"\n".join(data)
            return
        line = line.rstrip(b"\r\n")
        if not line:
            if data:
                yield b"\n".join(data)
                data = []
            continue
        if line.startswith(b":"):
            continue
        name, _, value = line.partition(b":")
        if name == b"data":
            data.append(value[1:] if value.startswith(b" ") else value)
