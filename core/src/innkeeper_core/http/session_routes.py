"""Native session HTTP under ``/host/api/sessions`` and ``/host/api/workspaces``, plus SSE."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Final, TypeVar

import msgspec
from aiohttp import web

from innkeeper_core.agents.agent import NoFailedTurn, NothingToContinue
from innkeeper_core.agents.contributions import SessionAnnotationChain
from innkeeper_core.agents.hub import LiveHub, Partial
from innkeeper_core.agents.manager import AgentInitError, AgentManager
from innkeeper_core.sessions import EventStore, StoreSessionController, StoreWorkspaceController
from innkeeper_core.tools.policy import ToolPolicy, describe_pending
from innkeeper_hostapi import HttpProblem, json_response, path_params
from innkeeper_hostapi.agents import Impersonation
from innkeeper_hostapi.http import read_body, read_struct
from innkeeper_hostapi.sessions import (
    CoordinateOutOfRange,
    DelegationTooDeep,
    InvalidSessionArgument,
    PromptMode,
    SessionError,
    SessionNotFound,
    TurnConflict,
    WorkspaceInvalidPath,
    WorkspaceNotFound,
)
from innkeeper_hostapi.structure import MAX_INT_ABS
from innkeeper_hostapi.tools import (
    ApprovalDecision,
    ApprovalPolicyName,
    EffectivePolicy,
    PermissionPresetName,
    SandboxModeName,
)

#: Seconds between SSE keep-alive comments.
SSE_HEARTBEAT_SECONDS: Final = 15.0
#: Request body limit of the prompt route (bytes): room for a long message, not a file.
PROMPT_MAX_BODY: Final = 4 << 20

_STATUS: Final[dict[type[SessionError], int]] = {
    SessionNotFound: 404,
    WorkspaceNotFound: 404,
    InvalidSessionArgument: 400,
    CoordinateOutOfRange: 400,
    WorkspaceInvalidPath: 400,
    DelegationTooDeep: 400,
    TurnConflict: 409,
    NoFailedTurn: 409,
    NothingToContinue: 409,
}
_ENCODER = msgspec.json.Encoder()


class Body(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, rename="camel"):
    """Base of request bodies: unknown fields are rejected."""


class CreateSession(Body):
    title: str | None = None
    workspace_id: str | None = None
    delegated_from: str | None = None


class RenameSession(Body):
    title: str


class ForkSession(Body):
    at_event_id: int


class PromptBody(Body):
    text: str
    mode: PromptMode = "queue"


class CreateWorkspace(Body):
    root_path: str


class RetryBody(Body):
    """``POST …/retry`` (and ``…/continue``, ``…/impersonate``) takes nothing: no body, or
    ``{}`` (what most clients send by default)."""


def impersonation_json(done: Impersonation) -> dict[str, Any]:
    """The wire form of an impersonation: ``{turn, text, reason: {kind, code, message}}``."""
    reason = {"kind": done.reason, "code": done.code, "message": done.message}
    return {"turn": done.turn, "text": done.text, "reason": reason}


class CancelBody(Body):
    reason: Annotated[str, msgspec.Meta(min_length=1, max_length=200)] | None = None
    keep_inbox: bool = True


class DecisionBody(Body):
    decision: ApprovalDecision


class PolicyBody(Body):
    preset: PermissionPresetName | None = None
    sandbox_mode: SandboxModeName | None = None
    approval_policy: ApprovalPolicyName | None = None


def _problem(exc: SessionError) -> HttpProblem:
    status = next((s for cls, s in _STATUS.items() if isinstance(exc, cls)), 400)
    return HttpProblem(status, exc.code.upper().replace("-", "_"), exc.message)


def _int_query(request: web.Request, name: str) -> int | None:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        raise HttpProblem(400, "INVALID_ARGUMENT", f"{name} must be an integer") from None
    if not -MAX_INT_ABS <= value <= MAX_INT_ABS:  # SQLite integers are signed 64-bit
        raise HttpProblem(400, "INVALID_ARGUMENT", f"{name} is out of range")
    return value


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _mapped(handler: Handler) -> Handler:
    async def call(request: web.Request) -> web.StreamResponse:
        try:
            return await handler(request)
        except SessionError as exc:
            raise _problem(exc) from None
        except AgentInitError as exc:
            raise HttpProblem(500, "AGENT_INIT_FAILED", str(exc)) from None

    return call


class SessionRoutes:
    """Handlers over the session controller, the agents and the live hub."""

    def __init__(
        self,
        store: EventStore,
        sessions: StoreSessionController,
        workspaces: StoreWorkspaceController,
        agents: AgentManager,
        hub: LiveHub,
        policy: ToolPolicy,
        *,
        annotations: SessionAnnotationChain | None = None,
    ) -> None:
        self.annotations = annotations or SessionAnnotationChain()
        self.store = store
        self.sessions = sessions
        self.workspaces = workspaces
        self.agents = agents
        self.hub = hub
        self.policy = policy

    def routes(self) -> list[tuple[str, str, Handler, int]]:
        """(method, path, handler, max_body) of every route."""
        base = "/host/api/sessions"
        return [
            ("POST", base, _mapped(self.create), 64 << 10),
            ("GET", base, _mapped(self.list), 0),
            ("GET", base + "/{session_id}", _mapped(self.inspect), 0),
            ("PATCH", base + "/{session_id}", _mapped(self.rename), 64 << 10),
            ("POST", base + "/{session_id}/fork", _mapped(self.fork), 4 << 10),
            ("GET", base + "/{session_id}/history", _mapped(self.history), 0),
            ("GET", base + "/{session_id}/messages", _mapped(self.messages), 0),
            ("POST", base + "/{session_id}/prompt", _mapped(self.prompt), PROMPT_MAX_BODY),
            ("POST", base + "/{session_id}/cancel", _mapped(self.cancel), 4 << 10),
            ("GET", base + "/{session_id}/approvals", _mapped(self.approvals), 0),
            ("POST", base + "/{session_id}/approvals/{call_id}", _mapped(self.decide), 4 << 10),
            ("GET", base + "/{session_id}/policy", _mapped(self.get_policy), 0),
            ("POST", base + "/{session_id}/policy", _mapped(self.set_policy), 4 << 10),
            ("POST", base + "/{session_id}/retry", _mapped(self.retry), 4 << 10),
            ("POST", base + "/{session_id}/continue", _mapped(self.continue_reply), 4 << 10),
            ("POST", base + "/{session_id}/impersonate", _mapped(self.impersonate), 4 << 10),
            ("DELETE", base + "/{session_id}/inbox/{item_id}", _mapped(self.cancel_queued), 0),
            ("GET", base + "/{session_id}/events", _mapped(self.events), 0),
            ("POST", "/host/api/workspaces", _mapped(self.create_workspace), 16 << 10),
            ("GET", "/host/api/workspaces", _mapped(self.list_workspaces), 0),
        ]

    # -- sessions ------------------------------------------------------------------------------
    async def create(self, request: web.Request) -> web.StreamResponse:
        body = await read_struct(request, CreateSession)
        header = await self.sessions.create(
            title=body.title, workspace_id=body.workspace_id, delegated_from=body.delegated_from
        )
        return json_response({"ok": True, "session": header}, status=201)

    async def list(self, request: web.Request) -> web.StreamResponse:
        page = await self.sessions.list(
            workspace_id=request.query.get("workspaceId") or None,
            limit=_int_query(request, "limit") or 200,
            cursor=request.query.get("cursor") or None,
        )
        notes = await self.annotations.collect([s.header.id for s in page.sessions])
        rows = [
            {**msgspec.to_builtins(s), "annotations": notes[s.header.id]} for s in page.sessions
        ]
        return json_response({"ok": True, "sessions": rows, "nextCursor": page.next_cursor})

    async def inspect(self, request: web.Request) -> web.StreamResponse:
        session_id = path_params(request)["session_id"]
        inspection = await self.sessions.inspect(session_id)
        data: dict[str, Any] = msgspec.to_builtins(inspection)
        return json_response(
            {"ok": True, **data, "agentRunning": self.agents.is_running(session_id)}
        )

    async def rename(self, request: web.Request) -> web.StreamResponse:
        body = await read_struct(request, RenameSession)
        header = await self.sessions.rename(path_params(request)["session_id"], body.title)
        return json_response({"ok": True, "session": header})

    async def fork(self, request: web.Request) -> web.StreamResponse:
        body = await read_struct(request, ForkSession)
        header = await self.sessions.fork(path_params(request)["session_id"], body.at_event_id)
        return json_response({"ok": True, "session": header}, status=201)

    async def history(self, request: web.Request) -> web.StreamResponse:
        page = await self.sessions.page(
            path_params(request)["session_id"],
            before_seq=_int_query(request, "beforeSeq"),
            limit=_int_query(request, "limit") or 200,
            through_seq=_int_query(request, "throughSeq"),
        )
        return json_response({"ok": True, **msgspec.to_builtins(page)})

    async def messages(self, request: web.Request) -> web.StreamResponse:
        result = await self.sessions.messages(path_params(request)["session_id"])
        return json_response({"ok": True, **msgspec.to_builtins(result)})

    # -- agents --------------------------------------------------------------------------------
    async def prompt(self, request: web.Request) -> web.StreamResponse:
        body = await read_struct(request, PromptBody)
        receipt = await self.agents.prompt(path_params(request)["session_id"], body.text, body.mode)
        data: dict[str, Any] = {
            "ok": True,
            "itemId": receipt.item_id,
            "spliceSeq": receipt.splice_seq,
            "mode": receipt.mode,
            "startedTurn": receipt.started_turn,
        }
        if receipt.command is not None:
            answer = receipt.command
            data["command"] = {"name": answer.name, "kind": answer.kind, "text": answer.text}
            return json_response(data)
        return json_response(data, status=202)

    async def cancel(self, request: web.Request) -> web.StreamResponse:
        session_id = path_params(request)["session_id"]
        await self.sessions.inspect(session_id)  # 404 for unknown sessions
        body = await _optional_struct(request, CancelBody)
        interrupted = await self.agents.cancel(session_id, body.reason, keep_inbox=body.keep_inbox)
        return json_response({"ok": True, "interrupted": interrupted})

    # -- tools ---------------------------------------------------------------------------------
    async def approvals(self, request: web.Request) -> web.StreamResponse:
        session_id = path_params(request)["session_id"]
        await self.sessions.inspect(session_id)
        pending = [describe_pending(p) for p in self.policy.pending(session_id)]
        return json_response({"ok": True, "approvals": pending})

    async def decide(self, request: web.Request) -> web.StreamResponse:
        params = path_params(request)
        await self.sessions.inspect(params["session_id"])
        body = await read_struct(request, DecisionBody)
        if not self.policy.decide(params["session_id"], params["call_id"], body.decision):
            raise HttpProblem(404, "APPROVAL_NOT_FOUND", "no call with this id is waiting")
        return json_response({"ok": True, "callId": params["call_id"], "decision": body.decision})

    async def get_policy(self, request: web.Request) -> web.StreamResponse:
        effective = await self.policy.effective(path_params(request)["session_id"])
        return json_response({"ok": True, **_policy_json(effective)})

    async def set_policy(self, request: web.Request) -> web.StreamResponse:
        session_id = path_params(request)["session_id"]
        body = await read_struct(request, PolicyBody)
        try:
            effective = await self.policy.set(
                session_id,
                preset=body.preset,
                sandbox_mode=body.sandbox_mode,
                approval_policy=body.approval_policy,
            )
        except ValueError as exc:
            raise HttpProblem(400, "INVALID_ARGUMENT", str(exc)) from None
        return json_response({"ok": True, **_policy_json(effective)})

    async def retry(self, request: web.Request) -> web.StreamResponse:
        await _optional_struct(request, RetryBody)
        turn = await self.agents.retry(path_params(request)["session_id"])
        return json_response({"ok": True, "turn": turn}, status=202)

    async def continue_reply(self, request: web.Request) -> web.StreamResponse:
        await _optional_struct(request, RetryBody)
        turn = await self.agents.continue_reply(path_params(request)["session_id"])
        return json_response({"ok": True, "turn": turn}, status=202)

    async def impersonate(self, request: web.Request) -> web.StreamResponse:
        """Waits for the turn: the answer carries the text the model wrote for the player."""
        await _optional_struct(request, RetryBody)
        done = await self.agents.impersonate(path_params(request)["session_id"])
        return json_response({"ok": True, **impersonation_json(done)})

    async def cancel_queued(self, request: web.Request) -> web.StreamResponse:
        params = path_params(request)
        if not await self.agents.cancel_queued(params["session_id"], params["item_id"]):
            raise HttpProblem(404, "INBOX_ITEM_NOT_FOUND", "no queued input has this id")
        return json_response({"ok": True})

    # -- live events ---------------------------------------------------------------------------
    async def events(self, request: web.Request) -> web.StreamResponse:
        """Durable events after ``Last-Event-ID`` (or ``?after=``), then live ones."""
        session_id = path_params(request)["session_id"]
        raw_last = request.headers.get("Last-Event-ID") or request.query.get("after") or "0"
        try:
            last = int(raw_last)
        except ValueError:
            raise HttpProblem(400, "INVALID_ARGUMENT", "Last-Event-ID must be an integer") from None
        await self.sessions.inspect(session_id)
        subscription = self.hub.subscribe(session_id)  # before replay: nothing falls between
        response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-store",
                "X-Accel-Buffering": "no",
            }
        )
        await response.prepare(request)
        try:
            while True:
                chunk = await self.store.read(session_id, after_seq=last)
                for event in chunk:
                    await response.write(_sse(event.type, _ENCODER.encode(event), event.seq))
                    last = event.seq
                if len(chunk) < 1000:
                    break
            ended = False
            while not ended:
                items = subscription.take_ready()
                if not items:
                    try:
                        async with asyncio.timeout(SSE_HEARTBEAT_SECONDS):
                            items = [await subscription.get()]
                    except TimeoutError:
                        await response.write(b": keep-alive\n\n")
                        continue
                    items += subscription.take_ready()
                # What is queued goes out in one write (one chunk, one send), in order.
                frames: list[bytes] = []
                for item in items:
                    if item is None:
                        ended = True
                        break
                    if isinstance(item, Partial):
                        frames.append(_sse(item.type, _ENCODER.encode(item.data)))
                    elif item.seq > last:
                        frames.append(_sse(item.type, _ENCODER.encode(item), item.seq))
                        last = item.seq
                if frames:
                    await response.write(b"".join(frames))
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            subscription.close()
        with contextlib.suppress(ConnectionResetError):
            await response.write_eof()
        return response

    # -- workspaces ----------------------------------------------------------------------------
    async def create_workspace(self, request: web.Request) -> web.StreamResponse:
        body = await read_struct(request, CreateWorkspace)
        workspace = await self.workspaces.create(body.root_path)
        return json_response({"ok": True, "workspace": workspace}, status=201)

    async def list_workspaces(self, request: web.Request) -> web.StreamResponse:
        return json_response({"ok": True, "workspaces": await self.workspaces.list()})


def _policy_json(policy: EffectivePolicy) -> dict[str, str]:
    return {
        "preset": policy.preset,
        "sandboxMode": policy.sandbox_mode,
        "approvalPolicy": policy.approval_policy,
    }


BodyT = TypeVar("BodyT", bound=Body)


async def _optional_struct(request: web.Request, type: type[BodyT]) -> BodyT:
    """A body that may be absent: no body (or an empty one) means every default."""
    if not (await read_body(request)).strip():
        return type()
    return await read_struct(request, type)


def _sse(event_type: str, data: bytes, event_id: int | None = None) -> bytes:
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event_type}\n".encode() + b"data: " + data + b"\n\n"
