"""The OpenAI-compatible provider against a local fake server (aiohttp test server)."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from innkeeper_core.providers import (
    OpenAICompatibleProvider,
    OpenAIConfig,
    ParameterFallback,
    classify_http_error,
    with_params,
)
from innkeeper_hostapi.providers import (
    CallParams,
    ChatMessage,
    FinalMessage,
    ProviderError,
    ProviderRequest,
    ReasoningDelta,
    StreamItem,
    TextDelta,
)

ServerFactory = Callable[[web.Application], Awaitable[TestServer]]


def chunk(content: str | None = None, **extra: Any) -> bytes:
    delta: dict[str, Any] = {}
    if content is not None:
        delta["content"] = content
    if "reasoning" in extra:
        delta["reasoning_content"] = extra.pop("reasoning")
    body = {"model": "fake-1", "choices": [{"index": 0, "delta": delta, **extra}]}
    return b"data: " + json.dumps(body).encode() + b"\n\n"


USAGE = (
    b'data: {"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10,'
    b'"completion_tokens_details":{"reasoning_tokens":2}}}\n\n'
)


@dataclass
class Fake:
    """A scriptable /chat/completions endpoint that records what it received."""

    pieces: list[bytes] = field(default_factory=list)
    delay: float = 0.0
    status: int = 200
    error_body: bytes = b""
    reject: set[str] = field(default_factory=set)
    bodies: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    disconnected: asyncio.Event = field(default_factory=asyncio.Event)
    close_after: int | None = None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.bodies.append(body)
        self.headers.append(dict(request.headers))
        for name in sorted(self.reject):
            if name in body:
                return web.json_response(
                    {
                        "error": {
                            "message": f"Unsupported parameter: '{name}' is not supported "
                            "with this model.",
                            "type": "invalid_request_error",
                            "param": name,
                            "code": "unsupported_parameter",
                        }
                    },
                    status=400,
                )
        if self.status != 200:
            return web.Response(status=self.status, body=self.error_body)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        try:
            for index, piece in enumerate(self.pieces):
                if self.close_after is not None and index == self.close_after:
                    assert request.transport is not None
                    request.transport.close()
                    return response
                await response.write(piece)
                if self.delay:
                    await asyncio.sleep(self.delay)
        except (ConnectionResetError, asyncio.CancelledError):
            self.disconnected.set()
            raise
        return response


@pytest.fixture
async def fake(aiohttp_server: ServerFactory) -> tuple[Fake, str]:
    state = Fake()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", state.handle)
    server = await aiohttp_server(app)
    return state, str(server.make_url("/v1"))


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as opened:
        yield opened


def make_request(**params: Any) -> ProviderRequest:
    return ProviderRequest(
        messages=(
            ChatMessage(role="system", content="sys"),
            ChatMessage(role="developer", content="dev"),
            ChatMessage(role="user", content="hi"),
        ),
        params=CallParams(**params),
    )


def provider(
    session: aiohttp.ClientSession, base_url: str, **config: Any
) -> OpenAICompatibleProvider:
    return OpenAICompatibleProvider(
        session, OpenAIConfig(model="fake-1", base_url=base_url, api_key="sk-test", **config)
    )


async def collect(p: OpenAICompatibleProvider, request: ProviderRequest) -> list[StreamItem]:
    return [item async for item in p.stream(request)]


async def test_streams_deltas_reasoning_usage_and_sends_only_set_params(
    fake: tuple[Fake, str], session: aiohttp.ClientSession
) -> None:
    state, url = fake
    # A keep-alive comment, CRLF line ends, and an event split across writes.
    split = chunk(" world")
    state.pieces = [
        b": keep-alive\n\n",
        chunk(reasoning="hmm"),
        chunk("Hello").replace(b"\n", b"\r\n"),
        split[:9],
        split[9:],
        chunk(None, finish_reason="stop"),
        USAGE,
        b"data: [DONE]\n\n",
    ]
    items = await collect(provider(session, url), make_request(temperature=0.3, stop=("END",)))
    assert items[:3] == [
        ReasoningDelta(text="hmm"),
        TextDelta(text="Hello"),
        TextDelta(text=" world"),
    ]
    final = items[-1]
    assert isinstance(final, FinalMessage)
    assert final.text == "Hello world"
    assert final.reasoning == "hmm"
    assert final.finish_reason == "stop"
    assert final.model == "fake-1"
    assert final.usage is not None
    assert (final.usage.prompt_tokens, final.usage.reasoning_tokens) == (7, 2)
    assert final.effective == CallParams(temperature=0.3, stop=("END",))

    (body,) = state.bodies
    assert body["model"] == "fake-1"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["temperature"] == 0.3
    assert body["stop"] == ["END"]
    assert "max_tokens" not in body
    assert "reasoning_effort" not in body
    assert [m["role"] for m in body["messages"]] == ["system", "system", "user"]
    assert state.headers[0]["Authorization"] == "Bearer sk-test"


async def test_config_variants_and_extras(
    fake: tuple[Fake, str], session: aiohttp.ClientSession
) -> None:
    state, url = fake
    state.pieces = [chunk("ok"), b"data: [DONE]\n\n"]
    p = provider(
        session,
        url,
        stream_usage=False,
        max_tokens_field="max_completion_tokens",
        developer_role="developer",
    )
    request = make_request(max_tokens=5, reasoning_effort="low", extras={"top_p": 0.1})
    await collect(p, request)
    body = state.bodies[0]
    assert "stream_options" not in body
    assert body["max_completion_tokens"] == 5
    assert body["reasoning_effort"] == "low"
    assert body["top_p"] == 0.1
    assert body["messages"][1]["role"] == "developer"
    assert "sk-test" not in repr(p.config)


@pytest.mark.parametrize(
    ("status", "body", "kind", "parameter"),
    [
        (401, b'{"error":{"message":"Incorrect API key","code":"invalid_api_key"}}', "auth", None),
        (403, b"forbidden", "auth", None),
        (402, b'{"error":{"message":"Insufficient Balance"}}', "quota", None),
        (429, b'{"error":{"message":"Rate limit","type":"rate_limit"}}', "quota", None),
        (
            400,
            b'{"error":{"message":"bad","param":"temperature","code":"unsupported_value"}}',
            "invalid-parameter",
            "temperature",
        ),
        (
            400,
            b'{"error":{"message":"max_tokens is too large: 99999"}}',
            "invalid-parameter",
            "maxTokens",
        ),
        (
            422,
            b'{"detail":"Unsupported parameter \'stop\' for this model"}',
            "invalid-parameter",
            "stop",
        ),
        (
            400,
            b'{"error":{"message":"reasoning_effort is not supported"}}',
            "invalid-parameter",
            "reasoningEffort",
        ),
        (400, b'{"error":{"message":"Please stop sending that"}}', "invalid-request", None),
        (
            400,
            b'{"error":{"message":"top_p bad","param":"top_p","code":"invalid_value"}}',
            "invalid-parameter",
            "topP",  # every mapped sampler falls back (issue 10, item 4)
        ),
        (404, b'{"error":{"message":"model not found"}}', "invalid-request", None),
        (500, b"upstream exploded", "server", None),
        (503, b"", "server", None),
    ],
)
async def test_http_errors_are_classified_with_the_provider_message(
    fake: tuple[Fake, str],
    session: aiohttp.ClientSession,
    status: int,
    body: bytes,
    kind: str,
    parameter: str | None,
) -> None:
    state, url = fake
    state.status, state.error_body = status, body
    with pytest.raises(ProviderError) as caught:
        await collect(provider(session, url), make_request())
    error = caught.value
    assert (error.kind, error.parameter, error.status) == (kind, parameter, status)
    assert error.message == classify_http_error(status, body).message
    if body.startswith(b"{"):
        assert error.message in body.decode()
    assert not error.output_started


async def test_parameter_rejection_retries_without_that_parameter(
    fake: tuple[Fake, str], session: aiohttp.ClientSession
) -> None:
    state, url = fake
    state.reject = {"temperature"}
    state.pieces = [chunk("fine"), b"data: [DONE]\n\n"]
    p = provider(session, url)
    prepared = make_request(temperature=1.4, max_tokens=50)
    plan = ParameterFallback(prepared.params)
    params: CallParams | None = plan.params
    final = None
    while params is not None:
        try:
            final = (await collect(p, with_params(prepared, params)))[-1]
            break
        except ProviderError as error:
            params = plan.after_error(error, params)
    assert isinstance(final, FinalMessage)
    assert final.text == "fine"
    assert ["temperature" in b for b in state.bodies] == [True, False]
    assert state.bodies[1]["max_tokens"] == 50
    assert plan.omitted == ("temperature",)
    assert prepared.params.temperature == 1.4


@pytest.mark.parametrize(("status", "kind"), [(401, "auth"), (429, "quota")])
async def test_no_parameter_retry_for_auth_or_quota(
    fake: tuple[Fake, str], session: aiohttp.ClientSession, status: int, kind: str
) -> None:
    state, url = fake
    state.status = status
    state.error_body = b'{"error":{"message":"temperature: nope","param":"temperature"}}'
    plan = ParameterFallback(CallParams(temperature=1.0))
    with pytest.raises(ProviderError) as caught:
        await collect(provider(session, url), make_request(temperature=1.0))
    assert caught.value.kind == kind
    assert plan.after_error(caught.value) is None
    assert len(state.bodies) == 1


async def test_network_errors(session: aiohttp.ClientSession) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    plan = ParameterFallback(CallParams(temperature=1.0))
    with pytest.raises(ProviderError) as caught:
        await collect(provider(session, f"http://127.0.0.1:{port}/v1"), make_request())
    assert caught.value.kind == "network"
    assert plan.after_error(caught.value) is None


async def test_connection_dropped_mid_stream_is_a_network_error_after_output(
    fake: tuple[Fake, str], session: aiohttp.ClientSession
) -> None:
    state, url = fake
    state.pieces = [chunk("partial"), chunk("never")]
    state.close_after = 1
    seen: list[StreamItem] = []

    async def consume() -> None:
        async for item in provider(session, url).stream(make_request()):
            seen.append(item)

    with pytest.raises(ProviderError) as caught:
        await consume()
    assert caught.value.kind == "network"
    assert caught.value.output_started
    assert seen == [TextDelta(text="partial")]


async def test_error_object_inside_the_stream(
    fake: tuple[Fake, str], session: aiohttp.ClientSession
) -> None:
    state, url = fake
    state.pieces = [chunk("a"), b'data: {"error":{"message":"overloaded"}}\n\n']
    with pytest.raises(ProviderError) as caught:
        await collect(provider(session, url), make_request())
    assert (caught.value.kind, caught.value.message) == ("server", "overloaded")
    assert caught.value.output_started


async def test_cancellation_mid_stream_closes_the_connection(
    fake: tuple[Fake, str], session: aiohttp.ClientSession
) -> None:
    state, url = fake
    state.pieces = [chunk(f"t{i} ") for i in range(400)]
    state.delay = 0.01
    first = asyncio.Event()
    received: list[str] = []

    async def consume() -> None:
        async for item in provider(session, url).stream(make_request()):
            if isinstance(item, TextDelta):
                received.append(item.text)
                first.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first.wait(), timeout=5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.wait_for(state.disconnected.wait(), timeout=5)
    assert 0 < len(received) < 400


async def test_closing_the_iterator_early_closes_the_connection(
    fake: tuple[Fake, str], session: aiohttp.ClientSession
) -> None:
    state, url = fake
    state.pieces = [chunk(f"t{i} ") for i in range(400)]
    state.delay = 0.01
    stream = provider(session, url).stream(make_request())
    assert isinstance(await anext(stream), TextDelta)
    await stream.aclose()  # type: ignore[attr-defined]
    await asyncio.wait_for(state.disconnected.wait(), timeout=5)


async def test_tolerates_null_fields_and_rejects_malformed_chunks(
    fake: tuple[Fake, str], session: aiohttp.ClientSession
) -> None:
    state, url = fake
    state.pieces = [
        b'data: {"choices":null,"usage":null}\n\n',
        b'data: {"choices":[{"delta":null,"finish_reason":null}]}\n\n',
        b'data: {"choices":[{"delta":{"content":null,"role":"assistant"}}]}\n\n',
        chunk("ok", finish_reason="stop"),
        b"data: [DONE]\n\n",
    ]
    items = await collect(provider(session, url), make_request())
    assert items[0] == TextDelta(text="ok")
    assert isinstance(items[-1], FinalMessage)
    state.pieces = [chunk("a"), b"data: {not json\n\n"]
    state.bodies.clear()
    with pytest.raises(ProviderError) as caught:
        await collect(provider(session, url), make_request())
    assert caught.value.kind == "server"
    assert caught.value.output_started
