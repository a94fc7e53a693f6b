"""Body limits hold while the body streams (issue 33): every route of the route table that reads
a body answers 413 ``BODY_TOO_LARGE`` as soon as a chunked body crosses its limit, exactly as
it does for a ``Content-Length`` above it, instead of reading on until the body timeout (408).

The bodies are written on a raw socket so the framing is ours: chunks that add up to one byte
over the limit with no terminating chunk (the server must not wait for more), one chunk that
declares more than the limit and delivers one byte over it, and the first again under a
``Transfer-Encoding`` list (``gzip, chunked``). The client waits at most :data:`ANSWER_WITHIN`
seconds, well under the host's body idle timeout, so a reader that waits for the rest fails here
instead of answering 408 later.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Final
from urllib.parse import urlsplit

import msgspec
import pytest

from innkeeper_core.http.routes import RouteEntry
from innkeeper_hostapi.bodies import DEFAULT_BODY_IDLE_TIMEOUT

from .conftest import Harness

#: Seconds the client waits for the answer: half the body idle timeout.
ANSWER_WITHIN: Final = DEFAULT_BODY_IDLE_TIMEOUT / 2
_PIECE: Final = 64 << 10
#: (A whole chunked body with its terminator: core/tests/host/test_http_security.py.)
SHAPES: Final = ("chunks-no-terminator", "one-big-chunk", "listed-chunked")
#: ``Transfer-Encoding`` of a shape: a list ending in chunked frames the body the same way.
_ENCODING: Final = {"listed-chunked": "gzip, chunked"}


def _frames(over: int, shape: str) -> Iterator[bytes]:
    if shape == "one-big-chunk":
        yield f"{2 * over:x}\r\n".encode()
        for at in range(0, over, _PIECE):
            yield b" " * min(_PIECE, over - at)
        return
    for at in range(0, over, _PIECE):
        size = min(_PIECE, over - at)
        yield f"{size:x}\r\n".encode() + b" " * size + b"\r\n"


async def _send(
    harness: Harness, entry: RouteEntry, shape: str, media: str | None = None, size: int = 0
) -> tuple[int, dict[str, object]]:
    """Stream a chunked body (``size`` bytes, by default one over the route's limit); the
    status and problem of the answer."""
    url = urlsplit(harness.origin)
    assert url.hostname is not None and url.port is not None
    reader, writer = await asyncio.open_connection(url.hostname, url.port)
    if media is None:
        media = "application/json" if "application/json" in entry.accepts else min(entry.accepts)
    encoding = _ENCODING.get(shape, "chunked")
    head = (
        f"{entry.method} {harness.path_for(entry)} HTTP/1.1\r\nHost: {url.netloc}\r\n"
        f"Origin: {harness.origin}\r\nContent-Type: {media}\r\n"
        f"Transfer-Encoding: {encoding}\r\n\r\n"
    )

    async def write() -> None:
        writer.write(head.encode())
        try:
            for frame in _frames(size or entry.max_body + 1, shape):
                writer.write(frame)
                await writer.drain()
        except ConnectionError:
            pass  # the server answered and closed: what is left is not read

    sending = asyncio.ensure_future(write())
    try:
        async with asyncio.timeout(ANSWER_WITHIN):
            status_line = await reader.readline()
            headers: dict[str, str] = {}
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode("latin-1").partition(":")
                headers[name.strip().lower()] = value.strip()
            body = await reader.readexactly(int(headers.get("content-length", "0")))
    finally:
        sending.cancel()
        writer.close()
    return int(status_line.split()[1]), msgspec.json.decode(body)


def _limited(harness: Harness) -> list[RouteEntry]:
    """Every route that reads a body (the mutating methods), with its declared limit."""
    return [e for e in harness.routes if e.max_body > 0 and e.accepts]


@pytest.mark.parametrize("shape", SHAPES)
def test_every_limited_route_refuses_an_over_limit_chunked_body_at_once(
    harness: Harness, shape: str
) -> None:
    routes = _limited(harness)
    assert len(routes) >= 40, "the route table should hold every plugin's routes"
    wrong: list[str] = []
    for entry in routes:
        try:
            status, problem = harness.runner.run(_send(harness, entry, shape))
        except TimeoutError:
            wrong.append(f"{entry.method} {entry.template}: no answer in {ANSWER_WITHIN} s")
            continue
        if (status, problem.get("code")) != (413, "BODY_TOO_LARGE"):
            wrong.append(f"{entry.method} {entry.template}: {status} {problem}")
    assert not wrong, "\n".join(wrong)


def test_a_chunked_body_of_a_refused_media_type_is_not_read(harness: Harness) -> None:
    """The media-type check runs before any byte of a chunked body is read, whatever its
    ``Transfer-Encoding`` list: ten bytes and no terminating chunk still answer 415 at once."""
    wrong: list[str] = []
    for entry in _limited(harness):
        for shape in ("chunks-no-terminator", "listed-chunked"):
            try:
                status, problem = harness.runner.run(
                    _send(harness, entry, shape, media="text/x-fuzz", size=10)
                )
            except TimeoutError:
                wrong.append(f"{entry.method} {entry.template} {shape}: no answer")
                continue
            if (status, problem.get("code")) != (415, "UNSUPPORTED_MEDIA_TYPE"):
                wrong.append(f"{entry.method} {entry.template} {shape}: {status} {problem}")
    assert not wrong, "\n".join(wrong)
