"""Command processors: trusted plugin registrations and card declarations run in a VM.

docs/contract/mvu-vm.md#command-processors. One processor is effective per state instance:
a plugin's ``registerCommandProcessor`` for the instance, else one for its template, else the
card's own enabled declaration, run in the instance's QuickJS VM
(:mod:`innkeeper_tavern.features.mvu_vm`).
Whatever a processor returns is checked as a filter or an offered recovery
(:mod:`.commands`) and then passes the engine's path, schema and atomic checks.

Every processor run yields a lease. The turn's save rechecks it synchronously right before the
commit ("after asynchronous Host initialization and scheduling, the original save synchronously
rechecks ... registration generation, source lease"): a plugin registration that was replaced,
disposed or unloaded, a card whose declaration changed (its flags, its source), a VM pool that
was closed or a service that is unloading revokes the run, and nothing of it is saved — neither
a commit nor a failure receipt. The reply then stays unconsumed for the next reconciliation.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import secrets
from collections.abc import Awaitable, Callable, Sequence

from innkeeper_hostapi.mvu import (
    COMMAND_PROCESSOR_BUDGET_SECONDS,
    CommandProcessorReceipt,
    CommandProcessorRegistration,
    CommandProcessorSpec,
    MvuCommandBatch,
    MvuCommandView,
)
from innkeeper_tavern.features.mvu_vm import Declaration, Dispatch, VmError, operation_gate
from innkeeper_tavern.pure.mvu import MvuFatalError, UpdateResult, apply_commands, apply_reply
from innkeeper_tavern.pure.mvu.ledger import StateRecord

from . import commands as command_view
from .common import (
    MAX_PROCESSOR_RERUNS,
    Lease,
    Processor,
    ReplyRun,
    close_awaitable,
    detached,
    is_resource_id,
    is_sync_callable,
    service_error,
)
from .core import ServiceCore

#: Runs a batch through a processor: the views to keep (``None``: all), or :class:`_Refused`.
_Run = Callable[[MvuCommandBatch], Awaitable["Sequence[MvuCommandView] | None"]]


class _Refused(Exception):
    """A processor failed or refused its batch; ``code`` goes on the reply's receipt."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class MvuProcessors(ServiceCore):
    """Command processors of :class:`~.service.MvuService`."""

    async def _run_reply(
        self, state_id: str, record: StateRecord, text: str, user_text: str
    ) -> ReplyRun | None:
        """Run the reply, through the effective command processor when there is one.

        ``None`` when the processor was replaced or revoked during every attempt: a revoked
        registration never persists a receipt that consumes the reply."""
        for _ in range(MAX_PROCESSOR_RERUNS):
            processor = self._effective_processor(state_id, record.template_id)
            if processor is not None:
                lease = self._plugin_lease(state_id, record.template_id, processor)
                result = await self._process(
                    state_id, record, text, functools.partial(self._call_plugin, processor)
                )
                if lease():
                    return ReplyRun(result, processor.receipt.registration_id, lease)
                continue
            card = await self._card_declaration(state_id, record.template_id)
            if card is None:
                mathjs = record.interpreter_version >= 3
                native = await asyncio.to_thread(
                    functools.partial(apply_reply, record.content, text, mathjs=mathjs)
                )
                return ReplyRun(native, None, None)
            declaration, error, lease = card
            if declaration is None:
                assert error is not None
                message = "the card declares more than one command processor"
                if error != "MVU_PROCESSOR_CONFLICT":
                    message = "the card's command processor exceeds 64 Ki code units"
                result = _failed(record, error, message)
                registration: str | None = None
            else:
                result, registration = await self._run_card(
                    state_id, record, text, user_text, declaration
                )
            if lease():
                return ReplyRun(result, registration, lease)
        return None

    def _plugin_lease(self, state_id: str, template_id: str, processor: Processor) -> Lease:
        def current() -> bool:
            effective = self._effective_processor(state_id, template_id)
            return not self._closed and effective is processor

        return current

    async def _card_declaration(
        self, state_id: str, template_id: str
    ) -> tuple[Declaration | None, str | None, Lease] | None:
        """The card's declaration for this instance (or the reason it cannot run) and the
        lease of a run with it; ``None`` when the card declares no processor."""
        stored = self._doc.templates.get(template_id)
        card_id = stored.character_id if stored is not None else None
        if card_id is None:
            return None
        entry = self._resources.characters.entry(card_id)
        if entry is None:
            return None
        seen = (entry.updated_at, entry.sha256)
        generation = self._vms.generation
        template = await self._template(card_id)
        if template is None or (template.processor is None and template.processor_error is None):
            return None

        def current() -> bool:
            now = self._resources.characters.entry(card_id)
            return (
                not self._closed
                and self._vms.generation == generation
                and self._effective_processor(state_id, template_id) is None
                and now is not None
                and (now.updated_at, now.sha256) == seen
            )

        return template.processor, template.processor_error, current

    async def _run_card(
        self,
        state_id: str,
        record: StateRecord,
        text: str,
        user_text: str,
        declaration: Declaration,
    ) -> tuple[UpdateResult, str | None]:
        gate = operation_gate(user_text)

        async def run(batch: MvuCommandBatch) -> Sequence[MvuCommandView]:
            call = Dispatch(batch.variables, batch.commands, batch.message_content, gate)
            try:
                views, _ = await self._vms.dispatch(state_id, declaration, call)
            except VmError as exc:
                raise _Refused(exc.code, str(exc)) from None
            return views

        result = await self._process(state_id, record, text, run)
        receipt = self._vms.receipt(state_id, declaration)
        return result, receipt.registration_id if receipt is not None else None

    async def _call_plugin(
        self, processor: Processor, batch: MvuCommandBatch
    ) -> Sequence[MvuCommandView] | None:
        try:
            output = await asyncio.wait_for(
                asyncio.to_thread(processor.fn, batch), timeout=COMMAND_PROCESSOR_BUDGET_SECONDS
            )
        except TimeoutError:
            raise _Refused(
                "MVU_PROCESSOR_TIMEOUT", "the command processor overran its budget"
            ) from None
        except Exception as exc:
            self._log.warning("MVU command processor raised %s", type(exc).__name__)
            raise _Refused("MVU_PROCESSOR_FAILED", "the command processor raised") from None
        if close_awaitable(output):
            raise _Refused("MVU_PROCESSOR_FAILED", "async command processors are rejected")
        return output

    async def _process(
        self, state_id: str, record: StateRecord, text: str, run: _Run
    ) -> UpdateResult:
        """Extract the reply's commands, let ``run`` choose, check the choice and apply it."""
        try:
            prepared = await asyncio.to_thread(command_view.prepare, text)
        except MvuFatalError as fatal:
            return UpdateResult(dict(record.content), False, [], fatal=fatal)
        batch = MvuCommandBatch(
            state_id=state_id,
            variables=detached(record.content),
            commands=prepared.views(),
            message_content=text,
            recoverable=tuple(r.offer for r in prepared.recoveries),
        )
        try:
            output = await run(batch)
        except _Refused as exc:
            return _failed(record, exc.code, str(exc))
        try:
            chosen = command_view.select(prepared, output)
        except command_view.ProcessorOutputRejected as exc:
            return _failed(record, exc.code, str(exc))
        except MvuFatalError as fatal:
            return UpdateResult(dict(record.content), False, [], fatal=fatal)
        return await asyncio.to_thread(
            lambda: apply_commands(
                record.content,
                chosen,
                extract_issues=prepared.issues,
                mathjs=record.interpreter_version >= 3,
            )
        )

    async def register_command_processor(
        self, spec: CommandProcessorSpec
    ) -> CommandProcessorRegistration:
        """Make ``spec.source`` the effective processor of ``spec.id``
        (docs/contract/mvu-vm.md#command-processors). A newer registration replaces an older one
        (and a card's declaration); the returned disposer removes this registration only."""
        if self._closed:
            raise service_error("MVU_UNAVAILABLE", "the MVU service is unloading", 503)
        if not is_resource_id(spec.id):
            raise service_error("MVU_ID_INVALID", "a processor needs a resource id")
        fn = spec.source
        if not is_sync_callable(fn):
            raise service_error("MVU_PROCESSOR_INVALID", "a processor is a synchronous callable")
        module = getattr(fn, "__module__", None) or "?"
        name = getattr(fn, "__qualname__", None) or type(fn).__qualname__
        source = f"{module}:{name}"
        code = getattr(fn, "__code__", None)
        digest = hashlib.sha256(
            source.encode() + (code.co_code if code is not None else b"")
        ).hexdigest()
        self._generation += 1
        generation = next(self._counter)
        receipt = CommandProcessorReceipt(
            registration_id=f"mvu-processor-{generation}-{secrets.token_hex(4)}",
            source=source,
            sha256=digest,
        )
        processor = Processor(spec.id, fn, generation, receipt)
        self._processors[spec.id] = processor

        async def dispose() -> None:
            if self._processors.get(spec.id) is processor:
                del self._processors[spec.id]
                self._generation += 1

        return CommandProcessorRegistration(receipt, dispose)


def _failed(record: StateRecord, code: str, message: str) -> UpdateResult:
    return UpdateResult(dict(record.content), False, [], fatal=MvuFatalError(message, code=code))
