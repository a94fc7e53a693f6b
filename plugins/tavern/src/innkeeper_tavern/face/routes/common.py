"""Shared handler plumbing: error translation, ids, bodies, attachments, uploads."""

from __future__ import annotations

import functools
import re
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

from aiohttp import web

from innkeeper_hostapi import HttpProblem, json_response, path_params, read_body, read_json
from innkeeper_hostapi.bodies import MULTIPART_MEDIA_TYPE, file_part, read_parts
from innkeeper_hostapi.structure import StructureLimits
from innkeeper_tavern.pure.formats.errors import FormatError, field_message
from innkeeper_tavern.pure.formats.guards import StructureLimitError
from innkeeper_tavern.pure.formats.worldbook import WorldBookFormatError
from innkeeper_tavern.state.resources.errors import ResourceError
from innkeeper_tavern.state.resources.library import valid_id

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True, slots=True)
class Route:
    """One route to register: ``ctx.add_route(method, V1_PREFIX + path, handler, ...)``."""

    method: str
    path: str
    handler: Handler
    name: str
    max_body: int | None = None
    accepts: tuple[str, ...] | None = None
    #: Structure guards of a JSON body (the host's default: the spec's world-book guard).
    json_limits: StructureLimits | None = None


#: Extra bytes a multipart envelope may add around one uploaded file (boundaries, headers).
MULTIPART_OVERHEAD_BYTES: Final = 64 << 10
_ATTACHMENT_UNSAFE: Final = re.compile(r'[\x00-\x1f\x7f"\\/:*?<>|]+')
#: Longest file name offered in ``Content-Disposition``.
MAX_ATTACHMENT_NAME_CHARS: Final = 120


def translate(exc: Exception) -> HttpProblem | None:
    """The HTTP problem for a store or format error (``None`` for anything else).

    A format error names the offending field of the document as ``error.details.path`` (a JSON
    path, ``$`` for the whole document; docs/http.md "Errors"), the same for every route.
    """
    if isinstance(exc, ResourceError):
        return HttpProblem(exc.status, exc.code, exc.message)
    if isinstance(exc, FormatError):
        return _format_problem(exc.status, exc.code, exc.message, exc.path)
    if isinstance(exc, StructureLimitError):
        error = FormatError.from_structure(exc)
        return _format_problem(error.status, error.code, error.message, error.path)
    if isinstance(exc, WorldBookFormatError):
        return _format_problem(400, exc.code, str(exc), exc.path)
    return None


def _format_problem(status: int, code: str, message: str, path: str) -> HttpProblem:
    return HttpProblem(status, code, field_message(message, path), details={"path": path})


def handler(fn: Handler) -> Handler:
    """Wrap a handler so store and format errors answer as ``{ok:false, error, code}``."""

    @functools.wraps(fn)
    async def wrapped(request: web.Request) -> web.StreamResponse:
        try:
            return await fn(request)
        except (ResourceError, FormatError, StructureLimitError, WorldBookFormatError) as exc:
            problem = translate(exc)
            assert problem is not None
            raise problem from None

    return wrapped


def resource_id(request: web.Request, not_found_code: str, what: str) -> str:
    """The ``{id}`` path parameter; an id that could never be stored is 404."""
    value = path_params(request)["id"]
    if not valid_id(value):
        raise HttpProblem(404, not_found_code, f"{what} {value[:100]!r} does not exist")
    return value


async def json_object(request: web.Request) -> dict[str, Any]:
    """A bounded JSON body that must be an object (400 ``INVALID_BODY`` otherwise)."""
    body = await read_json(request)
    if not isinstance(body, dict):
        raise HttpProblem(400, "INVALID_BODY", "request body must be a JSON object")
    return body


def bad_request(message: str, code: str = "INVALID_BODY") -> HttpProblem:
    """A 400 problem to raise for a body that does not fit the route."""
    return HttpProblem(400, code, message)


def ok(status: int = 200, **fields: Any) -> web.Response:
    """``{ok: true, ...fields}``."""
    return json_response({"ok": True, **fields}, status=status)


def attachment(data: bytes, file_name: str, content_type: str) -> web.Response:
    """A download: ``Content-Disposition: attachment`` with an ASCII and a UTF-8 file name."""
    safe = _ATTACHMENT_UNSAFE.sub("_", file_name).strip(" .")[:MAX_ATTACHMENT_NAME_CHARS]
    safe = safe or "export"
    ascii_name = safe.encode("ascii", "replace").decode("ascii").replace("?", "_")
    quoted = urllib.parse.quote(safe, safe="")
    disposition = f"attachment; filename=\"{ascii_name}\"; filename*=UTF-8''{quoted}"
    return web.Response(
        body=data,
        content_type=content_type,
        headers={"Content-Disposition": disposition, "Cache-Control": "no-store"},
    )


async def upload(request: web.Request) -> tuple[str | None, bytes]:
    """An uploaded file: a raw body (name from ``?filename=``) or a multipart ``file`` part."""
    if request.content_type.lower() == MULTIPART_MEDIA_TYPE:
        part = file_part(await read_parts(request))
        return part.filename or request.query.get("filename"), part.content
    return request.query.get("filename"), await read_body(request)
