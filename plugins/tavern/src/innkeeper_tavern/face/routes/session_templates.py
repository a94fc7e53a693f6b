"""Session-template and session-configuration routes of the v1 bundled UI contract.

`docs/contract/http-api.md#prefixes`, `docs/contract/resources.md#portable-json`,
`docs/contract/resources.md#template-editing` and
`docs/contract/http-api.md#version-responsibilities`:

========  ==========================================  =========================================
GET       ``/session-templates``                      ``{selectedId, templates:[{…, contents,
                                                      diagnostics}]}``
POST      ``/session-templates``                      ``{name, selection?}`` or ``{name,
                                                      sourceSessionId}`` → 201; selects it
POST      ``/session-templates/import``               Tavern template JSON (256 KiB) → 201, new
                                                      id, selection kept
POST      ``/session-templates/select``               ``{id: string|null}``
GET       ``/session-templates/{id}``                 template, contents, diagnostics
GET       ``/session-templates/{id}/export``          Tavern JSON attachment (no ``ok`` wrapper)
PATCH     ``/session-templates/{id}``                 ``{name?, selection?|sourceSessionId?}``
DELETE    ``/session-templates/{id}``                 ``{ok, id}``
POST      ``/session-configurations/preview``         ``{source}`` → ``{selection, contents,
                                                      diagnostics, available}``
POST      ``/session-configurations/apply``           ``{targetSessionId, source}``
========  ==========================================  =========================================

Every JSON write is limited to 64 KiB, import to 256 KiB (413 ``BODY_TOO_LARGE``). Unknown
top-level fields are rejected (400 ``INVALID_SESSION_TEMPLATE_REQUEST``): clients must not send
back a whole response with ids or timestamps. ``selection`` and ``sourceSessionId`` are mutually
exclusive, and an explicit ``selection`` replaces the whole configuration (omitted fields are
blank). Creating or editing a template never changes a session's bindings.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, Final

import msgspec
from aiohttp import web

from innkeeper_hostapi import (
    HttpProblem,
    PluginContext,
    json_response,
    path_params,
    read_json,
)
from innkeeper_hostapi.agents import AGENTS, SESSIONS
from innkeeper_tavern.pure.api_paths import V1_PREFIX
from innkeeper_tavern.state.resources import TavernResources
from innkeeper_tavern.state.session_bindings.model import SelectionInvalid
from innkeeper_tavern.state.session_bindings.store import SelectionStoreError, SessionSelectionStore
from innkeeper_tavern.state.session_templates import (
    SESSION_CONFIGURATIONS,
    SESSION_TEMPLATES,
    SessionConfigurations,
    SessionTemplateStore,
    TemplateError,
    parse_source,
)
from innkeeper_tavern.state.session_templates.bindings import TemplateBindings
from innkeeper_tavern.state.session_templates.errors import INVALID_SESSION_TEMPLATE_REQUEST
from innkeeper_tavern.state.session_templates.model import (
    Template,
    check_template_name,
    export_document,
    parse_envelope,
    parse_explicit_selection,
    template_to_wire,
)
from innkeeper_tavern.state.session_templates.store import (
    DEFAULT_MAX_STATE_BYTES,
    DEFAULT_MAX_TEMPLATES,
    HARD_MAX_STATE_BYTES,
    HARD_MAX_TEMPLATES,
)

from .common import attachment

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

#: `docs/contract/http-api.md#prefixes`: prefix of every v1 route.
#: `docs/contract/resources.md#portable-json`: template writes other than import.
TEMPLATE_BODY_LIMIT: Final = 64 << 10
#: Same section: a template import is at most 256 KiB.
TEMPLATE_IMPORT_BODY_LIMIT: Final = 256 << 10
#: ``[plugins.tavern]`` options: the template cap (default 100, at most 200) and the byte cap of
#: ``session-templates.json`` (default 512 KiB, at most 2 MiB).
MAX_TEMPLATES_OPTION: Final = "max_session_templates"
MAX_TEMPLATE_BYTES_OPTION: Final = "max_session_template_bytes"

_CREATE_KEYS: Final = frozenset({"name", "selection", "sourceSessionId"})


def _handler(fn: Handler) -> Handler:
    """Answer template, selection and store errors as ``{ok:false, error, code, …}``."""

    @functools.wraps(fn)
    async def wrapped(request: web.Request) -> web.StreamResponse:
        try:
            return await fn(request)
        except TemplateError as exc:
            if exc.extra:
                body = {"ok": False, "error": exc.message, "code": exc.code, **exc.extra}
                return json_response(body, status=exc.status)
            raise HttpProblem(exc.status, exc.code, exc.message) from None
        except SelectionInvalid as exc:
            raise HttpProblem(400, exc.code, exc.message) from None
        except SelectionStoreError as exc:
            raise HttpProblem(exc.status, exc.code, exc.message) from None

    return wrapped


def _invalid(message: str) -> TemplateError:
    return TemplateError(400, INVALID_SESSION_TEMPLATE_REQUEST, message)


async def _object(request: web.Request, allowed: frozenset[str]) -> dict[str, Any]:
    body = await read_json(request)
    if not isinstance(body, dict):
        raise _invalid("request body must be a JSON object")
    extra = sorted(k for k in body if k not in allowed)
    if extra:
        raise _invalid(f"unsupported field {extra[0][:60]!r}")
    return body


def _source_session(body: dict[str, Any]) -> str:
    value = body["sourceSessionId"]
    if not isinstance(value, str) or not value:
        raise _invalid("sourceSessionId must be a non-empty string")
    return value


def _option(ctx: PluginContext, key: str, default: int, hard: int) -> int:
    value = ctx.config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= hard:
        raise ValueError(f"{key} must be an integer from 1 to {hard}")
    return value


def register_template_routes(
    ctx: PluginContext, templates: SessionTemplateStore, configurations: SessionConfigurations
) -> None:
    """Register the template and configuration routes under :data:`V1_PREFIX` through ``ctx``."""

    def detail(template: Template) -> dict[str, Any]:
        selection = template.selection
        return {
            "template": template_to_wire(template),
            "contents": configurations.contents(selection),
            "diagnostics": configurations.diagnostics(selection),
        }

    def template_id(request: web.Request) -> str:
        return path_params(request)["id"]

    @_handler
    async def list_templates(request: web.Request) -> web.StreamResponse:
        rows = []
        for template in templates.templates():
            rows.append(
                {
                    **template_to_wire(template),
                    "contents": configurations.contents(template.selection),
                    "diagnostics": configurations.diagnostics(template.selection),
                }
            )
        return json_response({"ok": True, "selectedId": templates.selected_id, "templates": rows})

    @_handler
    async def create(request: web.Request) -> web.StreamResponse:
        body = await _object(request, _CREATE_KEYS)
        if "selection" in body and "sourceSessionId" in body:
            raise _invalid("choose selection or sourceSessionId, not both")
        if "name" not in body:
            raise _invalid("name is required")
        name = check_template_name(body["name"])
        if "sourceSessionId" in body:
            selection = await configurations.session_selection(_source_session(body))
        else:
            selection = parse_explicit_selection(body.get("selection", {}))
        template = await templates.create(name, selection, select=True)
        return json_response({"ok": True, **detail(template)}, status=201)

    @_handler
    async def import_template(request: web.Request) -> web.StreamResponse:
        document = await read_json(request)
        name, selection = parse_envelope(document)
        template = await templates.create(name, selection, select=False)
        return json_response({"ok": True, **detail(template)}, status=201)

    @_handler
    async def export(request: web.Request) -> web.StreamResponse:
        template = templates.get(template_id(request))
        data = msgspec.json.format(msgspec.json.encode(export_document(template)), indent=2)
        return attachment(
            data + b"\n", f"{template.name}.session-template.json", "application/json"
        )

    @_handler
    async def select(request: web.Request) -> web.StreamResponse:
        body = await _object(request, frozenset({"id"}))
        if "id" not in body:
            raise _invalid("id is required (a template id, or null to clear)")
        value = body["id"]
        if value is not None and not isinstance(value, str):
            raise _invalid("id must be a string or null")
        template = await templates.select(value)
        return json_response(
            {
                "ok": True,
                "selectedId": templates.selected_id,
                "template": None if template is None else template_to_wire(template),
            }
        )

    @_handler
    async def get(request: web.Request) -> web.StreamResponse:
        return json_response({"ok": True, **detail(templates.get(template_id(request)))})

    @_handler
    async def patch(request: web.Request) -> web.StreamResponse:
        tid = template_id(request)
        templates.get(tid)  # 404 before any body check
        body = await _object(request, _CREATE_KEYS)
        if "selection" in body and "sourceSessionId" in body:
            raise _invalid("choose selection or sourceSessionId, not both")
        name = check_template_name(body["name"]) if "name" in body else None
        selection = None
        if "selection" in body:
            selection = parse_explicit_selection(body["selection"])
        elif "sourceSessionId" in body:
            selection = await configurations.session_selection(_source_session(body))
        template = await templates.update(tid, name=name, selection=selection)
        return json_response({"ok": True, **detail(template)})

    @_handler
    async def delete(request: web.Request) -> web.StreamResponse:
        removed = await templates.delete(template_id(request))
        return json_response({"ok": True, "id": removed.id})

    @_handler
    async def preview(request: web.Request) -> web.StreamResponse:
        body = await _object(request, frozenset({"source"}))
        result = await configurations.preview(parse_source(body.get("source")))
        return json_response({"ok": True, **result})

    @_handler
    async def apply(request: web.Request) -> web.StreamResponse:
        body = await _object(request, frozenset({"targetSessionId", "source"}))
        target = body.get("targetSessionId")
        if not isinstance(target, str) or not target:
            raise _invalid("targetSessionId must be a non-empty string")
        source = parse_source(body.get("source"))
        return json_response({"ok": True, **await configurations.apply(target, source)})

    limit = TEMPLATE_BODY_LIMIT
    base = "/session-templates"
    rows: list[tuple[str, str, Handler, str, int | None]] = [
        ("GET", base, list_templates, "tavern.v1.session_templates.list", None),
        ("POST", base, create, "tavern.v1.session_templates.create", limit),
        (
            "POST",
            f"{base}/import",
            import_template,
            "tavern.v1.session_templates.import",
            TEMPLATE_IMPORT_BODY_LIMIT,
        ),
        ("POST", f"{base}/select", select, "tavern.v1.session_templates.select", limit),
        ("GET", f"{base}/{{id}}/export", export, "tavern.v1.session_templates.export", None),
        ("GET", f"{base}/{{id}}", get, "tavern.v1.session_templates.get", None),
        ("PATCH", f"{base}/{{id}}", patch, "tavern.v1.session_templates.patch", limit),
        ("DELETE", f"{base}/{{id}}", delete, "tavern.v1.session_templates.delete", None),
        (
            "POST",
            "/session-configurations/preview",
            preview,
            "tavern.v1.session_configurations.preview",
            limit,
        ),
        (
            "POST",
            "/session-configurations/apply",
            apply,
            "tavern.v1.session_configurations.apply",
            limit,
        ),
    ]
    for method, path, handler, name, max_body in rows:
        ctx.add_route(method, V1_PREFIX + path, handler, name=name, max_body=max_body)


async def install_session_templates(
    ctx: PluginContext, resources: TavernResources, selections: SessionSelectionStore
) -> None:
    """The whole template feature in one call for the plugin's setup: open
    ``session-templates.json`` (off the event loop), provide the template store and the
    configuration service, and register the routes — all through ``ctx``."""
    templates = SessionTemplateStore(
        ctx.data_dir,
        max_templates=_option(ctx, MAX_TEMPLATES_OPTION, DEFAULT_MAX_TEMPLATES, HARD_MAX_TEMPLATES),
        max_state_bytes=_option(
            ctx, MAX_TEMPLATE_BYTES_OPTION, DEFAULT_MAX_STATE_BYTES, HARD_MAX_STATE_BYTES
        ),
        logger=ctx.logger,
    )
    await templates.open()
    bindings = TemplateBindings(ctx.data_dir, logger=ctx.logger)
    await bindings.open()
    configurations = SessionConfigurations(
        resources,
        selections,
        templates,
        sessions=lambda: ctx.get_optional(SESSIONS),
        is_running=lambda session_id: ctx.get(AGENTS).is_running(session_id),
        bindings=bindings,
        logger=ctx.logger,
    )
    ctx.provide(SESSION_TEMPLATES, lambda: templates)
    ctx.provide(SESSION_CONFIGURATIONS, lambda: configurations)
    register_template_routes(ctx, templates, configurations)


__all__ = [
    "MAX_TEMPLATES_OPTION",
    "MAX_TEMPLATE_BYTES_OPTION",
    "TEMPLATE_BODY_LIMIT",
    "TEMPLATE_IMPORT_BODY_LIMIT",
    "install_session_templates",
    "register_template_routes",
]
