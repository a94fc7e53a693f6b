"""HTTP helpers for plugin route handlers: path parameters, bounded bodies, JSON responses.

Handlers are ordinary aiohttp handlers, ``async def handler(request) -> web.StreamResponse``.
Plugin routes live in the host's reloadable route table, so ``request.match_info`` belongs to the
host's catch-all route: read path parameters with :func:`path_params` instead.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, TypeVar

import msgspec
from aiohttp import web

from .errors import HttpProblem

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Middleware = Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]

#: Default request body limit for a route that declares none (bytes).
DEFAULT_MAX_BODY: Final = 1 << 20

ROUTE_PARAMS: Final = web.RequestKey("innkeeper.route_params", dict[str, str])
ROUTE_MAX_BODY: Final = web.RequestKey("innkeeper.route_max_body", int)

T = TypeVar("T")

_ENCODER = msgspec.json.Encoder()
_JSON_DECODER = msgspec.json.Decoder()


def path_params(request: web.Request) -> Mapping[str, str]:
    """The path parameters the route table matched for this request."""
    params: dict[str, str] = request.get(ROUTE_PARAMS, {})
    return params


def problem(
    status: int,
    code: str,
    message: str,
    *,
    headers: Mapping[str, str] | None = None,
    details: Mapping[str, Any] | None = None,
) -> web.Response:
    """A problem response in the spec's shape: ``{"ok": false, "error": ..., "code": ...}``.

    With ``details``, ``error`` is the structured ``{"code", "message", "details"}`` object and
    ``code`` is still top-level, so clients that read only ``code`` keep working.
    """
    error: Any = message
    if details is not None:
        error = {"code": code, "message": message, "details": details}
    return web.Response(
        status=status,
        body=_ENCODER.encode({"ok": False, "error": error, "code": code}),
        content_type="application/json",
        headers=headers,
    )


def json_response(
    data: Any, *, status: int = 200, headers: Mapping[str, str] | None = None
) -> web.Response:
    """Encode ``data`` (builtins or msgspec Structs) with msgspec."""
    return web.Response(
        status=status,
        body=_ENCODER.encode(data),
        content_type="application/json",
        headers=headers,
    )


async def read_body(request: web.Request, max_bytes: int | None = None) -> bytes:
    """Read the request body, refusing more than the route's limit with 413 ``BODY_TOO_LARGE``.

    The limit is the route's declared ``max_body`` unless ``max_bytes`` tightens it. Chunked
    bodies are counted as they arrive, so an oversized upload never sits in memory whole.
    """
    limit = request.get(ROUTE_MAX_BODY, DEFAULT_MAX_BODY)
    if max_bytes is not None:
        limit = min(limit, max_bytes)
    length = request.content_length
    if length is not None and length > limit:
        raise HttpProblem(413, "BODY_TOO_LARGE", f"request body exceeds {limit} bytes")
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = await request.content.read(65536)
        if not chunk:
            break
        total += len(chunk)
        if total > limit:
            raise HttpProblem(413, "BODY_TOO_LARGE", f"request body exceeds {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def read_json(request: web.Request, max_bytes: int | None = None) -> Any:
    """Read and decode a bounded JSON body; bad JSON is 400 ``INVALID_JSON``."""
    body = await read_body(request, max_bytes)
    try:
        return _JSON_DECODER.decode(body)
    except msgspec.DecodeError as exc:
        raise HttpProblem(400, "INVALID_JSON", f"request body is not valid JSON: {exc}") from None


async def read_struct(request: web.Request, type: type[T], max_bytes: int | None = None) -> T:
    """Read a JSON body into ``type``; a schema mismatch is 400 ``INVALID_BODY`` with its path."""
    body = await read_body(request, max_bytes)
    try:
        return msgspec.json.decode(body, type=type)
    except msgspec.ValidationError as exc:
        raise HttpProblem(400, "INVALID_BODY", str(exc)) from None
    except msgspec.DecodeError as exc:
        raise HttpProblem(400, "INVALID_JSON", f"request body is not valid JSON: {exc}") from None
