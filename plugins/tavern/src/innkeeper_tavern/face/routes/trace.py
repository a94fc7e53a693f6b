"""The audit routes: ``GET /v1/traces``, ``GET /v3/capabilities`` and the v3 assemblies.

`docs/contract/http-api.md#version-responsibilities`, `docs/contract/audit.md#world-book-audit` and
`docs/contract/audit.md#v3`. All read-only. ``/v3/sessions/:id/sources`` is deliberately not
registered: it is not part of the v3 contract and answers the host's plain 404 (no alias, no v1
redirect).
"""

from __future__ import annotations

from typing import Any, Final

from aiohttp import web

from innkeeper_hostapi import HttpProblem, PluginContext, json_response, path_params
from innkeeper_hostapi.agents import (
    REQUEST_HOOKS,
    SESSIONS,
    TURN_ENDED,
    CallConfigDraft,
    TurnContext,
)
from innkeeper_hostapi.assembly import PROMPT_ASSEMBLER
from innkeeper_hostapi.sessions import SessionError, SessionNotFound
from innkeeper_tavern.features.prompt_profile import ASSEMBLY_AUDIT
from innkeeper_tavern.pure.api_paths import V1_PREFIX
from innkeeper_tavern.state.session_bindings.model import SelectionInvalid, check_session_id
from innkeeper_tavern.state.trace import ASSEMBLY_TRACE, AssemblyRecorder, TraceLimits, TraceStore
from innkeeper_tavern.state.trace.capture import TurnReads, strategy_metadata
from innkeeper_tavern.state.trace.verify import assembly_detail
from innkeeper_tavern.state.trace.views import capabilities_view, index_entry, trace_record

__all__ = ["V3_PREFIX", "install_traces"]

V3_PREFIX: Final = "/pmp-dsh-tavern/api/v3"
RECORD_NOT_FOUND: Final = "ASSEMBLY_RECORD_NOT_FOUND"
SESSION_NOT_FOUND: Final = "SESSION_NOT_FOUND"
SESSION_ID_INVALID: Final = "SESSION_ID_INVALID"
#: Request hook that snapshots the applied Assembler strategy; it changes nothing and runs
#: late, after every hook that does.
STRATEGY_HOOK: Final = "pmp-dsh-tavern:assembly-trace"
STRATEGY_HOOK_ORDER: Final = 10_000
#: A record id is ``t<turn>-s<step>``; anything longer is not ours.
MAX_RECORD_ID_CHARS: Final = 64

_AUTHORITY: Final = {
    "history": "host-session-log",
    "trustOrder": ["request/header", "messages", "traces", "active"],
    "bodies": "not stored; GET /pmp-dsh-tavern/api/v3/sessions/:id/assemblies/:recordId "
    "resolves and verifies them from durable history",
}


def _session_id(value: str | None) -> str:
    if not value:
        raise HttpProblem(400, SESSION_ID_INVALID, "sessionId is required")
    try:
        return check_session_id(value)
    except SelectionInvalid as exc:
        raise HttpProblem(400, exc.code, exc.message) from None


async def install_traces(
    ctx: PluginContext, *, limits: TraceLimits | None = None, reads: TurnReads | None = None
) -> TraceStore:
    """Open the store, record every assembly at turn end and register the audit routes.

    Must run after ``install_loader``: the recorder's ``turn/ended`` listener reads the loader's
    audit after the loader's own listener completed it, and the turn's events that listener
    read (``reads``, shared with :func:`install_loader`).
    """
    store = TraceStore(ctx.data_dir, limits=limits, logger=ctx.logger)
    await store.open()
    ctx.on_dispose(store.close)
    ctx.provide(ASSEMBLY_TRACE, lambda: store)

    def audits(session_id: str) -> list[dict[str, Any]]:
        log = ctx.get_optional(ASSEMBLY_AUDIT)
        return log.records(session_id) if log is not None else []

    recorder = AssemblyRecorder(
        store,
        audits=audits,
        sessions=lambda: ctx.get_optional(SESSIONS),
        logger=ctx.logger,
        reads=reads,
    )
    ctx.on(TURN_ENDED, recorder.on_turn_ended)

    def note_strategy(turn: TurnContext, draft: CallConfigDraft) -> None:
        # Request hooks run right after the host rendered this step's system prompt, so the
        # applied strategy seen here is the one the Assembler's section used.
        assembler = ctx.get_optional(PROMPT_ASSEMBLER)
        applied = assembler.applied(turn.session_id) if assembler is not None else None
        recorder.note_strategy(
            turn.session_id,
            turn.turn,
            turn.step,
            strategy_metadata(applied) if applied is not None else None,
        )

    ctx.get(REQUEST_HOOKS).adjust(ctx, STRATEGY_HOOK, STRATEGY_HOOK_ORDER, note_strategy)

    async def known(session_id: str) -> bool:
        sessions = ctx.get_optional(SESSIONS)
        if sessions is None:
            return False
        try:
            await sessions.inspect(session_id)
        except SessionNotFound:
            return False
        except SessionError:
            return True
        return True

    async def traces(request: web.Request) -> web.StreamResponse:
        session_id = _session_id(request.query.get("sessionId"))
        records = await store.records(session_id)
        return json_response(
            {
                "ok": True,
                "sessionId": session_id,
                "schemaVersion": 4,
                "records": [trace_record(r) for r in reversed(records)],
                "storage": store.storage(session_id),
                "authority": _AUTHORITY,
            }
        )

    async def capabilities(request: web.Request) -> web.StreamResponse:
        return json_response({"ok": True, **capabilities_view(store.limits)})

    async def assemblies(request: web.Request) -> web.StreamResponse:
        session_id = _session_id(path_params(request).get("id"))
        records = await store.records(session_id)
        if not records and not await known(session_id):
            raise HttpProblem(404, SESSION_NOT_FOUND, "no session has this id")
        return json_response(
            {
                "ok": True,
                "sessionId": session_id,
                "assemblies": [index_entry(r) for r in reversed(records)],
                "storage": store.storage(session_id),
            }
        )

    async def assembly(request: web.Request) -> web.StreamResponse:
        params = path_params(request)
        session_id = _session_id(params.get("id"))
        record_id = params.get("recordId", "")
        record = (
            await store.get(session_id, record_id)
            if 0 < len(record_id) <= MAX_RECORD_ID_CHARS
            else None
        )
        if record is None:
            if not await known(session_id):
                raise HttpProblem(404, SESSION_NOT_FOUND, "no session has this id")
            raise HttpProblem(404, RECORD_NOT_FOUND, "no assembly record has this id")
        detail = await assembly_detail(record, ctx.get_optional(SESSIONS))
        return json_response({"ok": True, "sessionId": session_id, **detail})

    ctx.add_route("GET", V1_PREFIX + "/traces", traces, name="tavern.traces")
    ctx.add_route("GET", V3_PREFIX + "/capabilities", capabilities, name="tavern.v3.capabilities")
    ctx.add_route(
        "GET", V3_PREFIX + "/sessions/{id}/assemblies", assemblies, name="tavern.v3.assemblies"
    )
    ctx.add_route(
        "GET",
        V3_PREFIX + "/sessions/{id}/assemblies/{recordId}",
        assembly,
        name="tavern.v3.assembly",
    )
    return store
