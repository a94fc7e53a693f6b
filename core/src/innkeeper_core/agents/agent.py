"""One session's agent: its inbox and its turns."""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from innkeeper_core.agents.contributions import SECTION_JOINER, section_spans
from innkeeper_core.agents.evidence import (
    WireDigest,
    project_request,
    record_params,
    usage_of,
)
from innkeeper_core.agents.hub import Partial
from innkeeper_core.agents.interrupts import TurnInterrupts
from innkeeper_core.agents.tool_steps import (
    answer_calls,
    answer_missing,
    pre_step,
    result_event,
    run_tools,
    unanswered_calls,
)
from innkeeper_core.agents.turn_errors import TurnFailed, TurnInterrupted
from innkeeper_core.providers.fallback import ParameterFallback, next_fallback_params, with_params
from innkeeper_core.sessions import InboxProjection
from innkeeper_core.tools.runner import interrupted
from innkeeper_hostapi.agents import (
    REQUEST_ERROR,
    TURN_ENDED,
    CallConfigDraft,
    Impersonation,
    PromptReceipt,
    RequestErrorNotice,
    TurnContext,
    TurnEnded,
)
from innkeeper_hostapi.providers import (
    ChatMessage,
    ChatToolCall,
    FinalMessage,
    ProviderError,
    ProviderRequest,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
)
from innkeeper_hostapi.sessions import (
    AssistantMessage,
    EventData,
    InboxItem,
    InboxSpliced,
    InboxTarget,
    MessageOrigin,
    PromptMode,
    RequestError,
    RequestHeader,
    SessionError,
    SessionEvent,
    SessionHeader,
    SystemMessage,
    ToolCall,
    TurnConflict,
    TurnEnd,
    TurnEndReason,
    TurnKind,
    TurnStart,
    UserMessage,
    text_content,
)

if TYPE_CHECKING:
    from innkeeper_core.agents.services import TurnServices
    from innkeeper_core.sessions.projection import ConversationCache
    from innkeeper_hostapi.tools import SandboxModeName

log = logging.getLogger("innkeeper.agents")

STEERING_ORIGIN = MessageOrigin(kind="steering")
USER_ORIGIN = MessageOrigin(kind="user")


class NoFailedTurn(SessionError):
    """A retry was asked for, but the session's last turn did not fail. HTTP maps it to 409."""

    code = "no-failed-turn"


class NothingToContinue(SessionError):
    """A continue was asked for, but the session's last message is not a finished assistant
    reply with text. HTTP maps it to 409."""

    code = "nothing-to-continue"


#: How many of the newest messages a continue looks through for the reply it extends and the
#: continuations already made of it.
CONTINUE_WINDOW = 256


async def continue_target(conversations: ConversationCache, session_id: str) -> tuple[str, str]:
    """The reply a ``continue`` turn extends: its root message id and the text written so far
    (the root and every continuation of it). :class:`NothingToContinue` when the last shown
    message is not a finished assistant reply. Reads the log only, so the manager can refuse a
    ``continue`` before it starts an agent (whose creation listeners may write)."""
    read = await conversations.recent(
        session_id, roles=("user", "assistant"), limit=CONTINUE_WINDOW
    )
    shown = [m for m in read.messages if m.text and not m.tool_calls]
    last = shown[-1] if shown else None
    if last is None or last.role != "assistant" or last.incomplete_turn:
        raise NothingToContinue("the last message is not a finished assistant reply")
    root: str = last.continues or last.id
    parts = [m.text for m in shown if m.role == "assistant" and root in (m.id, m.continues)]
    return root, "".join(parts)


@dataclass(slots=True)
class _Special:
    """A ``continue``/``impersonate`` turn asked for and not yet run."""

    kind: TurnKind
    #: ``continue``: the extended message's id and its whole text so far.
    continues: str | None = None
    continued: str = ""
    #: ``impersonate``: answered with the text when the turn ends.
    done: asyncio.Future[Impersonation] | None = None
    text: str = ""


class Agent:
    """Serves one session. Inbox changes are durable splices, written before the live change.

    Everything it uses from outside comes in ``services`` (see :class:`TurnServices`)."""

    def __init__(self, services: TurnServices, header: SessionHeader) -> None:
        self.services = services
        self.header = header
        self.session_id = header.id
        self.inbox = InboxProjection()
        self.last_turn = 0
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self.interrupts = TurnInterrupts(header.id)
        self._partial: list[str] = []
        self._idle = asyncio.Event()
        self._idle.set()
        #: A retry of the failed last turn was asked for: the next turn claims no input.
        self._retry = False
        #: A continue or impersonate turn asked for: the next turn claims no input.
        self._special: _Special | None = None
        #: Encodes the sent arrays for ``request/assembly`` (reusing unchanged messages).
        self.wire_digest = WireDigest()

    # -- state ---------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._task is not None

    def restore(self, events: tuple[SessionEvent, ...], last_turn: int) -> None:
        """Rebuild the inbox from durable splices; turn numbers continue after ``last_turn``.

        Splices inherited from a fork's parent are ignored: forks copy no queued input.
        """
        self.inbox = InboxProjection.from_events(events, after_seq=self.header.seed_length)
        self.last_turn = last_turn

    async def close_dangling_turn(self, turn: int, events: tuple[SessionEvent, ...] = ()) -> None:
        """A turn left open by a crash or restart is closed as interrupted; each tool call it
        left without a result first gets an interrupted one (the next request must answer
        every call)."""
        calls = unanswered_calls(events, turn)
        if calls:
            outcome = interrupted("the host restarted before the call finished")
            await self.services.store.append_many(
                self.session_id,
                [result_event(self.services.new_id(), call, outcome, turn) for call in calls],
            )
        await self._end_turn(turn, "interrupted", "HOST_RESTARTED", "host restarted")

    # -- inbox ---------------------------------------------------------------------------------
    async def prompt(self, text: str, mode: PromptMode) -> PromptReceipt:
        async with self._lock:
            target: InboxTarget = "next-step" if mode == "steer" and self.running else "next-turn"
            item = InboxItem(id=self.services.new_id(), content=text_content(text))
            splice = self.inbox.plan_insert(target, [item])
            event = await self.services.sessions.append(self.session_id, splice)
            self.inbox.apply(event.seq, splice)  # live change only after the durable one
            started = self._ensure_running()
        return PromptReceipt(
            session_id=self.session_id,
            item_id=item.id,
            splice_seq=event.seq,
            mode=mode,
            started_turn=started,
        )

    async def cancel_queued(self, item_id: str) -> bool:
        """Drop a queued input before any turn claims it."""
        async with self._lock:
            for target in ("next-turn", "next-step"):
                ids = [item.id for item in self.inbox.queue(target)]
                if item_id in ids:
                    splice = self.inbox.plan_cancel(target, ids.index(item_id), 1)
                    assert splice is not None
                    event = await self.services.sessions.append(self.session_id, splice)
                    self.inbox.apply(event.seq, splice)
                    return True
        return False

    async def retry(self) -> int:
        """Re-run the failed last turn: a new turn over the same durable history, with no new
        user message (the failed turn's input is already in it). Returns the new turn number.

        :class:`TurnConflict` while a turn runs; :class:`NoFailedTurn` when the last turn did not
        fail (or input is already queued for the next turn, which would run first anyway).
        """
        async with self._lock:
            if self.running:
                raise TurnConflict("a turn is running; retry after it ends")
            if self.inbox.queue("next-turn"):
                raise NoFailedTurn("input is queued: the next turn runs it")
            read = await self.services.sessions.conversations.messages(self.session_id, roles=())
            if read.failed_turn is None:
                raise NoFailedTurn("the last turn did not fail; there is nothing to retry")
            self._retry = True
            self._idle.clear()
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"agent:{self.session_id}"
            )
            return self.last_turn + 1

    async def reply(self) -> int:
        """Start a normal turn over the durable history that claims no input: the model
        answers again without a new user message (a group's next speaker, docs/sessions.md
        "Turn kinds"). Returns its number; :class:`TurnConflict` while a turn runs or input is
        queued (the queued input's turn answers first)."""
        async with self._lock:
            self._check_idle("reply")
            if self._retry:
                raise TurnConflict("a turn is about to run; reply after it ends")
            self._retry = True
            self._start_task()
            return self.last_turn + 1

    async def continue_reply(self) -> int:
        """Start a ``continue`` turn extending the last assistant reply (docs/sessions.md
        "Turn kinds"); returns its number. :class:`TurnConflict` while a turn runs or input is
        queued, :class:`NothingToContinue` when the last message is not a finished reply."""
        async with self._lock:
            self._check_idle("continue")
            root, continued = await continue_target(
                self.services.sessions.conversations, self.session_id
            )
            self._special = _Special("continue", continues=root, continued=continued)
            self._start_task()
            return self.last_turn + 1

    async def impersonate(self) -> Impersonation:
        """Run an ``impersonate`` turn and wait for its text (nothing is appended as a
        message). :class:`TurnConflict` while a turn runs or input is queued."""
        async with self._lock:
            self._check_idle("impersonate")
            done: asyncio.Future[Impersonation] = asyncio.get_running_loop().create_future()
            self._special = _Special("impersonate", done=done)
            self._start_task()
        return await asyncio.shield(done)

    def _check_idle(self, what: str) -> None:
        if self.running or self._special is not None:
            raise TurnConflict(f"a turn is running; {what} after it ends")
        if self.inbox.queue("next-turn"):
            raise TurnConflict(f"input is queued: the next turn runs it; {what} after it")

    def _start_task(self) -> None:
        self._idle.clear()
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"agent:{self.session_id}"
        )

    def resume(self) -> None:
        """Start serving queued input restored from the log."""
        self._ensure_running()

    def _ensure_running(self) -> bool:
        if self._task is not None or not self.inbox.queue("next-turn"):
            return False
        self._idle.clear()
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"agent:{self.session_id}"
        )
        return True

    async def wait_idle(self) -> None:
        await self._idle.wait()

    def interrupt(self, reason: str | None = None) -> bool:
        """Interrupt the running turn: its stream or tool call stops now, and no further step
        starts. ``False`` when no turn is running."""
        if self._task is None:
            return False
        self.interrupts.interrupt(reason)
        return True

    async def drop_queued(self) -> None:
        """Cancel every queued input of both queues (durable ``cancel`` splices first)."""
        async with self._lock:
            for splice in self.inbox.plan_clear():
                event = await self.services.sessions.append(self.session_id, splice)
                self.inbox.apply(event.seq, splice)

    async def stop(self) -> None:
        """Shutdown: interrupt, let the turn record its end, then stop the loop."""
        self.interrupt()
        task = self._task
        if task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(task), timeout=5)
            except TimeoutError:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

    # -- turns ---------------------------------------------------------------------------------
    async def _run(self) -> None:
        try:
            while True:
                async with self._lock:
                    if (
                        not self.inbox.queue("next-turn")
                        and not self._retry
                        and self._special is None
                    ):
                        break
                await self._turn()
        except Exception:
            log.exception("agent loop of session %s failed", self.session_id)
        finally:
            self._task = None
            self._idle.set()
            special, self._special = self._special, None
            if special is not None and special.done is not None and not special.done.done():
                special.done.set_exception(TurnConflict("the agent stopped before the turn ran"))
            # Input that arrived while the loop was finishing starts a new loop.
            if self.inbox.queue("next-turn") and not self.services.closing():
                self._ensure_running()

    async def _claim(
        self,
        turn: int,
        target: InboxTarget,
        *,
        leading: tuple[EventData, ...] = (),
        leftover_steering: bool = False,
    ) -> tuple[tuple[InboxItem, ...], int | None]:
        """Claim the whole queue of ``target``.

        ``leading`` events (``turn/start``), the claim splice and the claimed input as user
        messages (origin ``user``, or ``steering`` for next-step input) land in one transaction.
        With ``leftover_steering`` (a turn's first claim), steering that a cancelled or failed
        turn never delivered is claimed first, in the same transaction: the rule is that
        steering survives a cancel and is delivered first in the next turn (docs/sessions.md).
        Nothing is claimed when ``target`` is empty.
        """
        async with self._lock:
            splice = self.inbox.plan_claim(target, turn=turn)
            if splice is None:
                return (), None
            claims: list[tuple[InboxSpliced, tuple[InboxItem, ...], MessageOrigin]] = []
            if leftover_steering and target == "next-turn":
                early = self.inbox.plan_claim("next-step", turn=turn)
                if early is not None:
                    items = self.inbox.queue("next-step")[: early.removed_count]
                    claims.append((early, items, STEERING_ORIGIN))
            origin = USER_ORIGIN if target == "next-turn" else STEERING_ORIGIN
            claims.append((splice, self.inbox.queue(target)[: splice.removed_count], origin))
            messages = [
                UserMessage(message_id=item.id, content=item.content, origin=source, turn=turn)
                for _, items, source in claims
                for item in items
            ]
            events = await self.services.store.append_many(
                self.session_id, [*leading, *(c[0] for c in claims), *messages]
            )
            for offset, (claimed_splice, _, _) in enumerate(claims):
                self.inbox.apply(events[len(leading) + offset].seq, claimed_splice)
            batch = tuple(item for _, items, _ in claims for item in items)
            return batch, events[len(leading) + len(claims) - 1].seq

    async def _turn(self) -> None:
        turn = self.last_turn + 1
        self.last_turn = turn
        kind: Literal["completed", "interrupted", "error"] = "completed"
        code: str | None = None
        message: str | None = None
        assistant_seq: int | None = None
        self.interrupts.reset()
        special, self._special = self._special, None
        try:
            if special is not None:  # continue/impersonate: over the durable history, one step
                await self.services.sessions.append(
                    self.session_id, TurnStart(turn=turn, kind=special.kind)
                )
                context = TurnContext(
                    session_id=self.session_id,
                    turn=turn,
                    delegation_depth=self.header.delegation_depth,
                    claimed=(),
                    claim_seq=None,
                    kind=special.kind,
                    continued=special.continued,
                )
                assistant_seq = await self._special_request(context, special)
            elif self._retry:  # re-run over the durable history: nothing is claimed
                self._retry = False
                await self.services.sessions.append(self.session_id, TurnStart(turn=turn))
                claimed: tuple[InboxItem, ...] = ()
                claim_seq: int | None = None
                assistant_seq = await self._steps(turn, claimed, claim_seq)
            else:
                claimed, claim_seq = await self._claim(
                    turn, "next-turn", leading=(TurnStart(turn=turn),), leftover_steering=True
                )
                if claim_seq is None:  # the queue was cancelled meanwhile: no turn starts
                    self.last_turn -= 1
                    return
                assistant_seq = await self._steps(turn, claimed, claim_seq)
        except TurnInterrupted:
            kind = "interrupted"
            code, message = self.interrupts.end()
        except TurnFailed as exc:
            kind, code, message = "error", exc.code, exc.message
        except Exception as exc:
            log.exception("turn %d of session %s failed", turn, self.session_id)
            kind, code, message = "error", "TURN_FAILED", type(exc).__name__
        await self._end_turn(turn, kind, code, message, assistant_seq)
        if special is not None and special.done is not None and not special.done.done():
            special.done.set_result(Impersonation(turn, special.text, kind, code, message))

    async def _steps(
        self, turn: int, claimed: tuple[InboxItem, ...], claim_seq: int | None
    ) -> int | None:
        """A normal turn's steps: a request, its tool calls, steering; the last reply's seq."""
        assistant_seq: int | None = None
        step = 1
        max_steps = self.services.max_steps
        while True:
            context = TurnContext(
                session_id=self.session_id,
                turn=turn,
                delegation_depth=self.header.delegation_depth,
                claimed=claimed,
                claim_seq=claim_seq,
                step=step,
            )
            assistant_seq, calls, pinned = await self._request(context)
            if calls:
                if step >= max_steps:
                    limit = f"the turn reached its limit of {max_steps} steps"
                    await answer_calls(self.services, context, calls, interrupted(limit))
                    raise TurnFailed("TOOL_STEP_LIMIT", limit)
                await run_tools(
                    self.services,
                    context,
                    calls,
                    pinned,
                    workspace_id=self.header.workspace_id,
                    interrupts=self.interrupts,
                )
            steering, steer_seq = await self._claim(turn, "next-step")
            if not steering and not calls:
                break
            if self.interrupts.cancelled:
                raise TurnInterrupted
            step += 1
            claimed, claim_seq = steering, steer_seq
        return assistant_seq

    async def _special_request(self, context: TurnContext, special: _Special) -> int | None:
        """The one request of a continue/impersonate turn; the continuation's seq (an
        impersonation appends no message and keeps its text on ``special``)."""
        try:
            seq, _, _ = await self._request(context, special)
        finally:
            if context.kind == "impersonate" and not special.text:
                special.text = "".join(self._partial)
        return seq

    async def _end_turn(
        self,
        turn: int,
        kind: Literal["completed", "interrupted", "error"],
        code: str | None,
        message: str | None,
        assistant_seq: int | None = None,
    ) -> None:
        reason = TurnEndReason(kind=kind, code=code, message=message)
        await self.services.sessions.append(self.session_id, TurnEnd(turn=turn, reason=reason))
        await self.services.bus.publish(
            TURN_ENDED,
            TurnEnded(
                session_id=self.session_id, turn=turn, reason=kind, assistant_seq=assistant_seq
            ),
        )

    async def _prepare(
        self, context: TurnContext
    ) -> tuple[ProviderRequest, SandboxModeName | None]:
        """System assembly from ordered sections, ``agent/pre-step``, history, projection and
        the call config with the tools offered. Returns the request and the step's pin."""
        services = self.services
        sections = await services.sections.render(context)
        messages: list[ChatMessage] = []
        system: tuple[ChatMessage, int] | None = None
        if sections:
            system_text = SECTION_JOINER.join(text for _, text in sections)
            event = await services.sessions.append(
                self.session_id,
                SystemMessage(
                    message_id=self.services.new_id(),
                    content=text_content(system_text),
                    turn=context.turn,
                    sections=section_spans(sections, SECTION_JOINER),
                ),
            )
            messages.append(ChatMessage(role="system", content=system_text))
            system = (messages[-1], event.seq)
        pinned = await pre_step(services, context)
        history = await services.sessions.conversations.history(self.session_id)
        if system is not None:
            history.add_ref(*system)
        messages.extend(
            history.messages if history.answered else answer_missing(list(history.messages))
        )
        sent = await project_request(
            services, self.wire_digest, context, tuple(messages), history.seqs_of
        )
        # A continue or impersonate turn writes text only: no tools are offered.
        offered = services.tools.registry.entries() if context.kind == "normal" else ()
        draft = CallConfigDraft(**services.call_config(), tools=[t.name for t in offered])
        await services.request_hooks.apply(context, draft)
        tools = tuple(
            ToolSpec(name=t.name, description=t.description, parameters=dict(t.parameters))
            for t in offered
            if t.name in draft.tools
        )
        request = ProviderRequest(
            messages=sent,
            params=draft.to_params(),
            model=draft.model,
            tools=tools,
            tool_choice=(draft.tool_choice or "auto") if tools else None,
        )
        return request, pinned

    async def _request(
        self, context: TurnContext, special: _Special | None = None
    ) -> tuple[int | None, tuple[ChatToolCall, ...], SandboxModeName | None]:
        """One request with parameter fallback: the assistant message's seq, its tool calls
        and the step's pinned sandbox mode. An impersonation appends no message (``None``):
        its text goes to ``special``."""
        continues = special.continues if special is not None else None
        keep = special is None or special.kind != "impersonate"
        services = self.services
        request, pinned = await self._prepare(context)
        provider = services.provider
        requested = request.params
        # The provider profile's omissions come first; each is recorded as requested/effective.
        unsupported = tuple(
            n for n in requested.active() if not provider.accepts(n, requested.get(n))
        )
        admitted = requested
        for name in unsupported:
            admitted = admitted.without(name)
        request = with_params(request, admitted)
        fallback = ParameterFallback(admitted)
        while True:
            # Cancelled while the request was prepared: nothing is sent.
            if self.interrupts.cancelled:
                raise TurnInterrupted
            params = fallback.params
            attempt = len(fallback.attempts) + 1
            await services.sessions.append(
                self.session_id,
                RequestHeader(
                    turn=context.turn,
                    attempt=attempt,
                    provider=provider.name,
                    model=request.model,
                    requested=record_params(requested),
                    effective=record_params(params),
                    omitted=(*unsupported, *fallback.omitted),
                    tools=tuple(t.name for t in request.tools),
                    tool_choice=request.tool_choice,
                    step=context.step,
                ),
            )
            self._partial = []
            try:
                final = await self._stream(with_params(request, params), context)
            except TurnInterrupted:
                if keep:
                    text = "".join(self._partial)
                    await self._append_assistant(
                        context, text, interrupted=True, continues=continues
                    )
                raise
            except ProviderError as error:
                started = bool(self._partial) or error.output_started
                retryable = (
                    next_fallback_params(
                        error, request.params, fallback.omitted, output_started=started
                    )
                    is not None
                )
                await services.sessions.append(
                    self.session_id,
                    RequestError(
                        turn=context.turn,
                        attempt=attempt,
                        kind=error.kind,
                        message=error.message,
                        parameter=error.parameter,
                        status=error.status,
                    ),
                )
                notice = RequestErrorNotice(
                    session_id=self.session_id,
                    turn=context.turn,
                    attempt=attempt,
                    kind=error.kind,
                    message=error.message,
                    parameter=error.parameter,
                    status=error.status,
                    params=params,
                    retryable=retryable,
                )
                if services.parameter_fallback and error.parameter is not None:
                    notice.retry_without(error.parameter)
                await services.bus.publish(REQUEST_ERROR, notice)
                following = fallback.after_error(error, params, output_started=started)
                if notice.retry and following is not None:
                    continue
                if self._partial and keep:
                    text = "".join(self._partial)
                    await self._append_assistant(
                        context, text, interrupted=True, continues=continues
                    )
                code = f"PROVIDER_{error.kind.upper().replace('-', '_')}"
                raise TurnFailed(code, error.message) from error
            fallback.record_success(final.effective)
            if special is not None and not keep:
                special.text = final.text
                return None, (), pinned
            event = await self._append_assistant(
                context, final.text, final=final, continues=continues
            )
            return event.seq, final.tool_calls, pinned

    async def _append_assistant(
        self,
        context: TurnContext,
        text: str,
        *,
        interrupted: bool = False,
        final: FinalMessage | None = None,
        continues: str | None = None,
    ) -> SessionEvent:
        return await self.services.sessions.append(
            self.session_id,
            AssistantMessage(
                message_id=self.services.new_id(),
                content=text_content(text),
                turn=context.turn,
                reasoning=final.reasoning if final else None,
                tool_calls=tuple(
                    ToolCall(id=c.id, name=c.name, arguments=c.arguments)
                    for c in (final.tool_calls if final else ())
                ),
                interrupted=interrupted,
                finish_reason=final.finish_reason if final else None,
                provider=self.services.provider.name,
                model=final.model if final else None,
                usage=usage_of(final) if final else None,
                continues=continues,
            ),
        )

    async def _stream(self, request: ProviderRequest, context: TurnContext) -> FinalMessage:
        """Consume the provider stream in a sub-task so ``cancel`` interrupts only the stream."""
        hub = self.services.hub
        provider = self.services.provider

        async def consume() -> FinalMessage:
            async for item in provider.stream(request):
                if isinstance(item, TextDelta):
                    self._partial.append(item.text)
                    hub.publish(
                        self.session_id,
                        Partial("assistant/partial", {"turn": context.turn, "text": item.text}),
                    )
                elif isinstance(item, ReasoningDelta):
                    hub.publish(
                        self.session_id,
                        Partial("assistant/reasoning", {"turn": context.turn, "text": item.text}),
                    )
                elif isinstance(item, ToolCallDelta):
                    fragment = {"turn": context.turn, "index": item.index, "id": item.id}
                    fragment |= {"name": item.name, "arguments": item.arguments}
                    hub.publish(self.session_id, Partial("assistant/tool-call", fragment))
                else:
                    return item
            raise ProviderError("server", "the provider stream ended without a final message")

        return await self.interrupts.run(consume())


def new_message_id() -> str:
    """Random message and inbox item ids."""
    return uuid.uuid4().hex
