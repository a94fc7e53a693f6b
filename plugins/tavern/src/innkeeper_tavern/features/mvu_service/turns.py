"""Turn application: completed replies applied exactly once (through the effective command
processor, :mod:`.processors`), pre-turn checkpoints, and the usage / observer registrations
(docs/contract/mvu.md#durable-history).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from innkeeper_hostapi.mvu import (
    FactListener,
    UsageHandler,
)
from innkeeper_hostapi.sessions import (
    AssistantMessage,
    SessionEvent,
    TurnEnd,
    TurnStart,
    UserMessage,
    text_of,
)
from innkeeper_tavern.pure.mvu import MvuError
from innkeeper_tavern.pure.mvu import ledger as mvu_ledger
from innkeeper_tavern.pure.mvu.ledger import LedgerError

from .common import (
    LOCAL_AUTHORITY,
    MANAGER_PROVIDER_ID,
    MAX_PROCESSOR_RERUNS,
    STORE_TRIGGER,
    Lease,
    off_loop,
)
from .core import ServiceCore
from .store import AppliedRecord, CheckpointRecord


class MvuTurns(ServiceCore):
    """Turn application of :class:`~.service.MvuService`."""

    async def reconcile(self, session_id: str) -> None:
        """Apply every completed, not yet considered turn of ``session_id`` in order."""
        async with self._lock:
            await self._reconcile_locked(session_id)

    async def _reconcile_locked(self, session_id: str) -> None:
        doc = self._doc
        session = doc.sessions.get(session_id)
        if session is None:
            if await self._ensure_instance(session_id) is None:
                return
            session = self._doc.sessions[session_id]
        events = await self._events_after(session_id, session.scanned_through)
        candidates: dict[int, SessionEvent] = {}
        user_texts: dict[int, list[str]] = {}
        safe = session.scanned_through
        open_turn = False
        for event in events:
            data = event.data
            if isinstance(data, TurnStart):
                open_turn = True
                candidates.pop(data.turn, None)
                user_texts.pop(data.turn, None)
            elif isinstance(data, UserMessage) and data.turn is not None:
                # The operation gate reads the same durable turn's user text only.
                user_texts.setdefault(data.turn, []).append(text_of(data.content))
            elif isinstance(data, AssistantMessage):
                # The last assistant message of the turn that is neither interrupted nor a
                # tool call (docs/contract/mvu.md#durable-history).
                if not data.interrupted and not data.tool_calls:
                    candidates[data.turn] = event
            elif isinstance(data, TurnEnd):
                open_turn = False
                chosen = candidates.pop(data.turn, None)
                if data.reason.kind == "completed" and chosen is not None:
                    user_text = "\n".join(user_texts.pop(data.turn, []))
                    consumed = await self._apply_locked(session_id, chosen, event.seq, user_text)
                    if not consumed:
                        # A registration changed under the reply: it stays unconsumed and
                        # nothing after it is applied before it.
                        break
            if not open_turn:
                safe = event.seq
        current = self._doc.sessions.get(session_id)
        if current is not None and safe > current.scanned_through:
            updated = msgspec.structs.replace(current, scanned_through=safe)
            await self._commit(
                self._with(self._doc, sessions={**self._doc.sessions, session_id: updated})
            )

    async def _apply_locked(
        self, session_id: str, event: SessionEvent, end_seq: int, user_text: str = ""
    ) -> bool:
        """Apply one reply and record its receipt; ``False`` when it must stay unconsumed (a
        usage or processor registration kept changing while it ran, or its processor run was
        revoked before the save)."""
        data = event.data
        assert isinstance(data, AssistantMessage)
        key = str(event.seq)
        if key in self._doc.applied.get(session_id, {}):
            return True
        state_id = await self._ensure_instance(session_id)
        if state_id is None:
            return True
        record = self._doc.ledger.states[state_id]
        text = text_of(data.content)
        base = {
            "id": state_id,
            "sessionId": session_id,
            "turn": data.turn,
            "turnKind": "assistant-reply",
            "messageSeq": event.seq,
        }
        started = {**base, "phase": "started", "revision": record.revision}
        outcome, code, result, processor = "skipped", None, None, None
        lease: Lease | None = None
        # The session's selection as the run starts (a processor run is revoked when it changes).
        selection = self._selections.record(session_id)
        for _ in range(MAX_PROCESSOR_RERUNS):
            usage_generation = self._usage_generation
            decision = await self._manager_decision(state_id, session_id, data.turn, text)
            if usage_generation == self._usage_generation:
                break
        else:
            return False
        if decision is not None:
            code = decision
        else:
            ran = await self._run_reply(state_id, record, text, user_text)
            if ran is None:
                return False
            result, processor, lease = ran.result, ran.registration_id, ran.lease
            if result.fatal is not None:
                outcome, code = "failed", result.fatal.code
            else:
                outcome = "applied" if result.modified else "unchanged"
        doc = self._doc
        ledger = doc.ledger
        revision = record.revision
        coordinates = doc.coordinates
        if outcome == "applied":
            assert result is not None
            try:
                ledger, receipt = await off_loop(
                    mvu_ledger.update,
                    ledger,
                    state_id,
                    result.variables,
                    expected_revision=record.revision,
                    operation_id=f"reply:{session_id}:{event.seq}",
                    now=self._clock(),
                    kind="reply",
                    source={
                        "sessionId": session_id,
                        "messageId": data.message_id,
                        "messageSeq": event.seq,
                        "turn": data.turn,
                    },
                )
                revision = receipt.revision
                coordinates = {
                    **coordinates,
                    state_id: [*coordinates.get(state_id, []), (revision, event.seq)],
                }
            except MvuError as exc:
                outcome, code, ledger = "failed", exc.code, doc.ledger
        applied = AppliedRecord(
            state_id=state_id,
            turn=data.turn,
            outcome=outcome,
            at=self._clock(),
            revision_before=record.revision,
            revision=revision,
            code=code,
            diagnostics=len(result.diagnostics) if result is not None else 0,
            processor=processor,
        )
        session = doc.sessions[session_id]
        session = msgspec.structs.replace(
            session, scanned_through=max(session.scanned_through, end_seq)
        )
        receipts = {**doc.applied, session_id: {**doc.applied.get(session_id, {}), key: applied}}
        new = self._with(
            doc,
            ledger=ledger,
            coordinates=coordinates,
            applied=receipts,
            sessions={**doc.sessions, session_id: session},
        )
        revoked = lease is not None and (
            not lease() or self._selections.record(session_id) != selection
        )
        if revoked or usage_generation != self._usage_generation:
            # Revoked after the last await (disabled, replaced, unloaded, the selection or a
            # usage policy changed): nothing of this run is saved, not even a failure receipt;
            # the reply stays unconsumed.
            return False
        try:
            await self._commit(new)
        except LedgerError as exc:
            # The state does not fit: keep the previous file and revision, record the refusal.
            applied = msgspec.structs.replace(
                applied, outcome="failed", code=exc.code, revision=record.revision
            )
            receipts = {
                **doc.applied,
                session_id: {**doc.applied.get(session_id, {}), key: applied},
            }
            fallback = self._with(
                doc, applied=receipts, sessions={**doc.sessions, session_id: session}
            )
            try:
                await self._commit(fallback)
            except LedgerError:
                self._log.warning("MVU ledger full: reply %s of a session left unapplied", key)
                return True
            outcome, code, revision = "failed", exc.code, record.revision
        phase = {"applied": "applied", "failed": "failed"}.get(outcome, "skipped")
        fact = {**base, "phase": phase, "revision": revision}
        if outcome == "applied":
            fact["detail"] = "state-committed"
        elif code is not None:
            fact["detail"] = code
        # ``triggered``: the store strategy ran on this reply (a manager's skip never triggers).
        triggered = [{**started, "phase": "triggered", "detail": STORE_TRIGGER}]
        if decision is not None:
            triggered = []
        await self._record_fact(
            started, *triggered, fact, {**base, "phase": "completed", "revision": revision}
        )
        return True

    async def _manager_decision(
        self, state_id: str, session_id: str, turn: int, text: str
    ) -> str | None:
        """``None`` to proceed, or the skip code. Managed execution without an allowing
        decision fails closed (docs/contract/mvu.md#management)."""
        managers = [h for h, provider in self._usage.values() if provider == MANAGER_PROVIDER_ID]
        if not managers:
            return None
        request = {
            "id": state_id,
            "trigger": STORE_TRIGGER,
            "scope": {"authority": LOCAL_AUTHORITY, "sessionId": session_id},
            "event": {
                "sessionId": session_id,
                "turn": turn,
                "text": text,
                "containsMvuUpdate": "_." in text or "<" in text,
            },
        }
        for handler in managers:
            try:
                decision = await handler(request)
            except Exception:
                self._log.exception("an MVU usage handler failed")
                return "MVU_MANAGER_FAILED"
            if decision is None or decision.get("enabled") is not True:
                return "MVU_MANAGER_DENIED"
        return None

    async def checkpoint(
        self, session_id: str, turn: int, claim_seq: int | None = None
    ) -> dict[str, Any] | None:
        """Freeze the pre-turn baseline of ``turn`` (docs/contract/mvu.md#forks-and-seeds): the
        first call records the current version after reconciling earlier turns; later calls (later
        steps) return the same record. ``None`` when the session has no MVU state."""
        async with self._lock:
            state_id = await self._ensure_instance(session_id)
            if state_id is None:
                return None
            await self._reconcile_locked(session_id)
            doc = self._doc
            existing = doc.checkpoints.get(session_id, {}).get(str(turn))
            if existing is None:
                record = doc.ledger.states[state_id]
                existing = CheckpointRecord(
                    state_id=state_id,
                    revision=record.revision,
                    content_sha256=record.content_sha256,
                    at=self._clock(),
                    claim_seq=claim_seq,
                )
                per_session = {**doc.checkpoints.get(session_id, {}), str(turn): existing}
                await self._commit(
                    self._with(doc, checkpoints={**doc.checkpoints, session_id: per_session})
                )
            return {"sessionId": session_id, "turn": turn, **msgspec.to_builtins(existing)}

    def register_usage(
        self, handler: UsageHandler, *, provider_id: str | None = None
    ) -> Callable[[], None]:
        """Register a usage decision handler (docs/contract/mvu.md#management); a handler with
        ``provider_id='dsh-memory-manager'`` makes execution managed until disposed."""
        token = next(self._counter)
        self._usage[token] = (handler, provider_id)
        self._generation += 1
        self._usage_generation += 1

        def dispose() -> None:
            if self._usage.pop(token, None) is not None:
                self._generation += 1
                self._usage_generation += 1

        return dispose

    def observe(self, listener: FactListener) -> Callable[[], None]:
        """Receive every fact as it is recorded (docs/contract/mvu.md#facts)."""
        token = next(self._counter)
        self._observers[token] = listener
        return lambda: self._observers.pop(token, None) and None
