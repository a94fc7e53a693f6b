"""The one request-body path: bounded, timed reading, then JSON or multipart decoding with guards.

The host's dispatcher calls :func:`receive` for every mutation that carries a body, before the
route's handler runs: the body is read under the route's byte limit and the configured timeouts,
then decoded by its media type —

- ``application/json``: strict UTF-8 (a leading byte-order mark is skipped), JSON syntax, and the
  route's :class:`~innkeeper_hostapi.structure.StructureLimits` (depth, nodes, string bytes, key
  length, integer range). A route that also accepts file types (an import that takes a PNG or a
  JSON file) receives a JSON body as a file: read and bounded here, decoded by the handler's
  format parser with the same guard from :mod:`innkeeper_hostapi.structure`;
- ``multipart/form-data``: the boundary must be a valid RFC 2046 boundary, the parts are split;
- anything else stays raw bytes for the handler (PNG cards, world-book files).

Every failure is an :class:`~innkeeper_hostapi.errors.HttpProblem` with a stable code (400
``INVALID_JSON`` / ``INVALID_BODY`` / ``STRUCTURE_*`` / ``NUMBER_OUT_OF_RANGE``, 408
``BODY_TIMEOUT``, 413 ``BODY_TOO_LARGE`` / ``STRUCTURE_TOO_MANY_NODES`` /
``STRUCTURE_STRING_TOO_LARGE``), so a handler never sees an exception type that would be a 500.
A client that goes away mid-body raises :class:`ClientGone`, which the host logs as one debug
line. Handlers read the result with :func:`~innkeeper_hostapi.http.read_json`,
:func:`~innkeeper_hostapi.http.read_struct`, :func:`~innkeeper_hostapi.http.read_body` and
:func:`read_parts`.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from aiohttp import web
from aiohttp.helpers import parse_mimetype

from .errors import HttpProblem
from .structure import (
    DEFAULT_LIMITS,
    InvalidJson,
    StructureLimitError,
    StructureLimits,
    decode_document,
)

#: Default request body limit for a route that declares none (bytes).
DEFAULT_MAX_BODY: Final = 1 << 20
#: Seconds a request body may go without a byte before it is refused (408 ``BODY_TIMEOUT``).
DEFAULT_BODY_IDLE_TIMEOUT: Final = 10.0
#: Seconds a whole request body may take to arrive.
DEFAULT_BODY_TIMEOUT: Final = 60.0
#: Parts of one multipart body (an upload form has one or two).
MAX_MULTIPART_PARTS: Final = 64
#: RFC 2046 §5.1.1: a boundary is 1-70 of these characters and does not end with a space.
_BOUNDARY: Final = re.compile(r"[0-9A-Za-z'()+_,\-./:=? ]{0,69}[0-9A-Za-z'()+_,\-./:=?]")
_READ_CHUNK: Final = 65536

JSON_MEDIA_TYPE: Final = "application/json"
MULTIPART_MEDIA_TYPE: Final = "multipart/form-data"


class ClientGone(ConnectionError):
    """The client closed the connection before its request body arrived: nobody to answer."""


@dataclass(frozen=True, slots=True)
class BodyTimeouts:
    """How long a request body may take: per gap between bytes and in total (seconds)."""

    idle: float = DEFAULT_BODY_IDLE_TIMEOUT
    total: float = DEFAULT_BODY_TIMEOUT


@dataclass(frozen=True, slots=True)
class Part:
    """One part of a ``multipart/form-data`` body."""

    name: str | None
    filename: str | None
    content: bytes
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class Body:
    """A received body: raw bytes plus its decoded form for JSON and multipart media types."""

    raw: bytes
    media_type: str
    limits: StructureLimits
    json: Any = None
    has_json: bool = False
    parts: tuple[Part, ...] | None = None


BODY: Final = web.RequestKey("innkeeper.body", Body)


def media_type(request: web.Request) -> str:
    """The request's media type, lower-cased, without parameters."""
    return request.content_type.lower()


def decode_json(
    data: bytes | str, limits: StructureLimits = DEFAULT_LIMITS, *, what: str = "request body"
) -> Any:
    """Decode JSON and enforce ``limits``; every failure is an :class:`HttpProblem`.

    Invalid UTF-8, bad syntax and numbers a float cannot hold are 400 ``INVALID_JSON``; nesting
    the decoder cannot follow is 400 ``STRUCTURE_TOO_DEEP``; the structure codes keep their own
    status (413 for size, 400 for shape). Duplicate keys keep the last value (as ``JSON.parse``).
    """
    try:
        return decode_document(data, limits, what=what)
    except InvalidJson as exc:
        raise HttpProblem(400, "INVALID_JSON", str(exc)) from None
    except StructureLimitError as exc:
        raise HttpProblem(exc.status, exc.code, f"{what}: {exc}") from None


def _boundary(content_type_header: str) -> bytes:
    params = parse_mimetype(content_type_header).parameters
    boundary = params.get("boundary")
    if not boundary:
        raise HttpProblem(400, "INVALID_BODY", "multipart body has no boundary")
    if _BOUNDARY.fullmatch(boundary) is None:
        raise HttpProblem(
            400, "INVALID_BODY", "multipart boundary must be 1-70 RFC 2046 boundary characters"
        )
    return boundary.encode("ascii")


def _disposition_params(value: str) -> dict[str, str]:
    params: dict[str, str] = {}
    for part in value.split(";")[1:]:
        key, _, raw = part.strip().partition("=")
        raw = raw.strip()
        if raw.startswith('"') and raw.endswith('"') and len(raw) >= 2:
            raw = raw[1:-1].replace('\\"', '"')
        params[key.strip().lower()] = raw
    return params


def parse_multipart(body: bytes, content_type_header: str) -> tuple[Part, ...]:
    """Split a ``multipart/form-data`` body (already read under the route's limit) into parts.

    Raises 400 ``INVALID_BODY`` for a missing or invalid boundary, no closing delimiter, a part
    without headers or more than :data:`MAX_MULTIPART_PARTS` parts.
    """
    delimiter = b"--" + _boundary(content_type_header)
    pieces = body.split(delimiter)
    if len(pieces) < 2:
        raise HttpProblem(400, "INVALID_BODY", "multipart body has no part")
    parts: list[Part] = []
    for raw_part in pieces[1:]:
        if raw_part.startswith(b"--"):
            return tuple(parts)
        if len(parts) >= MAX_MULTIPART_PARTS:
            raise HttpProblem(
                400, "INVALID_BODY", f"multipart body has more than {MAX_MULTIPART_PARTS} parts"
            )
        part = raw_part.removeprefix(b"\r\n")
        head, sep, content = part.partition(b"\r\n\r\n")
        if not sep:
            raise HttpProblem(400, "INVALID_BODY", "multipart part has no header block")
        headers: dict[str, str] = {}
        for line in head.decode("latin-1").split("\r\n"):
            key, _, value = line.partition(":")
            headers[key.strip().lower()] = value.strip()
        params = _disposition_params(headers.get("content-disposition", ""))
        filename = params.get("filename")
        if filename is not None:
            filename = filename.encode("latin-1").decode("utf-8", "replace")
        parts.append(Part(params.get("name"), filename, content.removesuffix(b"\r\n"), headers))
    raise HttpProblem(400, "INVALID_BODY", "multipart body has no closing delimiter")


async def _read(request: web.Request, limit: int, timeouts: BodyTimeouts) -> bytes:
    length = request.content_length
    if length is not None and length > limit:
        raise HttpProblem(413, "BODY_TOO_LARGE", f"request body exceeds {limit} bytes")
    chunks: list[bytes] = []
    total = 0
    try:
        async with asyncio.timeout(timeouts.total):
            while True:
                async with asyncio.timeout(timeouts.idle):
                    chunk = await request.content.read(_READ_CHUNK)
                if not chunk:
                    break
                total += len(chunk)
                if total > limit:
                    raise HttpProblem(413, "BODY_TOO_LARGE", f"request body exceeds {limit} bytes")
                chunks.append(chunk)
    except TimeoutError:
        raise HttpProblem(408, "BODY_TIMEOUT", "the request body did not arrive in time") from None
    except ConnectionError as exc:
        raise ClientGone(str(exc)) from None
    if length is not None and total < length:
        raise ClientGone("connection closed before the declared Content-Length arrived")
    return b"".join(chunks)


async def receive(
    request: web.Request,
    *,
    max_body: int = DEFAULT_MAX_BODY,
    limits: StructureLimits = DEFAULT_LIMITS,
    timeouts: BodyTimeouts = BodyTimeouts(),
    decode: bool = True,
) -> Body:
    """Read and decode the request body once (see the module docstring); cached on the request."""
    cached: Body | None = request.get(BODY)
    if cached is not None:
        return cached
    kind = media_type(request)
    body = Body(await _read(request, max_body, timeouts), kind, limits)
    if decode and kind == JSON_MEDIA_TYPE and body.raw:
        body.json = decode_json(body.raw, limits)
        body.has_json = True
    elif kind == MULTIPART_MEDIA_TYPE:
        body.parts = parse_multipart(body.raw, request.headers.get("Content-Type", ""))
    request[BODY] = body
    return body


async def read_parts(request: web.Request) -> tuple[Part, ...]:
    """The parts of a ``multipart/form-data`` body (400 ``INVALID_BODY`` for other bodies)."""
    body = await receive(request)
    if body.parts is None:
        raise HttpProblem(400, "INVALID_BODY", "request body is not multipart/form-data")
    return body.parts


def file_part(parts: tuple[Part, ...]) -> Part:
    """The uploaded file: the part named ``file``, else the first part with a file name."""
    named = next((p for p in parts if p.name == "file"), None)
    if named is not None:
        return named
    with_file = next((p for p in parts if p.filename is not None), None)
    if with_file is None:
        raise HttpProblem(400, "INVALID_BODY", "multipart body has no file part")
    return with_file
