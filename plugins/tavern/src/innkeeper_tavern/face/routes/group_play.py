"""The v2 group-play routes (docs/groups.md "Group playthroughs"): start a group playthrough,
"Next speaker" / "Let X speak", pick who answers the next message, stop a chain, read the
session's group state. :func:`install_group_play` also hooks group play into the loader (each
group turn assembled as its speaker) and the turn-end event (rounds, auto mode)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from innkeeper_hostapi import PluginContext, json_response, path_params
from innkeeper_hostapi.agents import AGENTS, TURN_ENDED
from innkeeper_tavern.face.routes.play import SMALL_BODY_LIMIT, PlayRoute, json_body, register
from innkeeper_tavern.features.group_play.start import start_playthrough
from innkeeper_tavern.features.group_play.turns import GroupPlay, GroupPlayError
from innkeeper_tavern.features.play import Play
from innkeeper_tavern.features.play.errors import PlayError, bad_body
from innkeeper_tavern.features.play.oplog import Operation
from innkeeper_tavern.features.prompt_profile.profile import TavernProfileLoader
from innkeeper_tavern.pure.groups.model import GROUP_NOT_FOUND
from innkeeper_tavern.state.groups.sessions import GroupSessionLimit, GroupSessionStore
from innkeeper_tavern.state.groups.store import GroupStore
from innkeeper_tavern.state.resources import TavernResources

Run = Callable[[web.Request, dict[str, Any], Operation], Awaitable[dict[str, Any]]]


def _speaker_id(body: dict[str, Any], allowed: set[str]) -> str | None:
    extra = sorted(set(body) - allowed)
    if extra:
        raise bad_body(f"unknown field {extra[0]!r}")
    value = body.get("speakerId")
    if value is not None and (not isinstance(value, str) or not 0 < len(value) <= 200):
        raise bad_body("speakerId must be a character id")
    return value


def group_play_routes(play: Play, groups: GroupPlay, store: GroupStore) -> list[PlayRoute]:
    """The routes (registered under ``/pmp-dsh-tavern/api/v2``)."""
    oplog = play.oplog

    def mutation(operation: str, run: Run, status: int = 200) -> Any:
        async def handler(request: web.Request) -> web.StreamResponse:
            sid = path_params(request).get("session_id")
            async with oplog.operation(operation, request.method, session_id=sid) as op:
                body = await json_body(request)
                try:
                    result = await run(request, body, op)
                except GroupPlayError as exc:
                    raise PlayError(exc.status, exc.code, exc.message) from None
                except GroupSessionLimit as exc:
                    raise PlayError(409, "GROUP_PLAYTHROUGH_LIMIT_REACHED", str(exc)) from None
            return json_response(result, status=status)

        return handler

    async def session(request: web.Request) -> str:
        return (await play.sessions.inspect(path_params(request)["session_id"])).header.id

    async def run_start(
        request: web.Request, body: dict[str, Any], op: Operation
    ) -> dict[str, Any]:
        group = store.find(path_params(request)["group_id"])
        if group is None:
            raise PlayError(404, GROUP_NOT_FOUND, "no group has this id")
        return await start_playthrough(play, groups, group, body, op)

    async def run_reply(
        request: web.Request, body: dict[str, Any], _op: Operation
    ) -> dict[str, Any]:
        speaker = _speaker_id(body, {"speakerId"})
        sid = await session(request)
        turn = await groups.reply(sid, speaker)
        return {"ok": True, "sessionId": sid, "turn": turn, "speakerId": speaker}

    async def run_pick(
        request: web.Request, body: dict[str, Any], _op: Operation
    ) -> dict[str, Any]:
        speaker = _speaker_id(body, {"speakerId"})
        if speaker is None:
            raise bad_body("speakerId is required")
        sid = await session(request)
        member = await groups.pick(sid, speaker)
        return {
            "ok": True,
            "sessionId": sid,
            "speaker": {"characterId": member.character_id, "name": member.name},
        }

    async def run_stop(
        request: web.Request, body: dict[str, Any], _op: Operation
    ) -> dict[str, Any]:
        _speaker_id(body, set())
        sid = await session(request)
        if await groups.group_id_of(sid) is None:
            raise PlayError(409, "GROUP_SESSION_NOT_GROUP", "this session plays no group")
        pending = groups.stop(sid)
        agents = groups.ctx.get_optional(AGENTS)
        cancelled = bool(agents is not None and await agents.cancel(sid, "stopped by the player"))
        return {"ok": True, "sessionId": sid, "stopped": pending, "cancelled": cancelled}

    async def get_state(request: web.Request) -> web.StreamResponse:
        sid = await session(request)
        group = await groups.group_of(sid)
        if group is None:
            raise PlayError(409, "GROUP_SESSION_NOT_GROUP", "this session plays no group")
        stored = {m.character_id: m.name for m in await groups.members(group)}
        spoken = await groups.speakers(sid)
        return json_response(
            {
                "ok": True,
                "sessionId": sid,
                "groupId": group.id,
                "name": group.name,
                "activationStrategy": group.activation_strategy,
                "generationMode": group.generation_mode,
                "autoMode": group.auto_mode,
                "autoModeDelay": group.auto_mode_delay,
                "members": [
                    {
                        "characterId": m.character_id,
                        "name": stored.get(m.character_id),
                        "muted": m.muted,
                        "missing": m.character_id not in stored,
                    }
                    for m in group.members
                ],
                "speakers": {str(t): s.wire() for t, s in sorted(spoken.items())},
                **groups.pending(sid),
            }
        )

    return [
        PlayRoute(
            "/groups/{group_id}/playthroughs",
            {"POST": (mutation("group.playthrough", run_start, 201), SMALL_BODY_LIMIT)},
            "tavern.v2.group_playthroughs",
        ),
        PlayRoute(
            "/sessions/{session_id}/group",
            {"GET": (get_state, None)},
            "tavern.v2.group_state",
        ),
        PlayRoute(
            "/sessions/{session_id}/group/reply",
            {"POST": (mutation("group.reply", run_reply, 202), SMALL_BODY_LIMIT)},
            "tavern.v2.group_reply",
        ),
        PlayRoute(
            "/sessions/{session_id}/group/next-speaker",
            {"POST": (mutation("group.next-speaker", run_pick), SMALL_BODY_LIMIT)},
            "tavern.v2.group_next_speaker",
        ),
        PlayRoute(
            "/sessions/{session_id}/group/stop",
            {"POST": (mutation("group.stop", run_stop), SMALL_BODY_LIMIT)},
            "tavern.v2.group_stop",
        ),
    ]


async def install_group_play(
    ctx: PluginContext,
    resources: TavernResources,
    store: GroupStore,
    play: Play,
    loader: TavernProfileLoader,
) -> GroupPlay:
    """Open ``group-sessions.json``, hook group play into the loader and turn ends, register
    the routes."""
    bindings = GroupSessionStore(ctx.data_dir, logger=ctx.logger)
    await bindings.open()
    groups = GroupPlay(ctx, resources, store, bindings, logger=ctx.logger)
    loader.group_view = groups.view

    def unhook() -> None:
        loader.group_view = None

    ctx.on_dispose(unhook)
    ctx.on_dispose(groups.close)
    ctx.on(TURN_ENDED, groups.on_turn_ended)
    hooks = play.sessions.swipe_hooks
    hooks.append(groups.keep_swipe_speaker)
    ctx.on_dispose(lambda: hooks.remove(groups.keep_swipe_speaker))
    register(ctx, group_play_routes(play, groups, store))
    return groups


__all__ = ["group_play_routes", "install_group_play"]
