"""The catch-all handler that serves the route table, with per-plugin drain and admission."""

from __future__ import annotations

import asyncio
from typing import Final

from aiohttp import web

from innkeeper_core.http.routes import MethodNotAllowed, RouteTable
from innkeeper_hostapi import HttpProblem
from innkeeper_hostapi.http import ROUTE_MAX_BODY, ROUTE_PARAMS

BODY_METHODS: Final = frozenset({"POST", "PUT", "PATCH", "DELETE"})


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
    length = request.content_length
    if length is not None:
        return length > 0
    return request.headers.get("Transfer-Encoding", "").lower() == "chunked"


class Dispatcher:
    """Resolves a request against the route table snapshot and calls the handler."""

    def __init__(self, routes: RouteTable, gate: PluginGate) -> None:
        self.routes = routes
        self.gate = gate

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
        request[ROUTE_PARAMS] = result.params
        request[ROUTE_MAX_BODY] = entry.max_body
        self.gate.enter(owner)
        try:
            return await entry.handler(request)
        finally:
            self.gate.leave(owner)
