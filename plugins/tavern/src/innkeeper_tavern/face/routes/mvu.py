"""The v1 MVU primitives under ``/pmp-dsh-tavern/api/v1``.

docs/contract/mvu.md#http: reads take a JSON ``scope`` (and ``id`` where it applies), a current
scope is ``{authority:'local', sessionId}`` and only ``/resource`` accepts a historical
``messageId``/``endEventId``; an update is ``{id, scope, content, expectedRevision,
operationId}``; legacy and broken sources refuse edits. ``GET /mvu/snapshot?scope=`` reads a
reply's variables (docs/contract/mvu-cards.md#bubble-binding).

=======  ======================================  ============================================
GET      ``/mvu/resources?scope=``               ``{ok, resources}`` (no content)
GET      ``/mvu/resource?id=&scope=``            ``{ok, resource}``; 404 ``MVU_NOT_FOUND``
GET      ``/mvu/history?id=&scope=&includeBefore``  ``{ok, history}`` oldest first
GET      ``/mvu/facts?id=&scope=``               ``{ok, facts}``
POST     ``/mvu/update``                         ``{ok, receipt, resource}``
GET      ``/mvu/snapshot?scope=``                ``{ok, snapshot}``
=======  ======================================  ============================================

Errors are ``{ok:false, error, code}`` with the service's stable codes
(:class:`~innkeeper_hostapi.mvu.MvuServiceError`). These routes are for the host UI; they are
not exposed to card VMs and add no processor registration endpoint.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, Final

from aiohttp import web

from innkeeper_hostapi import HttpProblem, json_response, read_json
from innkeeper_hostapi.mvu import MvuServiceError
from innkeeper_hostapi.structure import InvalidJson, StructureLimitError, decode_document
from innkeeper_tavern.face.routes.common import Route
from innkeeper_tavern.features.mvu_service.service import MvuService
from innkeeper_tavern.pure.mvu import MAX_STATE_BYTES

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

#: Body of ``POST /mvu/update``: one whole variables object (2 MiB, docs/contract/mvu.md#budgets)
#: plus the envelope fields.
UPDATE_BODY_LIMIT: Final = MAX_STATE_BYTES + (64 << 10)
#: Characters of the ``scope`` query parameter.
MAX_SCOPE_CHARS: Final = 4096


def _errors(fn: Handler) -> Handler:
    @functools.wraps(fn)
    async def wrapped(request: web.Request) -> web.StreamResponse:
        try:
            return await fn(request)
        except MvuServiceError as exc:
            raise HttpProblem(exc.status, exc.code, exc.message) from None

    return wrapped


def _scope(request: web.Request, *, required: bool = True) -> dict[str, Any]:
    raw = request.query.get("scope")
    if raw is None:
        if required:
            raise HttpProblem(400, "MVU_SCOPE_INVALID", "scope is required (JSON)")
        return {"authority": "local"}
    if len(raw) > MAX_SCOPE_CHARS:
        raise HttpProblem(400, "MVU_SCOPE_INVALID", "scope is too long")
    try:
        # The host's guarded decoder (depth, integers, …), as for request bodies.
        value = decode_document(raw, what="scope")
    except (InvalidJson, StructureLimitError) as exc:
        raise HttpProblem(400, "MVU_SCOPE_INVALID", str(exc)) from None
    if not isinstance(value, dict):
        raise HttpProblem(400, "MVU_SCOPE_INVALID", "scope must be a JSON object")
    return value


def _current_session_scope(scope: dict[str, Any]) -> None:
    if not isinstance(scope.get("sessionId"), str):
        raise HttpProblem(400, "MVU_SCOPE_INVALID", "scope needs {authority:'local', sessionId}")
    if "messageId" in scope or "endEventId" in scope:
        raise HttpProblem(400, "MVU_SCOPE_INVALID", "only /mvu/resource takes historical scopes")


def _id(request: web.Request) -> str:
    value = request.query.get("id")
    if not value:
        raise HttpProblem(400, "MVU_ID_INVALID", "id is required")
    return value


def mvu_routes(service: Callable[[], MvuService]) -> list[Route]:
    """The v1 MVU routes; ``service`` resolves the service at call time."""

    @_errors
    async def resources(request: web.Request) -> web.StreamResponse:
        scope = _scope(request, required=False)
        if "messageId" in scope or "endEventId" in scope:
            raise HttpProblem(400, "MVU_SCOPE_INVALID", "list takes a current scope")
        return json_response({"ok": True, "resources": await service().list(scope=scope)})

    @_errors
    async def resource(request: web.Request) -> web.StreamResponse:
        scope = _scope(request)
        if not isinstance(scope.get("sessionId"), str):
            raise HttpProblem(
                400, "MVU_SCOPE_INVALID", "scope needs {authority:'local', sessionId}"
            )
        record = await service().read(id=_id(request), scope=scope)
        if record is None:
            raise HttpProblem(404, "MVU_NOT_FOUND", "no such MVU resource")
        return json_response({"ok": True, "resource": record})

    @_errors
    async def history(request: web.Request) -> web.StreamResponse:
        scope = _scope(request)
        _current_session_scope(scope)
        include = request.query.get("includeBefore", "false").lower() in ("1", "true")
        rows = await service().history(id=_id(request), scope=scope, include_before=include)
        return json_response({"ok": True, "history": rows})

    @_errors
    async def facts(request: web.Request) -> web.StreamResponse:
        scope = _scope(request)
        _current_session_scope(scope)
        return json_response(
            {"ok": True, "facts": await service().facts(id=_id(request), scope=scope)}
        )

    @_errors
    async def update(request: web.Request) -> web.StreamResponse:
        body = await read_json(request)
        if not isinstance(body, dict):
            raise HttpProblem(400, "INVALID_BODY", "request body must be a JSON object")
        unknown = set(body) - {"id", "scope", "content", "expectedRevision", "operationId"}
        if unknown:
            raise HttpProblem(400, "INVALID_BODY", f"unknown field {sorted(unknown)[0]!r}")
        scope = body.get("scope")
        if not isinstance(scope, dict):
            raise HttpProblem(400, "MVU_SCOPE_INVALID", "scope must be an object")
        _current_session_scope(scope)
        state_id = body.get("id")
        if not isinstance(state_id, str) or not state_id:
            raise HttpProblem(400, "MVU_ID_INVALID", "id is required")
        content = body.get("content")
        if not isinstance(content, dict):
            raise HttpProblem(400, "MVU_CONTENT_INVALID", "content must be an object")
        result = await service().update(
            id=state_id,
            content=content,
            expected_revision=body.get("expectedRevision"),  # type: ignore[arg-type]
            operation_id=body.get("operationId"),  # type: ignore[arg-type]
            scope=scope,
        )
        return json_response({"ok": True, **result})

    @_errors
    async def snapshot(request: web.Request) -> web.StreamResponse:
        scope = _scope(request)
        return json_response({"ok": True, "snapshot": await service().snapshot(scope)})

    return [
        Route("GET", "/mvu/resources", resources, "tavern.mvu.resources"),
        Route("GET", "/mvu/resource", resource, "tavern.mvu.resource"),
        Route("GET", "/mvu/history", history, "tavern.mvu.history"),
        Route("GET", "/mvu/facts", facts, "tavern.mvu.facts"),
        Route("POST", "/mvu/update", update, "tavern.mvu.update", max_body=UPDATE_BODY_LIMIT),
        Route("GET", "/mvu/snapshot", snapshot, "tavern.mvu.snapshot"),
    ]


__all__ = ["UPDATE_BODY_LIMIT", "mvu_routes"]
