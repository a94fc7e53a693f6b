"""``AssemblyRecorder``: writes one canonical record per assembly when its turn ends.

The profile loader keeps a body-free audit dict of every real assembly (``tavern.assembly_audit``)
and completes it at ``turn/ended`` with the host's parameter evidence. The recorder listens to
the same event *after* the loader (it is installed after it; host listeners run in registration
order), reads the turn back from durable history, joins each step's audit with that step's
events and stores the result. A failure to record is logged (codes only) and never touches the
turn: the audit is evidence about a request, not part of it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from innkeeper_hostapi.agents import TurnEnded
from innkeeper_hostapi.sessions import SessionController, SessionError

from .capture import (
    StepEvidence,
    TurnEvidence,
    TurnReads,
    build_record,
    place_in_system,
    segment,
)
from .model import AssemblyRecord
from .store import TraceStore

__all__ = ["AssemblyRecorder"]

AuditSource = Callable[[str], list[dict[str, Any]]]
#: Strategy snapshots waiting for their turn's end (requests whose turn never ends — a crash —
#: would otherwise pile up).
MAX_PENDING_STRATEGIES = 1024


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _match(evidence: TurnEvidence, audit: dict[str, Any], step: int) -> StepEvidence | None:
    context = audit.get("activationContext")
    claim_seq = context.get("claimEventSeq") if isinstance(context, dict) else None
    if isinstance(claim_seq, int):
        for candidate in evidence.steps:
            if candidate.claim is not None and candidate.claim.seq == claim_seq:
                return candidate
    return evidence.steps[step - 1] if 0 < step <= len(evidence.steps) else None


class AssemblyRecorder:
    """Turns the loader's audits of an ended turn into stored canonical records."""

    def __init__(
        self,
        store: TraceStore,
        *,
        audits: AuditSource,
        sessions: Callable[[], SessionController | None],
        logger: logging.Logger | None = None,
        now: Callable[[], str] = _now,
        reads: TurnReads | None = None,
    ) -> None:
        self.store = store
        self.audits = audits
        self.sessions = sessions
        self.log = logger or logging.getLogger(__name__)
        self.now = now
        #: The turn's events as the loader's ``turn/ended`` listener read them (shared read).
        self.reads = reads if reads is not None else TurnReads()
        self._strategies: dict[tuple[str, int, int], dict[str, Any] | None] = {}

    def note_strategy(
        self, session_id: str, turn: int, step: int, strategy: dict[str, Any] | None
    ) -> None:
        """Remember the strategy a request step was built with (called by a request hook, right
        after the host rendered the step's system prompt)."""
        self._strategies[(session_id, turn, step)] = strategy
        while len(self._strategies) > MAX_PENDING_STRATEGIES:
            del self._strategies[next(iter(self._strategies))]

    async def on_turn_ended(self, event: TurnEnded) -> None:
        """``turn/ended`` listener: record, never raise."""
        try:
            await self.capture(event.session_id, event.turn)
        except OSError as exc:
            self.log.warning(
                "assembly audit of session %s turn %d not written (%s)",
                event.session_id,
                event.turn,
                type(exc).__name__,
            )
        except Exception:
            self.log.exception(
                "assembly audit of session %s turn %d failed", event.session_id, event.turn
            )
        finally:
            self.reads.release(event.session_id, event.turn)

    async def capture(self, session_id: str, turn: int) -> list[AssemblyRecord]:
        """Build and store the records of ``turn`` (one per assembled step)."""
        by_step: dict[int, dict[str, Any]] = {}
        for audit in self.audits(session_id):
            if audit.get("turn") != turn or audit.get("preview"):
                continue
            step = audit.get("step")
            by_step[step if isinstance(step, int) and step > 0 else 1] = audit
        if not by_step:
            return []
        sessions = self.sessions()
        evidence = TurnEvidence(steps=[], turn_end=None, truncated=False)
        format_version: int | None = None
        if sessions is not None:
            try:
                events, truncated = await self.reads.read(sessions, session_id, turn)
                evidence = segment(events, turn, truncated=truncated)
                format_version = (await sessions.inspect(session_id)).meta.version
            except SessionError as exc:
                self.log.warning(
                    "assembly audit: history of %s unreadable (%s)", session_id, exc.code
                )
        captured_at = self.now()
        strategies = {
            key[2]: self._strategies.pop(key)
            for key in [k for k in self._strategies if k[0] == session_id and k[1] == turn]
        }
        records: list[AssemblyRecord] = []
        for step in sorted(by_step):
            # Read only: build_record copies what it changes, and the loader's audit of an ended
            # turn is not changed again.
            audit = by_step[step]
            found = _match(evidence, audit, step)
            record = build_record(
                audit,
                session_id=session_id,
                turn=turn,
                step=step,
                evidence=found,
                turn_end=evidence.turn_end,
                last_step=found is not None and found is evidence.steps[-1],
                scan_truncated=evidence.truncated,
                session_format_version=format_version,
                captured_at=captured_at,
                strategy=strategies.get(step),
            )
            record = await asyncio.to_thread(
                place_in_system, record, found.system if found is not None else None
            )
            records.append(record)
        return await self.store.add(session_id, records)
