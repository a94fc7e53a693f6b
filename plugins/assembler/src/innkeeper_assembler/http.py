"""Routes under ``/dsh-assembler/api/v1`` (this host's own; the spec's detailed Assembler
routes are not available to us). Mutations follow the host's security rules (same origin, JSON).

| Method | Path | Answer |
| --- | --- | --- |
| GET | ``/capabilities`` | ``{ok, version, protocol, backends, placements, limits, sources}`` |
| GET | ``/sources`` | ``{ok, protocol, sources: [{id, owner, protocol}]}`` |
| GET | ``/strategies`` | ``{ok, strategies}`` |
| GET, PUT, DELETE | ``/strategies/{id}`` | ``{ok, strategy}``; DELETE ``{ok, id}`` |
| GET, PUT, DELETE | ``/sessions/{sessionId}/strategy`` | ``{ok, applied}``; PUT ``{strategyId}`` |
| POST | ``/preview`` | ``{sessionId?, strategyId?, strategy?, input?, kind?}`` → ``{ok, preview}``|
"""

from __future__ import annotations

from typing import Final

import msgspec
from aiohttp import web

from innkeeper_hostapi import HttpProblem, PluginContext, json_response, path_params
from innkeeper_hostapi.assembly import RequestKind, Strategy
from innkeeper_hostapi.http import read_struct

from .limits import STRATEGY_BODY_MAX_BYTES
from .service import Assembler
from .store import StoreError, validate_strategy

__all__ = ["PREFIX", "install_routes"]

PREFIX: Final = "/dsh-assembler/api/v1"
INVALID: Final = "STRATEGY_INVALID"


class _ApplyBody(msgspec.Struct, forbid_unknown_fields=True, rename="camel"):
    strategy_id: str | None


class _PreviewBody(msgspec.Struct, forbid_unknown_fields=True, rename="camel"):
    session_id: str | None = None
    strategy_id: str | None = None
    strategy: Strategy | None = None
    input: str | None = None
    #: ``normal``, ``continue`` (extend the last message) or ``impersonate``.
    kind: RequestKind = "normal"


def _problem(exc: StoreError) -> HttpProblem:
    return HttpProblem(exc.status, exc.code, exc.message)


def install_routes(ctx: PluginContext, assembler: Assembler) -> None:
    """Register every route through ``ctx``."""

    async def capabilities(request: web.Request) -> web.StreamResponse:
        return json_response({"ok": True, **assembler.capabilities()})

    async def sources(request: web.Request) -> web.StreamResponse:
        caps = assembler.capabilities()
        return json_response({"ok": True, "protocol": caps["protocol"], "sources": caps["sources"]})

    async def list_strategies(request: web.Request) -> web.StreamResponse:
        return json_response({"ok": True, "strategies": assembler.strategies()})

    def strategy_id(request: web.Request) -> str:
        return path_params(request)["id"]

    async def get_strategy(request: web.Request) -> web.StreamResponse:
        found = assembler.strategy(strategy_id(request))
        if found is None:
            raise HttpProblem(404, "STRATEGY_NOT_FOUND", "no such strategy")
        return json_response({"ok": True, "strategy": found})

    async def put_strategy(request: web.Request) -> web.StreamResponse:
        strategy = await read_struct(request, Strategy, STRATEGY_BODY_MAX_BYTES, code=INVALID)
        if strategy.id != strategy_id(request):
            raise HttpProblem(400, INVALID, "the body's id differs from the path's")
        try:
            stored = await assembler.put_strategy(strategy)
        except StoreError as exc:
            raise _problem(exc) from None
        return json_response({"ok": True, "strategy": stored})

    async def delete_strategy(request: web.Request) -> web.StreamResponse:
        if not await assembler.delete_strategy(strategy_id(request)):
            raise HttpProblem(404, "STRATEGY_NOT_FOUND", "no such strategy")
        return json_response({"ok": True, "id": strategy_id(request)})

    async def get_applied(request: web.Request) -> web.StreamResponse:
        session_id = path_params(request)["sessionId"]
        return json_response({"ok": True, "applied": assembler.applied(session_id)})

    async def put_applied(request: web.Request) -> web.StreamResponse:
        body = await read_struct(request, _ApplyBody, 4096, code=INVALID)
        try:
            applied = await assembler.apply(path_params(request)["sessionId"], body.strategy_id)
        except StoreError as exc:
            raise _problem(exc) from None
        return json_response({"ok": True, "applied": applied})

    async def delete_applied(request: web.Request) -> web.StreamResponse:
        try:
            await assembler.apply(path_params(request)["sessionId"], None)
        except StoreError as exc:
            raise _problem(exc) from None
        return json_response({"ok": True, "applied": None})

    async def preview(request: web.Request) -> web.StreamResponse:
        body = await read_struct(request, _PreviewBody, STRATEGY_BODY_MAX_BYTES, code=INVALID)
        strategy = body.strategy
        if strategy is not None:
            try:
                validate_strategy(strategy)
            except StoreError as exc:
                raise _problem(exc) from None
        elif body.strategy_id is not None:
            strategy = assembler.strategy(body.strategy_id)
            if strategy is None:
                raise HttpProblem(404, "STRATEGY_NOT_FOUND", "no such strategy")
        try:
            result = await assembler.preview(
                body.session_id, strategy=strategy, pending_input=body.input, kind=body.kind
            )
        except StoreError as exc:
            raise _problem(exc) from None
        return json_response({"ok": True, "preview": result})

    routes = [
        ("GET", "/capabilities", capabilities, "capabilities"),
        ("GET", "/sources", sources, "sources"),
        ("GET", "/strategies", list_strategies, "strategies.list"),
        ("GET", "/strategies/{id}", get_strategy, "strategies.get"),
        ("PUT", "/strategies/{id}", put_strategy, "strategies.put"),
        ("DELETE", "/strategies/{id}", delete_strategy, "strategies.delete"),
        ("GET", "/sessions/{sessionId}/strategy", get_applied, "applied.get"),
        ("PUT", "/sessions/{sessionId}/strategy", put_applied, "applied.put"),
        ("DELETE", "/sessions/{sessionId}/strategy", delete_applied, "applied.delete"),
        ("POST", "/preview", preview, "preview"),
    ]
    for method, path, handler, name in routes:
        ctx.add_route(
            method,
            PREFIX + path,
            handler,
            name=f"assembler.{name}",
            max_body=STRATEGY_BODY_MAX_BYTES,
        )
