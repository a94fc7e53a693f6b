"""HTTP helpers for plugin route handlers: path parameters, bodies, JSON responses.

Handlers are ordinary aiohttp handlers, ``async def handler(request) -> web.StreamResponse``.
Plugin routes live in the host's reloadable route table, so ``request.match_info`` belongs to the
host's catch-all route: read path parameters with :func:`path_params` instead.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, TypeVar

import msgspec
from aiohttp import web

from .bodies import BODY, DEFAULT_MAX_BODY, decode_json, receive
from .errors import HttpProblem

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Middleware = Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]

ROUTE_PARAMS: Final = web.RequestKey("innkeeper.route_params", dict[str, str])
ROUTE_MAX_BODY: Final = web.RequestKey("innkeeper.route_max_body", int)

T = TypeVar("T")

_ENCODER = msgspec.json.Encoder()


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


def _route_max_body(request: web.Request) -> int:
    limit: int = request.get(ROUTE_MAX_BODY, DEFAULT_MAX_BODY)
    return limit


async def read_body(request: web.Request, max_bytes: int | None = None) -> bytes:
    """The request body, refusing more than the route's limit with 413 ``BODY_TOO_LARGE``.

    The host has usually read it already (:func:`innkeeper_hostapi.bodies.receive`, under the
    route's declared ``max_body`` and the body timeouts); ``max_bytes`` may tighten the limit.
    """
    body = await receive(request, max_body=_route_max_body(request))
    if max_bytes is not None and len(body.raw) > max_bytes:
        raise HttpProblem(413, "BODY_TOO_LARGE", f"request body exceeds {max_bytes} bytes")
    return body.raw


async def read_json(request: web.Request, max_bytes: int | None = None) -> Any:
    """The decoded, structure-guarded JSON body (see :func:`innkeeper_hostapi.bodies.decode_json`).

    Bad JSON is 400 ``INVALID_JSON``; a body over the route's structure limits answers with the
    guard's code (``STRUCTURE_TOO_DEEP``, ``NUMBER_OUT_OF_RANGE``, …).
    """
    raw = await read_body(request, max_bytes)
    body = request[BODY]
    if not body.has_json:
        body.json = decode_json(raw, body.limits)
        body.has_json = True
    return body.json


async def read_struct(
    request: web.Request,
    type: type[T],
    max_bytes: int | None = None,
    *,
    code: str = "INVALID_BODY",
) -> T:
    """The JSON body converted to ``type``; a schema mismatch is 400 ``code`` with its path."""
    value = await read_json(request, max_bytes)
    try:
        return msgspec.convert(value, type=type)
    except msgspec.ValidationError as exc:
        raise HttpProblem(400, code, str(exc)) from None
