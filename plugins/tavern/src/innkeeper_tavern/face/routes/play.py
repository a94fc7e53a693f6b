"""HTTP routes of the v2 play workspace under ``/pmp-dsh-tavern/api/v2``
(`docs/contract/play.md#v2-surface`).

Handlers decode the body, run the operation through the play services and answer in the spec's
shapes. Every listed mutation runs as one logged operation (:mod:`.oplog`); reads stay quiet.
A path that exists answers other methods with ``405 PLAY_METHOD_NOT_ALLOWED``
(:func:`method_not_allowed`, installed as a middleware).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final

import msgspec
from aiohttp import web

from innkeeper_hostapi import HttpProblem, PluginContext, json_response, path_params, read_json
from innkeeper_hostapi.structure import StructureLimits
from innkeeper_tavern.features.play.errors import (
    PLAY_BODY_INVALID,
    PLAY_MESSAGES_QUERY_INVALID,
    PLAY_METHOD_NOT_ALLOWED,
    PlayError,
)
from innkeeper_tavern.features.play.oplog import Operation, OperationLog
from innkeeper_tavern.features.play.paths import MAX_FILE_BYTES, posix, split_relative
from innkeeper_tavern.features.play.sessions import PlaySessions
from innkeeper_tavern.features.play.workspace import MISSING, PlayWorkspace
from innkeeper_tavern.pure.api_paths import V2_PREFIX

#: Body limits (bytes). A file write carries up to 1 MiB of text, which JSON escaping can grow
#: up to six-fold (``\\u00XX``), plus the other fields.
FILE_BODY_LIMIT: Final = 6 * (1 << 20) + (64 << 10)
SMALL_BODY_LIMIT: Final = 64 << 10
MESSAGE_BODY_LIMIT: Final = 4 << 20

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True, slots=True)
class PlayRoute:
    """One route: ``methods`` maps each method to its handler (the rest answer 405)."""

    path: str
    methods: dict[str, tuple[Handler, int | None]]
    name: str
    #: Structure limits of JSON bodies (``None``: the host's defaults).
    json_limits: StructureLimits | None = None


async def json_body(request: web.Request) -> dict[str, Any]:
    """A JSON object body (400 otherwise)."""
    body = await read_json(request)
    if not isinstance(body, dict):
        raise PlayError(400, PLAY_BODY_INVALID, "the request body must be a JSON object")
    return body


def _query(request: web.Request, name: str) -> str | None:
    return request.query.get(name)


def register(ctx: PluginContext, routes: Iterable[PlayRoute]) -> None:
    """Register every route through ``ctx`` (disposed with the plugin)."""
    for route in routes:
        for method, (handler, limit) in route.methods.items():
            ctx.add_route(
                method,
                V2_PREFIX + route.path,
                handler,
                name=f"{route.name}.{method.lower()}",
                max_body=limit,
                json_limits=route.json_limits,
            )


async def method_not_allowed(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Middleware: a wrong method on an existing v2 path is ``405 PLAY_METHOD_NOT_ALLOWED``
    (the host's own 405 keeps its ``Allow`` header)."""
    try:
        return await handler(request)
    except HttpProblem as exc:
        if exc.status != 405 or not request.rel_url.path.startswith(V2_PREFIX + "/"):
            raise
        raise HttpProblem(405, PLAY_METHOD_NOT_ALLOWED, exc.message, headers=exc.headers) from None


def workspace_routes(
    workspace: PlayWorkspace, sessions: PlaySessions, oplog: OperationLog
) -> list[PlayRoute]:
    """Workspace, files and session routes."""

    async def get_workspace(request: web.Request) -> web.StreamResponse:
        return json_response(workspace.view())

    async def put_workspace(request: web.Request) -> web.StreamResponse:
        body = await json_body(request)
        async with oplog.operation("workspace.bind", "PUT") as op:
            extra = sorted(set(body) - {"path"})
            if extra:
                raise PlayError(400, PLAY_BODY_INVALID, f"unknown field {extra[0]!r}")
            op.stage("request.validated")
            view = await workspace.bind(body.get("path"))
            op.stage("mutation.committed")
        return json_response(view)

    async def post_dirs(request: web.Request) -> web.StreamResponse:
        body = await json_body(request)
        path = body.get("path")
        async with oplog.operation("workspace.dirs.create", "POST", path=_str(path)) as op:
            created = await workspace.mkdir(path)
            op.stage("mutation.committed" if created else "mutation.unchanged")
        return json_response(
            {"ok": True, "path": _norm(path), "created": created}, status=201 if created else 200
        )

    async def get_files(request: web.Request) -> web.StreamResponse:
        listing = _query(request, "list")
        path = _query(request, "path")
        if listing is not None and path is None:
            prefix, entries = await workspace.list(listing)
            return json_response(
                {
                    "ok": True,
                    "path": prefix,
                    "entries": [
                        {
                            "name": e.name,
                            "path": f"{prefix}/{e.name}" if prefix else e.name,
                            "type": e.type,
                            "size": e.size,
                        }
                        for e in entries
                    ],
                }
            )
        if path is None or listing is not None:
            raise PlayError(400, "PLAY_PATH_INVALID", "pass exactly one of ?path= and ?list=")
        found = await workspace.read(path)
        payload: dict[str, Any] = {"ok": True, "path": found.path, "content": found.content}
        if found.revision is not None:
            payload["revision"] = found.revision
        return json_response(payload)

    async def put_files(request: web.Request) -> web.StreamResponse:
        path = _query(request, "path")
        async with oplog.operation("workspace.files.write", "PUT", path=path) as op:
            body = await json_body(request)
            extra = sorted(set(body) - {"content", "expectedRevision", "expectedWorkspaceScope"})
            if extra:
                raise PlayError(400, PLAY_BODY_INVALID, f"unknown field {extra[0]!r}")
            op.stage("request.validated")
            op.stage("mutation.begin")
            revision = await workspace.write(
                path,
                body.get("content"),
                expected=body.get("expectedRevision", MISSING),
                expected_scope=body.get("expectedWorkspaceScope"),
            )
            op.stage("mutation.committed")
        payload: dict[str, Any] = {"ok": True, "path": _norm(path)}
        if revision is not None:
            payload["revision"] = revision
        return json_response(payload)

    def session_mutation(
        operation: str,
        run: Callable[[str | None, dict[str, Any], Operation], Awaitable[dict[str, Any]]],
        status: int,
    ) -> Handler:
        async def handler(request: web.Request) -> web.StreamResponse:
            session_id = path_params(request).get("session_id")
            async with oplog.operation(operation, request.method, session_id=session_id) as op:
                body = await json_body(request)
                result = await run(session_id, body, op)
            return json_response(result, status=status)

        return handler

    async def run_create(_: str | None, body: dict[str, Any], op: Operation) -> dict[str, Any]:
        return await sessions.create(body, op)

    async def get_messages(request: web.Request) -> web.StreamResponse:
        bodies = _query(request, "bodies") or BODIES_FULL
        if bodies not in (BODIES_FULL, BODIES_DISPLAY):
            raise PlayError(400, PLAY_MESSAGES_QUERY_INVALID, "bodies must be 'full' or 'display'")
        result = await sessions.messages(
            path_params(request)["session_id"], display_bodies=bodies == BODIES_DISPLAY
        )
        return await stream_messages(request, result)

    async def get_coordinates(request: web.Request) -> web.StreamResponse:
        return json_response(await sessions.coordinates(path_params(request)["session_id"]))

    return [
        PlayRoute(
            "/workspace",
            {"GET": (get_workspace, None), "PUT": (put_workspace, SMALL_BODY_LIMIT)},
            "tavern.v2.workspace",
        ),
        PlayRoute("/workspace/dirs", {"POST": (post_dirs, SMALL_BODY_LIMIT)}, "tavern.v2.dirs"),
        PlayRoute(
            "/workspace/files",
            {"GET": (get_files, None), "PUT": (put_files, FILE_BODY_LIMIT)},
            "tavern.v2.files",
            # Room for a file just over the limit, so it is refused as PLAY_FILE_TOO_LARGE.
            StructureLimits(max_string_bytes=2 * MAX_FILE_BYTES),
        ),
        PlayRoute(
            "/sessions",
            {"POST": (session_mutation("session.create", run_create, 201), SMALL_BODY_LIMIT)},
            "tavern.v2.sessions",
        ),
        PlayRoute(
            "/sessions/{session_id}/branch",
            {"POST": (session_mutation("session.branch", sessions.branch, 201), SMALL_BODY_LIMIT)},
            "tavern.v2.branch",
        ),
        PlayRoute(
            "/sessions/{session_id}/user-message",
            {
                "POST": (
                    session_mutation("session.user-message", sessions.user_message, 202),
                    MESSAGE_BODY_LIMIT,
                )
            },
            "tavern.v2.user_message",
            StructureLimits(max_string_bytes=MESSAGE_BODY_LIMIT),
        ),
        PlayRoute(
            "/sessions/{session_id}/continue",
            {
                "POST": (
                    session_mutation("session.continue", sessions.continue_reply, 202),
                    SMALL_BODY_LIMIT,
                )
            },
            "tavern.v2.continue",
        ),
        PlayRoute(
            "/sessions/{session_id}/impersonate",
            {
                "POST": (
                    session_mutation("session.impersonate", sessions.impersonate, 200),
                    SMALL_BODY_LIMIT,
                )
            },
            "tavern.v2.impersonate",
        ),
        PlayRoute(
            "/sessions/{session_id}/messages", {"GET": (get_messages, None)}, "tavern.v2.messages"
        ),
        PlayRoute(
            "/sessions/{session_id}/coordinates",
            {"GET": (get_coordinates, None)},
            "tavern.v2.coordinates",
        ),
    ]


#: ``GET /sessions/:id/messages?bodies=``: every body (the default), or only the bodies a chat
#: shows: ``system`` and ``context`` origins (assembled prompts, runtime injections, tool
#: results) then come with empty ``text``/``content`` and ``bodyOmitted: true``.
BODIES_FULL: Final = "full"
BODIES_DISPLAY: Final = "display"

#: Messages encoded per written chunk of a streamed ``/messages`` answer.
MESSAGES_PER_CHUNK: Final = 500
_ENCODER: Final = msgspec.json.Encoder()


async def stream_messages(request: web.Request, result: dict[str, Any]) -> web.StreamResponse:
    """Write ``result`` as JSON with its ``messages`` array encoded chunk by chunk, so a
    100,000-event session is never held as one encoded body."""
    messages = result.pop("messages")
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    await response.prepare(request)
    head = _ENCODER.encode(result)
    await response.write(head[:-1] + b',"messages":[')
    for start in range(0, len(messages), MESSAGES_PER_CHUNK):
        chunk = b",".join(_ENCODER.encode(m) for m in messages[start : start + MESSAGES_PER_CHUNK])
        await response.write(chunk if start == 0 else b"," + chunk)
    await response.write(b"]}")
    await response.write_eof()
    return response


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _norm(path: object) -> str | None:
    return posix(split_relative(path)) if isinstance(path, str) else None
