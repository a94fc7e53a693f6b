"""RP secure mode: ``/v1/rp-mode``, ``/v1/rp-alert``, the ``/rp`` command, the tool guard and
the read-only sandbox pin (see :mod:`.controller` for the rules).

Everything is registered through ``ctx`` (unloading takes it back): the awaited
``agent/created`` listener (after the selection freeze, so a session's RP starts from its
frozen selection), the ``agent/pre-step`` listener, the ``rp:guard`` tool guard and the ``rp``
slash command. docs/prompt-assembly.md "RP mode" pins the route shapes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from aiohttp import web

from innkeeper_hostapi import HttpProblem, PluginContext, json_response, read_json
from innkeeper_hostapi.agents import AGENT_CREATED, PRE_STEP, SESSION_EVENTS_COMMITTED, SESSIONS
from innkeeper_hostapi.slash import COMMANDS, CommandAnswer, CommandInvocation
from innkeeper_hostapi.tools import TOOLS
from innkeeper_tavern.features.rp.controller import (
    RpAlert,
    RpController,
    RpInherited,
    RpOutcome,
    RpStateFull,
)
from innkeeper_tavern.features.rp.durable import (
    RP_STATE_LIMIT_REACHED,
    RP_STATE_WRITE_FAILED,
    RpDurableState,
    RpStateWriteFailed,
)
from innkeeper_tavern.features.rp.guard import (
    BLOCKED_TOOL_NAMES,
    RP_BLOCK_CANCEL_REASON,
    blocked_reason,
)
from innkeeper_tavern.pure.api_paths import V1_PREFIX
from innkeeper_tavern.state.session_bindings.lifecycle import require_session
from innkeeper_tavern.state.session_bindings.store import SessionSelectionStore

__all__ = [
    "BLOCKED_TOOL_NAMES",
    "RP_BLOCK_CANCEL_REASON",
    "RpAlert",
    "RpController",
    "RpOutcome",
    "blocked_reason",
    "install_rp",
]

RP_MODE_INVALID: Final = "RP_MODE_INVALID"
RP_INHERITED: Final = "RP_INHERITED"
#: The guard runs early: a blocked call never reaches later guards or the policy.
RP_GUARD_ORDER: Final = 10
RP_MODE_MAX_BODY: Final = 4 * 1024


async def install_rp(
    ctx: PluginContext, selections: SessionSelectionStore, follow_character: Callable[[], bool]
) -> RpController:
    """Wire RP mode into the host and register its routes."""
    state = RpDurableState(ctx.data_dir, logger=ctx.logger)
    await state.open()
    rp = RpController(ctx, selections, follow_character, state)
    selections.character_listeners.append(rp.follow_binding)
    ctx.on_dispose(lambda: selections.character_listeners.remove(rp.follow_binding))
    ctx.on(AGENT_CREATED, rp.on_agent_created)
    ctx.on(PRE_STEP, rp.on_pre_step)
    ctx.on(SESSION_EVENTS_COMMITTED, rp.on_events)
    ctx.get(TOOLS).guard(ctx, "rp:guard", RP_GUARD_ORDER, rp.guard)

    async def known(session_id: object) -> str:
        if not isinstance(session_id, str):
            raise HttpProblem(400, RP_MODE_INVALID, "sessionId must be a string")
        await require_session(selections, session_id, ctx.get_optional(SESSIONS))
        return session_id

    async def get_mode(request: web.Request) -> web.StreamResponse:
        session_id = await known(request.query.get("sessionId"))
        return json_response({"ok": True, "rp": await rp.view(session_id)})

    async def put_mode(request: web.Request) -> web.StreamResponse:
        body = await read_json(request)
        if (
            not isinstance(body, dict)
            or set(body) != {"sessionId", "active"}
            or not isinstance(body["active"], bool)
        ):
            raise HttpProblem(400, RP_MODE_INVALID, "body must be {sessionId, active: boolean}")
        session_id = await known(body["sessionId"])
        try:
            outcome = await rp.request(session_id, body["active"], "command")
        except RpInherited as exc:
            raise HttpProblem(409, RP_INHERITED, str(exc)) from None
        except RpStateFull as exc:
            raise HttpProblem(409, RP_STATE_LIMIT_REACHED, str(exc)) from None
        except RpStateWriteFailed as exc:
            raise HttpProblem(500, RP_STATE_WRITE_FAILED, str(exc)) from None
        return json_response({"ok": True, "outcome": outcome, "rp": await rp.view(session_id)})

    async def get_alert(request: web.Request) -> web.StreamResponse:
        session_id = await known(request.query.get("sessionId"))
        return json_response({"ok": True, "alert": rp.alert(session_id)})

    async def delete_alert(request: web.Request) -> web.StreamResponse:
        session_id = await known(request.query.get("sessionId"))
        try:
            consumed = await rp.consume(session_id, request.query.get("id") or None)
        except RpStateWriteFailed as exc:
            raise HttpProblem(500, RP_STATE_WRITE_FAILED, str(exc)) from None
        return json_response({"ok": True, "consumed": consumed})

    ctx.add_route("GET", V1_PREFIX + "/rp-mode", get_mode, name="tavern.rp-mode.get")
    ctx.add_route(
        "PUT",
        V1_PREFIX + "/rp-mode",
        put_mode,
        name="tavern.rp-mode.put",
        max_body=RP_MODE_MAX_BODY,
    )
    ctx.add_route("GET", V1_PREFIX + "/rp-alert", get_alert, name="tavern.rp-alert.get")
    ctx.add_route("DELETE", V1_PREFIX + "/rp-alert", delete_alert, name="tavern.rp-alert.delete")

    async def command(invocation: CommandInvocation) -> CommandAnswer:
        arg = invocation.args.strip().lower()
        if arg not in ("", "on", "off"):
            return CommandAnswer(name="rp", kind="error", text="usage: /rp or /rp off")
        try:
            outcome = await rp.request(invocation.session_id, arg != "off", "command")
        except (RpInherited, RpStateFull, RpStateWriteFailed) as exc:
            return CommandAnswer(name="rp", kind="error", text=str(exc))
        state = "on" if arg != "off" else "off"
        return CommandAnswer(name="rp", kind="success", text=f"RP {state}: {outcome}")

    ctx.get(COMMANDS).register(
        ctx,
        "rp",
        "Enter RP mode (high-risk tools locked); /rp off leaves it.",
        command,
        hint="[off]",
    )
    return rp
