"""Seeds and forks: a fork's instance installed from its parent's cut, and the captured seeds of
``captureSessionSeed`` / ``installSessionSeed`` (docs/contract/mvu.md#forks-and-seeds).
"""

from __future__ import annotations

import secrets
from typing import Any

import msgspec

from innkeeper_hostapi.mvu import SeedKind
from innkeeper_hostapi.sessions import AssistantMessage, UserMessage
from innkeeper_tavern.pure.mvu import MvuError
from innkeeper_tavern.pure.mvu import ledger as mvu_ledger
from innkeeper_tavern.pure.mvu.ledger import InstanceIdentity, Ledger, LedgerError

from .common import MAX_PENDING_SEEDS, Scope, is_int, ledger_error, off_loop, service_error
from .core import ServiceCore
from .store import PendingSeed, SessionRecord
from .templates import Template


class MvuSeeds(ServiceCore):
    """Seeds and forks of :class:`~.service.MvuService`."""

    async def _seed_from_parent(
        self,
        template: Template,
        child: InstanceIdentity,
        parent_id: str,
        at_event_id: int,
        now: str,
    ) -> tuple[Ledger, list[tuple[int, int]]]:
        """Install the child from the parent's version current at ``at_event_id`` (lock held).

        The parent is allocated if needed (a fresh parent gets its opening) and its completed
        turns are reconciled first, so a reply already in its log is part of the cut; a version
        committed after the cut never is. A parent whose state cannot be read refuses the
        child's allocation rather than guessing a baseline.
        """
        parent_header, _, _ = await self._header(parent_id)
        parent_identity = InstanceIdentity(template.id, parent_id, parent_header.created_at)
        parent_state = mvu_ledger.instance_id(parent_identity)
        await self._reconcile_locked(parent_id)
        doc = self._doc
        ledger = doc.ledger
        revision = self._revision_at(doc, parent_state, at_event_id)
        if parent_state not in ledger.states or revision is None:
            # The parent had no state at the cut: the child starts from the template (its
            # baseline is never guessed from the parent's later state).
            assert template.initial is not None
            ledger, _ = await off_loop(
                mvu_ledger.create_instance, ledger, child, template.initial, now=now
            )
            return ledger, [(1, 0)]
        seed = mvu_ledger.capture_seed(
            ledger, parent_state, ticket=f"fork:{child.session_id}", revision=revision
        )
        assert seed is not None
        try:
            ledger, record = await off_loop(mvu_ledger.install_seed, ledger, seed, child, now=now)
        except MvuError as exc:
            raise ledger_error(exc) from None
        inherited = [(r, a) for r, a in doc.coordinates.get(parent_state, []) if r <= revision]
        return ledger, [*inherited, (record.revision, at_event_id)]

    async def capture_session_seed(
        self,
        *,
        session_id: str,
        kind: SeedKind,
        at_event_id: int,
        prefix_end_event_id: int | None = None,
        target_session_id: str | None = None,
    ) -> str | None:
        """Freeze a source state for a new session (docs/contract/mvu.md#forks-and-seeds).

        * ``fork``: the version current at ``at_event_id``;
        * ``reply-swipe``: ``at_event_id`` is the replaced reply; its turn's pre-turn checkpoint;
        * ``request-retry``: ``at_event_id`` is the durable user event of the aborted turn; its
          turn's checkpoint.

        Swipes and retries need ``prefix_end_event_id`` (a later one: the target is a fork
        there) or ``target_session_id`` (a root one: a preassigned empty session).
        """
        if kind not in ("fork", "reply-swipe", "request-retry"):
            raise service_error("MVU_SEED_INVALID", "kind is fork, reply-swipe or request-retry")
        if not is_int(at_event_id) or at_event_id < 0:
            raise service_error("MVU_SEED_INVALID", "atEventId must be a non-negative integer")
        if kind != "fork" and prefix_end_event_id is None and target_session_id is None:
            raise service_error(
                "MVU_SEED_INVALID", "swipes and retries need prefixEndEventId or targetSessionId"
            )
        lease = await self._lease(session_id)
        async with self._lock:
            state_id = await self._ensure_instance(session_id)
            if state_id is None:
                return None
            await self._reconcile_locked(session_id)
            doc = self._doc
            if kind == "fork":
                revision = self._revision_at(doc, state_id, at_event_id)
            else:
                event = await self._event_at(session_id, at_event_id)
                data = event.data if event is not None else None
                wanted = AssistantMessage if kind == "reply-swipe" else UserMessage
                if not isinstance(data, wanted) or data.turn is None:
                    raise service_error(
                        "MVU_SEED_EVIDENCE_MISSING",
                        f"atEventId is not the {'reply' if kind == 'reply-swipe' else 'request'}"
                        " of a turn",
                        409,
                    )
                checkpoint = doc.checkpoints.get(session_id, {}).get(str(data.turn))
                if checkpoint is None or checkpoint.state_id != state_id:
                    raise service_error(
                        "MVU_SEED_EVIDENCE_MISSING", "that turn has no checkpoint", 409
                    )
                revision = checkpoint.revision
            if revision is None:
                raise service_error(
                    "MVU_SEED_EVIDENCE_MISSING", "no version at that coordinate", 409
                )
            waiting = sum(1 for p in doc.pending_seeds.values() if p.installed_in is None)
            if waiting >= MAX_PENDING_SEEDS:
                raise service_error(
                    "MVU_SEED_LIMIT",
                    f"{MAX_PENDING_SEEDS} captured seeds await installation; install them first",
                    409,
                )
            ticket = f"mvu-seed-{secrets.token_hex(16)}"
            seed = mvu_ledger.capture_seed(doc.ledger, state_id, ticket=ticket, revision=revision)
            if seed is None:
                raise service_error(
                    "MVU_SEED_EVIDENCE_MISSING", "that version is not recorded", 409
                )
            record = doc.ledger.states[state_id]
            pending = PendingSeed(
                seed=seed,
                kind=kind,
                source_session_id=session_id,
                template_id=record.template_id,
                at_event_id=at_event_id,
                prefix_end_event_id=prefix_end_event_id,
                target_session_id=target_session_id,
            )
            self._check_lease(lease)
            try:
                await self._commit(
                    self._with(doc, pending_seeds={**doc.pending_seeds, ticket: pending})
                )
            except LedgerError as exc:
                raise ledger_error(exc) from None
            return ticket

    async def install_session_seed(self, *, ticket: str, session_id: str) -> dict[str, Any]:
        """Install a captured seed into the created session (docs/contract/mvu.md#forks-and-seeds):
        the child's identity and parent are checked; the same ticket/target is idempotent and a
        conflicting use is rejected."""
        lease = await self._lease(session_id, restore=False)
        async with self._lock:
            doc = self._doc
            pending = doc.pending_seeds.get(ticket)
            if pending is None:
                raise service_error("MVU_SEED_NOT_FOUND", "unknown seed ticket", 404)
            if pending.installed_in is not None and pending.installed_in != session_id:
                raise service_error("MVU_SEED_CONFLICT", "the ticket was installed elsewhere", 409)
            if pending.target_session_id is not None and pending.target_session_id != session_id:
                raise service_error("MVU_SEED_CONFLICT", "the ticket names another target", 409)
            header, last_seq, _ = await self._header(session_id)
            if pending.installed_in == session_id:
                # Idempotent replay: the installed instance, whatever happened to it since.
                child_id = doc.ledger.seeds.get(ticket)
                child = doc.ledger.states.get(child_id) if child_id is not None else None
                if child is None:
                    raise service_error("MVU_SEED_CONFLICT", "the installed instance is gone", 409)
                return self._record_json(
                    child, Scope(session_id, None, None), content=child.content
                )
            cut = pending.prefix_end_event_id
            if pending.kind == "fork":
                cut = pending.at_event_id
            if pending.target_session_id is None:
                parent = header.parent
                if (
                    parent is None
                    or parent.session_id != pending.source_session_id
                    or (parent.at_event_id != cut)
                ):
                    raise service_error(
                        "MVU_SEED_TARGET_INVALID", "the session is not the seed's fork target", 409
                    )
            elif header.parent is not None or await self._has_turns(session_id):
                raise service_error(
                    "MVU_SEED_TARGET_INVALID", "a root target must be a new session", 409
                )
            identity = InstanceIdentity(pending.template_id, session_id, header.created_at)
            try:
                ledger, record = await off_loop(
                    mvu_ledger.install_seed, doc.ledger, pending.seed, identity, now=self._clock()
                )
            except MvuError as exc:
                raise ledger_error(exc) from None
            if ledger is not doc.ledger:
                source_state = pending.seed.source_id
                inherited = [
                    (r, a)
                    for r, a in doc.coordinates.get(source_state, [])
                    if r <= pending.seed.revision
                ]
                boundary = header.seed_length
                session = doc.sessions.get(session_id) or SessionRecord(
                    created_at=header.created_at,
                    scanned_through=boundary if header.parent is not None else last_seq,
                    seed_length=boundary,
                )
                if record.id not in session.state_ids:
                    session = msgspec.structs.replace(
                        session, state_ids=[*session.state_ids, record.id]
                    )
                new = self._with(
                    doc,
                    ledger=ledger,
                    coordinates={
                        **doc.coordinates,
                        record.id: [*inherited, (record.revision, boundary)],
                    },
                    sessions={**doc.sessions, session_id: session},
                    pending_seeds={
                        **doc.pending_seeds,
                        # Installed: keep the ticket's identity, drop the frozen copy.
                        ticket: msgspec.structs.replace(
                            pending,
                            installed_in=session_id,
                            seed=msgspec.structs.replace(pending.seed, content={}, history=[]),
                        ),
                    },
                )
                self._check_lease(lease, header.created_at)
                try:
                    await self._commit(new)
                except LedgerError as exc:
                    raise ledger_error(exc) from None
            scope = Scope(session_id, None, None)
            return self._record_json(record, scope, content=record.content)
