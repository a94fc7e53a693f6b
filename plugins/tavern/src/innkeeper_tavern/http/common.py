"""Shared handler plumbing: error translation, ids, bodies, attachments, multipart uploads."""

from __future__ import annotations

import functools
import re
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

from aiohttp import web

from innkeeper_hostapi import HttpProblem, json_response, path_params, read_body, read_json
from innkeeper_tavern.formats.errors import FormatError
from innkeeper_tavern.formats.guards import StructureLimitError
from innkeeper_tavern.formats.worldbook import WorldBookFormatError
from innkeeper_tavern.resources.errors import ResourceError
from innkeeper_tavern.resources.library import valid_id

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


#: Extra bytes a multipart envelope may add around one uploaded file (boundaries, headers).
MULTIPART_OVERHEAD_BYTES: Final = 64 << 10
_ATTACHMENT_UNSAFE: Final = re.compile(r'[\x00-\x1f\x7f"\\/:*?<>|]+')
#: Longest file name offered in ``Content-Disposition``.
MAX_ATTACHMENT_NAME_CHARS: Final = 120


def translate(exc: Exception) -> HttpProblem | None:
    """The HTTP problem for a store or format error (``None`` for anything else)."""
    if isinstance(exc, ResourceError):
        return HttpProblem(exc.status, exc.code, exc.message)
    if isinstance(exc, FormatError):
        message = f"{exc.message} at {exc.path}" if exc.path else exc.message
        return HttpProblem(exc.status, exc.code, message)
    if isinstance(exc, StructureLimitError):
        error = FormatError.from_structure(exc)
        return HttpProblem(error.status, error.code, f"{error.message} at {error.path}")
    if isinstance(exc, WorldBookFormatError):
        return HttpProblem(400, exc.code, str(exc))
    return None


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


def _disposition_params(value: str) -> dict[str, str]:
    params: dict[str, str] = {}
    for part in value.split(";")[1:]:
        key, _, raw = part.strip().partition("=")
        raw = raw.strip()
        if raw.startswith('"') and raw.endswith('"') and len(raw) >= 2:
            raw = raw[1:-1].replace('\\"', '"')
        params[key.strip().lower()] = raw
    return params


def parse_multipart(body: bytes, content_type_header: str) -> tuple[str | None, bytes]:
    """The first file part of a ``multipart/form-data`` body: (file name, bytes).

    The whole body was already read under the route's limit, so parsing never allocates more
    than it. Prefers the part named ``file``; otherwise the first part with a file name.
    """
    match = re.search(r'boundary="?([^";]+)"?', content_type_header, re.IGNORECASE)
    if match is None:
        raise HttpProblem(400, "INVALID_BODY", "multipart body has no boundary")
    delimiter = b"--" + match.group(1).encode("latin-1")
    chosen: tuple[str | None, bytes] | None = None
    for raw_part in body.split(delimiter)[1:]:
        if raw_part.startswith(b"--"):
            break
        part = raw_part[2:] if raw_part.startswith(b"\r\n") else raw_part
        head, sep, content = part.partition(b"\r\n\r\n")
        if not sep:
            continue
        if content.endswith(b"\r\n"):
            content = content[:-2]
        headers: dict[str, str] = {}
        for line in head.decode("latin-1").split("\r\n"):
            key, _, value = line.partition(":")
            headers[key.strip().lower()] = value.strip()
        params = _disposition_params(headers.get("content-disposition", ""))
        file_name = params.get("filename")
        if file_name is not None:
            file_name = file_name.encode("latin-1").decode("utf-8", "replace")
        if params.get("name") == "file":
            return file_name, content
        if chosen is None and file_name is not None:
            chosen = (file_name, content)
    if chosen is None:
        raise HttpProblem(400, "INVALID_BODY", "multipart body has no file part")
    return chosen


async def upload(request: web.Request) -> tuple[str | None, bytes]:
    """An uploaded file: a raw body (name from ``?filename=``) or a multipart ``file`` part."""
    body = await read_body(request)
    if request.content_type.lower() == "multipart/form-data":
        name, data = parse_multipart(body, request.headers.get("Content-Type", ""))
        return name or request.query.get("filename"), data
    return request.query.get("filename"), body
