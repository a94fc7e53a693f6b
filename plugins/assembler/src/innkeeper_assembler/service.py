"""``dshPromptAssembler``: strategies, applied snapshots, the system section, the projector and
the preview.

Per request step of a session with an applied snapshot:

1. the system section ``dsh-assembler:system`` (order :data:`SECTION_ORDER`) asks every source
   the snapshot's modules name, builds the :class:`~.placement.Plan` and keeps it for the step;
   it returns the plan's system text (standard: with in-chat items degraded into it) and, for
   the standard backend, appends ``Context`` items as durable context ``user/message`` events;
2. the projector (the host's ``REQUEST_PROJECTOR`` slot) takes the step's plan and, for the
   advanced backend, inserts its carriers into the array the host built; the host records that
   array as ``request/assembly`` (references to durable events, carriers inline). The complete
   system snapshot (the host's whole system message plus the carriers) is checked against the
   fixed 2 MiB ceiling here too.

Nothing here ever fails a turn: a missing or failing source is left out and reported, a plan
over a limit is rejected as a whole and reported (log: codes only; session: a body-free ``ext``
event ``dsh-assembler:diagnostic``).
"""

from __future__ import annotations

import collections
import logging
import uuid
from collections.abc import Sequence
from typing import Any, Final

from innkeeper_hostapi import PluginContext
from innkeeper_hostapi.agents import SESSIONS, AgentCreated, TurnContext
from innkeeper_hostapi.assembly import (
    SOURCE_PROTOCOL,
    SYSTEM_SNAPSHOT_MAX_BYTES,
    AppliedStrategy,
    AssemblyDiagnostic,
    Contribution,
    RequestKind,
    RequestPreview,
    SourceRequest,
    Strategy,
    serialized_bytes,
)
from innkeeper_hostapi.providers import ChatMessage
from innkeeper_hostapi.sessions import (
    ExtensionEvent,
    MessageOrigin,
    SessionError,
    SessionNotFound,
    UserMessage,
    text_content,
)

from . import VERSION
from .limits import MAX_ANCESTORS, MAX_RECORDED_ITEMS, PLAN_CACHE_SIZE
from .placement import ModuleItems, Plan, build_plan, snapshot_too_large
from .registry import SourceRegistry
from .store import StoreError, StrategyStore
from .wire import project, shape_request, trim_history

__all__ = [
    "DIAGNOSTIC_EVENT",
    "PROJECTOR_NAME",
    "SECTION_NAME",
    "SECTION_ORDER",
    "TRIM_EVENT",
    "Assembler",
    "AssemblerProjector",
]

SECTION_NAME: Final = "dsh-assembler:system"
#: Just after the contract's order-10 anchor (`docs/contract/loader.md#ownership`), before
#: ``rp:policy`` (45): with an applied strategy the Assembler's output takes the place of the
#: Tavern compatibility profile, and Tavern's source reuses the compile its order-10 section made
#: for the same step (one activation, one timed-effect commit per step).
SECTION_ORDER: Final = 11
PROJECTOR_NAME: Final = "dsh-assembler"
DIAGNOSTIC_EVENT: Final = "dsh-assembler:diagnostic"
#: Body-free placement evidence of every request step with a strategy
#: (`docs/contract/audit.md#audit-boundary`: the Assembler records which strategy placed what).
PLACEMENT_EVENT: Final = "dsh-assembler:placement"
#: Body-free record of a request whose history was trimmed to its context budget.
TRIM_EVENT: Final = "dsh-assembler:history-trim"
ASSEMBLER_SOURCE_MISSING: Final = "ASSEMBLER_SOURCE_MISSING"
ASSEMBLER_SOURCE_FAILED: Final = "ASSEMBLER_SOURCE_FAILED"
#: ``origin.producer`` of the standard backend's durable context messages.
CONTEXT_PRODUCER: Final = "dsh-assembler"


class Assembler:
    """Implements :class:`~innkeeper_hostapi.assembly.AssemblerService`."""

    def __init__(self, ctx: PluginContext, store: StrategyStore, registry: SourceRegistry) -> None:
        self.ctx = ctx
        self.store = store
        self.registry = registry
        self.log: logging.Logger = ctx.logger
        self._plans: collections.OrderedDict[tuple[str, int, int], Plan] = collections.OrderedDict()

    # ------------------------------------------------------------------ service surface

    @property
    def version(self) -> str:
        """:data:`innkeeper_assembler.VERSION`."""
        return VERSION

    @property
    def protocol(self) -> int:
        """The source protocol."""
        return SOURCE_PROTOCOL

    @property
    def sources(self) -> SourceRegistry:
        """The shared registry."""
        return self.registry

    def strategies(self) -> tuple[Strategy, ...]:
        """Stored strategies."""
        return self.store.strategies()

    def strategy(self, strategy_id: str) -> Strategy | None:
        """One stored strategy."""
        return self.store.strategy(strategy_id)

    async def put_strategy(self, strategy: Strategy) -> Strategy:
        """Create or replace a stored strategy."""
        return await self.store.put(strategy)

    async def delete_strategy(self, strategy_id: str) -> bool:
        """Delete a stored strategy (snapshots stay)."""
        return await self.store.delete(strategy_id)

    async def apply(self, session_id: str, strategy_id: str | None) -> AppliedStrategy | None:
        """Snapshot a strategy onto an existing session (``None`` clears)."""
        sessions = self.ctx.get_optional(SESSIONS)
        if sessions is not None:
            try:
                await sessions.inspect(session_id)
            except SessionNotFound:
                raise StoreError(404, "SESSION_NOT_FOUND", f"no session {session_id!r}") from None
        return await self.store.apply(session_id, strategy_id)

    def applied(self, session_id: str) -> AppliedStrategy | None:
        """The session's snapshot."""
        return self.store.applied(session_id)

    async def on_agent_created(self, event: AgentCreated) -> None:
        """A fork or delegated session without a snapshot of its own copies its nearest
        ancestor's, as Tavern freezes the parent's selection
        (`docs/contract/loader.md#session-bindings`); a swipe (a fork before the reply) is thus
        assembled like its parent. A failed write fails the agent's creation: a snapshot is never
        silently skipped."""
        parent_id = event.parent_session_id
        if parent_id is None or self.store.applied(event.session_id) is not None:
            return
        sessions = self.ctx.get_optional(SESSIONS)
        for _ in range(MAX_ANCESTORS):
            found = self.store.applied(parent_id)
            if found is not None:
                await self.store.inherit(event.session_id, found)
                return
            if sessions is None:
                return
            try:
                header = (await sessions.inspect(parent_id)).header
            except SessionNotFound:
                return
            if header.parent is None:
                return
            parent_id = header.parent.session_id

    def capabilities(self) -> dict[str, Any]:
        """What this Assembler supports (for ``GET /capabilities``)."""
        return {
            "version": self.version,
            "protocol": self.protocol,
            "backends": ["standard", "advanced"],
            "placements": ["system", "depth", "chat-start", "authors-note", "context"],
            "limits": {"maxSnapshotBytes": SYSTEM_SNAPSHOT_MAX_BYTES},
            "sources": [
                {"id": s.id, "owner": s.owner, "protocol": s.protocol}
                for s in self.registry.sources()
            ],
        }

    # ------------------------------------------------------------------ assembly

    async def plan(
        self,
        strategy: Strategy,
        session_id: str | None,
        turn: TurnContext | None,
        kind: RequestKind = "normal",
        continued: str = "",
    ) -> Plan:
        """Ask the modules' sources and place their items (``turn`` ``None``: a preview;
        ``kind``/``continued``: the request's kind and the text being continued)."""
        diagnostics: list[AssemblyDiagnostic] = []
        cache: dict[tuple[str, str], Sequence[Contribution]] = {}
        modules: list[ModuleItems] = []
        for module in strategy.modules:
            if not module.enabled:
                continue
            source = self.registry.get(module.source)
            if source is None:
                diagnostics.append(
                    AssemblyDiagnostic(
                        code=ASSEMBLER_SOURCE_MISSING,
                        message=f"no source {module.source!r} is registered: its module is empty",
                        details={"source": module.source},
                    )
                )
                continue
            key = (module.source, repr(sorted(module.options.items())))
            if key not in cache:
                request = SourceRequest(
                    session_id=session_id,
                    turn=turn,
                    options=module.options,
                    kind=kind,
                    continued=continued,
                )
                try:
                    items = await source.render(request)
                    cache[key] = _valid(items)
                except Exception as exc:  # a source never fails the turn
                    # The type only: a third-party message or traceback may quote a body.
                    self.log.warning("source %s failed (%s)", module.source, type(exc).__name__)
                    diagnostics.append(
                        AssemblyDiagnostic(
                            code=ASSEMBLER_SOURCE_FAILED,
                            message=f"source {module.source!r} failed ({type(exc).__name__}): "
                            "it is left out of this request",
                            details={"source": module.source},
                        )
                    )
                    cache[key] = []
            modules.append(ModuleItems(module, cache[key]))
        return build_plan(strategy, modules, diagnostics)

    async def render_section(self, turn: TurnContext) -> str | None:
        """The system section of a request step (see the module docstring)."""
        applied = self.store.applied(turn.session_id)
        if applied is None:
            return None
        plan = await self.plan(applied.strategy, turn.session_id, turn, turn.kind, turn.continued)
        key = (turn.session_id, turn.turn, turn.step)
        self._plans[key] = plan
        while len(self._plans) > PLAN_CACHE_SIZE:
            self._plans.popitem(last=False)
        await self._record(turn, applied, plan)
        for diagnostic in plan.diagnostics:
            if diagnostic.severity == "error":
                await self.report(turn, diagnostic)
        if plan.rejected:
            return None
        if plan.context:
            await self._append_context(turn, plan)
        return plan.system_text or None

    async def _record(self, turn: TurnContext, applied: AppliedStrategy, plan: Plan) -> None:
        """Append the step's body-free placement record (hashes, sizes, keys; never text)."""
        sessions = self.ctx.get_optional(SESSIONS)
        if sessions is None:
            return
        metadata = plan.metadata()
        truncated: dict[str, int] = {}
        for name in ("system", "carriers", "context", "dropped"):
            items = metadata[name]
            if len(items) > MAX_RECORDED_ITEMS:
                truncated[name] = len(items) - MAX_RECORDED_ITEMS
                metadata[name] = items[:MAX_RECORDED_ITEMS]
        payload: dict[str, Any] = {
            "turn": turn.turn,
            "step": turn.step,
            "strategyRevision": applied.strategy.revision,
            "appliedSha256": applied.sha256,
            "appliedAt": applied.applied_at,
            **metadata,
        }
        if truncated:
            payload["truncated"] = truncated
        try:
            await sessions.append(
                turn.session_id, ExtensionEvent(name=PLACEMENT_EVENT, payload=payload)
            )
        except SessionError as exc:
            self.log.warning("placement record not written (%s)", exc.code)

    async def _append_context(self, turn: TurnContext, plan: Plan) -> None:
        sessions = self.ctx.get_optional(SESSIONS)
        if sessions is None:
            return
        for item in plan.context:
            await sessions.append(
                turn.session_id,
                UserMessage(
                    message_id=uuid.uuid4().hex,
                    content=text_content(item.text),
                    origin=MessageOrigin(kind="context", producer=CONTEXT_PRODUCER, form=item.key),
                    turn=turn.turn,
                ),
            )

    def take_plan(self, turn: TurnContext) -> Plan | None:
        """The plan the step's system section built (removed from the cache)."""
        return self._plans.pop((turn.session_id, turn.turn, turn.step), None)

    def drop_turn(self, session_id: str, turn: int) -> None:
        """Forget a finished turn's plans."""
        for key in [k for k in self._plans if k[0] == session_id and k[1] == turn]:
            del self._plans[key]

    def clear(self) -> None:
        """Forget every cached plan (unload)."""
        self._plans.clear()

    async def _append_ext(self, turn: TurnContext, name: str, payload: dict[str, Any]) -> None:
        """Append a body-free ``ext`` event for the step (a failed write is only logged)."""
        sessions = self.ctx.get_optional(SESSIONS)
        if sessions is None:
            return
        try:
            await sessions.append(
                turn.session_id,
                ExtensionEvent(
                    name=name, payload={"turn": turn.turn, "step": turn.step, **payload}
                ),
            )
        except SessionError as exc:
            self.log.warning("%s event not written (%s)", name, exc.code)

    async def report(self, turn: TurnContext, diagnostic: AssemblyDiagnostic) -> None:
        """Log the code (never a body) and append a body-free ``ext`` event to the session."""
        self.log.warning("session %s turn %d: %s", turn.session_id, turn.turn, diagnostic.code)
        payload: dict[str, Any] = {
            "code": diagnostic.code,
            "message": diagnostic.message,
            "severity": diagnostic.severity,
            "details": dict(diagnostic.details),
        }
        await self._append_ext(turn, DIAGNOSTIC_EVENT, payload)

    async def record_trim(self, turn: TurnContext, tokens: int, dropped: int, kept: int) -> None:
        """Record (body-free) that ``dropped`` chat messages were left out of this request."""
        self.log.info(
            "session %s turn %d: %d chat messages trimmed", turn.session_id, turn.turn, dropped
        )
        payload: dict[str, Any] = {
            "historyTokens": tokens,
            "droppedMessages": dropped,
            "keptMessages": kept,
        }
        await self._append_ext(turn, TRIM_EVENT, payload)

    # ------------------------------------------------------------------ preview

    async def preview(
        self,
        session_id: str | None,
        *,
        strategy: Strategy | None = None,
        pending_input: str | None = None,
        kind: RequestKind = "normal",
    ) -> RequestPreview:
        """What a request would send now, without a provider call or any write. A
        ``continue`` request extends the last history message and an ``impersonate`` request
        asks for the user's next message: neither takes ``pending_input``."""
        if strategy is None and session_id is not None:
            applied = self.store.applied(session_id)
            strategy = applied.strategy if applied is not None else None
        history: list[ChatMessage] = []
        sessions = self.ctx.get_optional(SESSIONS)
        if session_id is not None and sessions is not None:
            try:
                snapshot = await sessions.messages(session_id, roles=("user", "assistant", "tool"))
            except SessionNotFound:
                raise StoreError(404, "SESSION_NOT_FOUND", f"no session {session_id!r}") from None
            history = [
                ChatMessage(role=m.role, content=m.text)
                for m in snapshot.messages
                if m.role in ("user", "assistant", "tool") and m.text
            ]
        if pending_input and kind == "normal":
            history.append(ChatMessage(role="user", content=pending_input))
        continued = history[-1].content if kind == "continue" and history else ""
        if strategy is None:
            return RequestPreview(
                session_id=session_id,
                strategy_id=None,
                backend=None,
                messages=tuple(history),
                request_only=(),
                diagnostics=(),
                profile_bytes=0,
                snapshot_bytes=0,
                rejected=False,
            )
        plan = await self.plan(strategy, session_id, None, kind, continued)
        built: list[ChatMessage] = []
        if plan.system_text:
            built.append(ChatMessage(role="system", content=plan.system_text))
        built.extend(history)
        built.extend(ChatMessage(role="user", content=p.text) for p in plan.context)
        carriers = plan.carriers
        if plan.history_tokens is not None and plan.backend == "advanced" and not plan.rejected:
            trimmed, carriers, _ = trim_history(built, carriers, plan.history_tokens, plan.shape)
            built = list(trimmed)
        messages, inserted = project(built, carriers)
        messages, inserted = shape_request(messages, inserted, carriers, plan.shape, kind)
        return RequestPreview(
            session_id=session_id,
            strategy_id=strategy.id,
            backend=strategy.backend,
            messages=messages,
            request_only=inserted,
            diagnostics=plan.diagnostics,
            profile_bytes=plan.profile_bytes,
            snapshot_bytes=plan.snapshot_bytes,
            rejected=plan.rejected,
        )


def _valid(items: object) -> list[Contribution]:
    """Only :class:`Contribution` items count (a source is third-party code)."""
    if not isinstance(items, list | tuple):
        raise TypeError("a source returns a sequence of Contribution")
    return [item for item in items if isinstance(item, Contribution)]


class AssemblerProjector:
    """The ``REQUEST_PROJECTOR`` adapter: advanced placement into the array actually sent."""

    def __init__(self, assembler: Assembler) -> None:
        self.assembler = assembler

    @property
    def name(self) -> str:
        """Recorded as ``projector`` in ``request/assembly``."""
        return PROJECTOR_NAME

    async def project(
        self, turn: TurnContext, messages: tuple[ChatMessage, ...]
    ) -> tuple[ChatMessage, ...] | None:
        """Insert the step's carriers, or ``None`` (no plan, standard backend, rejected)."""
        plan = self.assembler.take_plan(turn)
        if plan is None or plan.rejected or plan.backend != "advanced":
            return None
        if not plan.carriers and plan.history_tokens is None and plan.shape is None:
            return None
        system = [m for m in messages if m.role in ("system", "developer")]
        complete = sum(serialized_bytes(m) for m in system)
        complete += sum(serialized_bytes(c.message) for c in plan.carriers)
        if complete > SYSTEM_SNAPSHOT_MAX_BYTES:
            # Other plugins' sections count too; the carriers are not sent (the host already
            # built the system message, which is its own business).
            await self.assembler.report(
                turn,
                snapshot_too_large(
                    complete, "its request-only messages are not placed in this request"
                ),
            )
            return None
        carriers = plan.carriers
        if plan.history_tokens is not None:
            messages, carriers, dropped = trim_history(
                messages, carriers, plan.history_tokens, plan.shape
            )
            if dropped:
                await self.assembler.record_trim(turn, plan.history_tokens, dropped, len(messages))
        projected, inserted = project(messages, carriers)
        projected, _ = shape_request(projected, inserted, carriers, plan.shape, turn.kind)
        return projected
