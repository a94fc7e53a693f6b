"""The catch-all handler that serves the route table, with per-plugin drain and admission.

Before a route's handler runs, the dispatcher checks the body's media type and declared length,
admits it against the per-peer cap on bodies still arriving, then reads and decodes it once
through :func:`innkeeper_hostapi.bodies.receive` (timeouts, UTF-8, JSON structure guards,
multipart). A handler therefore never sees a body that would make it fail with a 500.
"""

from __future__ import annotations

import asyncio
from typing import Final

from aiohttp import web

from innkeeper_core.http.routes import MethodNotAllowed, RouteEntry, RouteTable
from innkeeper_hostapi import HttpProblem
from innkeeper_hostapi.bodies import JSON_MEDIA_TYPE, BodyTimeouts, receive
from innkeeper_hostapi.http import ROUTE_MAX_BODY, ROUTE_PARAMS

BODY_METHODS: Final = frozenset({"POST", "PUT", "PATCH", "DELETE"})
JSON_ONLY: Final = frozenset({JSON_MEDIA_TYPE})


class PluginGate:
    """Per-owner admission: a reloading owner answers 503; in-flight counts allow draining."""

    def __init__(self) -> None:
        self._closed: set[str] = set()
        self._inflight: dict[str, int] = {}
        self._idle: dict[str, asyncio.Event] = {}

    def close(self, owner: str) -> None:
        self._closed.add(owner)

    def open(self, owner: str) -> None:
        self._closed.discard(owner)

    def is_closed(self, owner: str) -> bool:
        return owner in self._closed

    def enter(self, owner: str) -> None:
        self._inflight[owner] = self._inflight.get(owner, 0) + 1
        event = self._idle.get(owner)
        if event is not None:
            event.clear()

    def leave(self, owner: str) -> None:
        count = self._inflight[owner] - 1
        if count:
            self._inflight[owner] = count
            return
        del self._inflight[owner]
        event = self._idle.get(owner)
        if event is not None:
            event.set()

    def inflight(self, owner: str) -> int:
        return self._inflight.get(owner, 0)

    async def drain(self, owner: str, limit_seconds: float) -> bool:
        """Wait until ``owner`` has no request in flight; ``False`` if ``limit_seconds`` ran out."""
        if not self._inflight.get(owner):
            return True
        event = self._idle.setdefault(owner, asyncio.Event())
        event.clear()
        try:
            async with asyncio.timeout(limit_seconds):
                await event.wait()
        except TimeoutError:
            return False
        finally:
            self._idle.pop(owner, None)
        return True


def _has_body(request: web.Request) -> bool:
    """Whether the request carries a body, as the HTTP parser framed it.

    Asked of the parser, not of the headers: a ``Transfer-Encoding`` list ending in chunked
    (``gzip, chunked``) is a chunked body too, and one the dispatcher took for bodiless skipped
    the media-type check, the per-peer admission and the configured timeouts, and was read by the
    handler until the body timeout (408) instead of being refused at once.
    """
    length = request.content_length
    if length is not None:
        return length > 0
    return request.body_exists


def _peer(request: web.Request) -> str:
    peer = request.transport.get_extra_info("peername") if request.transport else None
    return str(peer[0]) if isinstance(peer, tuple) and peer else ""


class Dispatcher:
    """Resolves a request against the route table snapshot and calls the handler."""

    def __init__(
        self,
        routes: RouteTable,
        gate: PluginGate,
        *,
        timeouts: BodyTimeouts | None = None,
        max_pending_per_peer: int = 128,
    ) -> None:
        self.routes = routes
        self.gate = gate
        self.timeouts = timeouts or BodyTimeouts()
        self.max_pending_per_peer = max_pending_per_peer
        #: Requests per peer address whose body is still arriving.
        self._pending: dict[str, int] = {}

    def pending(self, peer: str) -> int:
        """How many requests from ``peer`` are still sending their body."""
        return self._pending.get(peer, 0)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        result = self.routes.resolve(request.method, request.rel_url.raw_path)
        if result is None:
            raise HttpProblem(404, "NOT_FOUND", f"no route for {request.rel_url.path}")
        if isinstance(result, MethodNotAllowed):
            raise HttpProblem(
                405,
                "METHOD_NOT_ALLOWED",
                f"{request.method} is not allowed here",
                headers={"Allow": ", ".join(result.allowed)},
            )
        entry = result.entry
        owner = entry.owner
        if self.gate.is_closed(owner):
            raise HttpProblem(
                503,
                "PLUGIN_RELOADING",
                f"plugin {owner!r} is reloading; retry shortly",
                headers={"Retry-After": "1"},
            )
        if request.method in BODY_METHODS and _has_body(request):
            media_type = request.content_type.lower()
            if media_type not in entry.accepts:
                raise HttpProblem(
                    415,
                    "UNSUPPORTED_MEDIA_TYPE",
                    f"expected {' or '.join(sorted(entry.accepts))}, got {media_type}",
                )
            length = request.content_length
            if length is not None and length > entry.max_body:
                raise HttpProblem(
                    413, "BODY_TOO_LARGE", f"request body exceeds {entry.max_body} bytes"
                )
            await self._receive(request, entry)
        request[ROUTE_PARAMS] = result.params
        request[ROUTE_MAX_BODY] = entry.max_body
        self.gate.enter(owner)
        try:
            return await entry.handler(request)
        finally:
            self.gate.leave(owner)

    async def _receive(self, request: web.Request, entry: RouteEntry) -> None:
        peer = _peer(request)
        count = self._pending.get(peer, 0)
        if count >= self.max_pending_per_peer:
            raise HttpProblem(
                429,
                "TOO_MANY_PENDING_BODIES",
                f"this client already has {count} requests still sending their body",
                headers={"Retry-After": "1"},
            )
        self._pending[peer] = count + 1
        try:
            await receive(
                request,
                max_body=entry.max_body,
                limits=entry.json_limits,
                timeouts=self.timeouts,
                # A route that also takes files decodes a JSON file with its format parser.
                decode=entry.accepts <= JSON_ONLY,
            )
        finally:
            left = self._pending[peer] - 1
            if left:
                self._pending[peer] = left
            else:
                del self._pending[peer]
