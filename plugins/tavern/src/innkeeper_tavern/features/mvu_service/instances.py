"""Instances and ledger edits: a session's instance allocated on first use (its own, a
configured shared one, or a fork's seeded one), and the CAS edits ``update``, ``copy`` and
``setManagementMode`` (docs/contract/mvu.md#host-service).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import msgspec

from innkeeper_tavern.pure.mvu import MvuError, check_variables, initialize_with_schema
from innkeeper_tavern.pure.mvu import ledger as mvu_ledger
from innkeeper_tavern.pure.mvu.ledger import (
    CURRENT_VALUE_INTERPRETER,
    HistoryEntry,
    InstanceIdentity,
    LedgerError,
    StateRecord,
)

from .common import (
    Scope,
    check_operation_id,
    is_int,
    is_resource_id,
    is_variables,
    json_sha256,
    ledger_error,
    off_loop,
    parse_scope,
    service_error,
)
from .core import ServiceCore
from .store import KeptOpening, ModeReceipt, SessionOpening, SessionRecord, TemplateRecord
from .templates import Template, opening


def edited_candidate(current: Mapping[str, Any], content: dict[str, Any]) -> dict[str, Any]:
    """Edited variables as the source schema accepts them (transformed once).

    "source schema cannot be removed/replaced": the current ``mvu_schema`` descriptor and the
    generated native ``schema`` are kept; a different one is refused.
    """
    if not is_variables(content):
        raise service_error("MVU_CONTENT_INVALID", "content must be a variables object")
    out = dict(content)
    for key in ("mvu_schema", "schema"):
        if key in current:
            if key in out and out[key] != current[key]:
                raise service_error("MVU_SCHEMA_OWNED", f"{key} belongs to the source; keep it")
            out[key] = current[key]
        elif key in out and key == "mvu_schema":
            raise service_error("MVU_SCHEMA_OWNED", "a schema cannot be added by an edit")
    descriptor = out.get("mvu_schema")
    try:
        if isinstance(descriptor, dict):
            validated = initialize_with_schema(out["stat_data"], descriptor)
            out["stat_data"] = validated["stat_data"]
        check_variables(out)
    except MvuError as exc:
        raise service_error(exc.code, exc.message) from None
    return out


class MvuInstances(ServiceCore):
    """Instances and ledger edits of :class:`~.service.MvuService`."""

    async def _ensure_shared(
        self, template: Template, session_id: str, created_at: str, last_seq: int
    ) -> str:
        """The shared state of a configured ``sharing:'shared'`` resource (lock held)."""
        doc = self._doc
        state_id = template.id
        session = doc.sessions.get(session_id) or SessionRecord(
            created_at=created_at, scanned_through=last_seq
        )
        if state_id in doc.ledger.states and state_id in session.state_ids:
            return state_id
        if template.initial is None:
            raise service_error(
                "MVU_SOURCE_ERROR", template.source_error or "template unavailable", 409
            )
        ledger = doc.ledger
        templates = doc.templates
        if state_id not in ledger.states:
            now = self._clock()
            body = dict(template.initial)
            digest = json_sha256(body)
            record = StateRecord(
                id=state_id,
                template_id=template.id,
                instance=None,
                content=body,
                content_sha256=digest,
                revision=1,
                created_at=now,
                updated_at=now,
                management_mode="native",
                interpreter_version=CURRENT_VALUE_INTERPRETER,
            )
            entry = HistoryEntry(1, now, "initial", body, digest, None, None)
            ledger = msgspec.structs.replace(
                ledger,
                states={**ledger.states, state_id: record},
                history={**ledger.history, state_id: [entry]},
            )
            templates = {
                **templates,
                template.id: TemplateRecord(
                    id=template.id,
                    character_id=template.character_id,
                    version_key=template.version_key,
                    discovered_at=now,
                    management_mode=template.management_mode,
                ),
            }
        session = msgspec.structs.replace(session, state_ids=[*session.state_ids, state_id])
        await self._commit(
            self._with(
                doc,
                ledger=ledger,
                templates=templates,
                sessions={**doc.sessions, session_id: session},
            )
        )
        return state_id

    async def _ensure_instance(self, session_id: str) -> str | None:
        """The session's active instance, allocated on first use (lock held)."""
        header, last_seq, _ = await self._header(session_id)
        if header.delegation_depth > 0:
            return None
        template, greeting_index = await self._session_template(session_id)
        if template is None:
            return None
        if template.shared:
            return await self._ensure_shared(template, session_id, header.created_at, last_seq)
        doc = self._doc
        identity = InstanceIdentity(template.id, session_id, header.created_at)
        state_id = mvu_ledger.instance_id(identity)
        session = doc.sessions.get(session_id)
        if state_id in doc.ledger.states and session is not None and state_id in session.state_ids:
            await self._follow_greeting(template, state_id, session_id, greeting_index)
            return state_id
        if session is not None and session.created_at != header.created_at:
            raise service_error("MVU_SESSION_IDENTITY_CHANGED", "the session identity changed", 409)
        if session is not None and session.blocked:
            raise service_error("MVU_SEED_PENDING", session.blocked, 409)
        if any(
            p.target_session_id == session_id and p.installed_in is None
            for p in doc.pending_seeds.values()
        ):
            raise service_error("MVU_SEED_PENDING", "a captured seed awaits installation here", 409)
        if template.initial is None:
            raise service_error(
                "MVU_SOURCE_ERROR", template.source_error or "template unavailable", 409
            )
        now = self._clock()
        ledger = doc.ledger
        coordinates = dict(doc.coordinates)
        parent = header.parent
        opening_index: int | None = None
        if state_id in ledger.states:
            pass  # allocated for this session before (selection switched back)
        elif parent is not None and header.seed_length > 0:
            ledger, coords = await self._seed_from_parent(
                template, identity, parent.session_id, parent.at_event_id, now
            )
            coordinates[state_id] = coords
        else:
            started = await self._has_turns(session_id)
            try:
                override = self._opening_overrides.get(session_id)
                content = (
                    template.initial
                    if started or parent is not None
                    else await asyncio.to_thread(opening, template, greeting_index)
                )
                if override is not None and not started and parent is None:
                    # A draft's selected opening (its player edits included) is the start.
                    content = await asyncio.to_thread(edited_candidate, content, override)
                ledger, _ = await off_loop(
                    mvu_ledger.create_instance, ledger, identity, content, now=now
                )
            except MvuError as exc:
                raise service_error(exc.code, exc.message, 409) from None
            coordinates[state_id] = [(1, last_seq if started else 0)]
            if not started and parent is None:
                opening_index = greeting_index
        if session is None:
            # Replies before the instance existed are never replayed into it, except a fork's
            # own replies when its state is seeded before any of its turns ended.
            boundary = header.seed_length
            fresh_fork = parent is not None and not await self._has_turns(session_id, boundary)
            session = SessionRecord(
                created_at=header.created_at,
                scanned_through=boundary if fresh_fork else last_seq,
                seed_length=boundary,
            )
        session = msgspec.structs.replace(session, state_ids=[*session.state_ids, state_id])
        if opening_index is not None:
            opening_of = SessionOpening(state_id=state_id, greeting_index=opening_index)
            session = msgspec.structs.replace(session, opening=opening_of)
        templates = dict(doc.templates)
        if template.id not in templates:
            templates[template.id] = TemplateRecord(
                id=template.id,
                character_id=template.character_id,
                version_key=template.version_key,
                discovered_at=now,
                management_mode=template.management_mode,
            )
        new = self._with(
            doc,
            ledger=ledger,
            coordinates=coordinates,
            sessions={**doc.sessions, session_id: session},
            templates=templates,
        )
        await self._commit(new)
        await self._record_fact(
            {
                "id": state_id,
                "phase": "completed",
                "sessionId": session_id,
                "detail": "instance-created",
            }
        )
        return state_id

    async def _follow_greeting(
        self, template: Template, state_id: str, session_id: str, greeting_index: int
    ) -> None:
        """Before the first turn, a greeting switch restores that greeting's opening
        (docs/contract/mvu-cards.md#opening-snapshot): the current content (edits included) is kept
        as the old greeting's, and the new greeting's kept opening — or, never seen or made from
        another card version, a freshly generated one — becomes the current content, as a new
        revision (so leases and CAS see the switch). Once a turn started or a checkpoint was frozen,
        nothing changes: started playthroughs are never re-initialized. Lock held."""
        doc = self._doc
        session = doc.sessions[session_id]
        current = session.opening
        if current is None or current.state_id != state_id:
            return
        if current.greeting_index == greeting_index:
            return
        if doc.checkpoints.get(session_id) or await self._has_turns(session_id):
            await self._commit(
                self._with(
                    doc,
                    sessions={
                        **doc.sessions,
                        session_id: msgspec.structs.replace(session, opening=None),
                    },
                )
            )
            return
        record = doc.ledger.states[state_id]
        kept = dict(current.kept)
        kept[str(current.greeting_index)] = KeptOpening(
            revision=record.revision, version_key=template.version_key
        )
        target = kept.pop(str(greeting_index), None)
        entry = None
        if target is not None and target.version_key == template.version_key:
            entry = self._content_at(doc.ledger, state_id, target.revision)
        try:
            content = (
                entry.content
                if entry is not None
                else await asyncio.to_thread(opening, template, greeting_index)
            )
            ledger, receipt = await off_loop(
                mvu_ledger.update,
                doc.ledger,
                state_id,
                content,
                expected_revision=record.revision,
                operation_id=f"greeting:{record.revision}:{greeting_index}",
                now=self._clock(),
                kind="initial",
                source={"sessionId": session_id, "initial": True, "greetingIndex": greeting_index},
            )
        except MvuError as exc:
            raise service_error(exc.code, exc.message, 409) from None
        coordinates = doc.coordinates
        if receipt.changed:
            coordinates = {
                **coordinates,
                state_id: [*coordinates.get(state_id, []), (receipt.revision, 0)],
            }
        opened = SessionOpening(state_id=state_id, greeting_index=greeting_index, kept=kept)
        await self._commit(
            self._with(
                doc,
                ledger=ledger,
                coordinates=coordinates,
                sessions={
                    **doc.sessions,
                    session_id: msgspec.structs.replace(session, opening=opened),
                },
            )
        )

    async def _allocate_for(self, state_id: str, scope: Scope) -> None:
        """An edit or copy is a real use: the scope's session gets its instance now (reads
        only showed it, see ``_read_view``); an edit of an opening before the first turn
        follows the selected greeting first, as the read did (:meth:`_follow_greeting`).
        Lock held."""
        if scope.session_id is None:
            return
        session = self._doc.sessions.get(scope.session_id)
        opening_of = session.opening if session is not None else None
        if state_id not in self._doc.ledger.states or (
            opening_of is not None and opening_of.state_id == state_id
        ):
            await self._ensure_instance(scope.session_id)

    async def update(
        self,
        *,
        id: str,
        content: Mapping[str, Any],
        expected_revision: int,
        operation_id: str,
        scope: Mapping[str, Any],
        card_write: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """CAS edit of the current content (docs/contract/mvu.md#host-service).

        ``card_write`` (a card execution's write,
        :mod:`innkeeper_tavern.features.opening_drafts.cards`) is merged into the ledger entry's
        ``source`` (``initial``, ``cause``) and turns the
        ``applied`` fact into a ``card_variable_update`` one with ``configRevision: null``."""
        parsed = parse_scope(scope)
        self._legacy_refusal(id)
        if parsed.historical:
            raise service_error(
                "MVU_HISTORICAL_READ_ONLY", "historical scopes cannot be edited", 409
            )
        if not is_variables(content):
            raise service_error(
                "MVU_CONTENT_INVALID", "content must be a variables object with stat_data"
            )
        if not is_int(expected_revision):
            raise service_error("MVU_CONTENT_INVALID", "expectedRevision must be an integer")
        check_operation_id(operation_id)
        agents = self._agents()
        if parsed.session_id and agents is not None and agents.is_running(parsed.session_id):
            raise service_error("MVU_TURN_RUNNING", "the session is running a turn", 409)
        lease = await self._lease(parsed.session_id) if parsed.session_id else None
        async with self._lock:
            await self._allocate_for(id, parsed)
            record = await self._authorize(id, parsed)
            owner = self._session_of(self._doc, id)
            if owner is not None and agents is not None and agents.is_running(owner):
                raise service_error("MVU_TURN_RUNNING", "the session is running a turn", 409)
            if owner is not None and lease is None:
                lease = await self._lease(owner)  # a state of a session named by its id only
            candidate = await asyncio.to_thread(edited_candidate, record.content, dict(content))
            doc = self._doc
            try:
                ledger, receipt = await off_loop(
                    mvu_ledger.update,
                    doc.ledger,
                    id,
                    candidate,
                    expected_revision=expected_revision,
                    operation_id=operation_id,
                    now=self._clock(),
                    kind="edit",
                    source=({"sessionId": parsed.session_id} if parsed.session_id else {})
                    | dict(card_write or {})
                    or None,
                )
            except MvuError as exc:
                raise ledger_error(exc) from None
            if ledger is not doc.ledger:
                coordinates = doc.coordinates
                if receipt.changed:
                    at = 0
                    if owner is not None:
                        _, at, _ = await self._header(owner)
                    coordinates = {
                        **coordinates,
                        id: [*coordinates.get(id, []), (receipt.revision, at)],
                    }
                if lease is not None:
                    self._check_lease(
                        lease, record.instance.session_created_at if record.instance else None
                    )
                try:
                    await self._commit(self._with(doc, ledger=ledger, coordinates=coordinates))
                except LedgerError as exc:
                    raise ledger_error(exc) from None
                if receipt.changed:
                    fact = {
                        "id": id,
                        "phase": "applied",
                        "detail": "state-committed",
                        "revision": receipt.revision,
                        "turnKind": "edit",
                    }
                    if card_write is not None:
                        fact.update(turnKind="card_variable_update", configRevision=None)
                    if parsed.session_id:
                        fact["sessionId"] = parsed.session_id
                    await self._record_fact(fact)
            current = self._doc.ledger.states[id]
            return {
                "receipt": {
                    "operationId": receipt.operation_id,
                    "id": id,
                    "revisionBefore": receipt.revision_before,
                    "revision": receipt.revision,
                    "changed": receipt.changed,
                    "at": receipt.at,
                },
                "resource": self._record_json(current, parsed, content=current.content),
            }

    async def install_opening(self, *, session_id: str, content: Mapping[str, Any]) -> str | None:
        """Start a fresh session's instance from a draft's selected opening
        (docs/contract/mvu-cards.md#opening-snapshot: only the selected greeting's opening moves
        into the session, as its first pre-turn checkpoint). ``None`` when no template applies. A
        session that already has its instance or a turn is ``409``."""
        if not is_variables(content):
            raise service_error("MVU_CONTENT_INVALID", "content must be a variables object")
        lease = await self._lease(session_id, restore=False)
        async with self._lock:
            session = self._doc.sessions.get(session_id)
            if session is not None and session.state_ids:
                raise service_error(
                    "MVU_OPENING_INSTALLED", "the session already has its variables", 409
                )
            if await self._has_turns(session_id):
                raise service_error("MVU_OPENING_STARTED", "the session already has turns", 409)
            self._check_lease(lease)
            self._opening_overrides[session_id] = dict(content)
            try:
                return await self._ensure_instance(session_id)
            finally:
                self._opening_overrides.pop(session_id, None)

    async def copy(self, *, id: str, new_id: str, scope: Mapping[str, Any]) -> dict[str, Any]:
        """A new manual resource with the same content and access scope (``copy``,
        docs/contract/mvu.md#explicit-resources); existing ids are rejected."""
        parsed = parse_scope(scope)
        self._legacy_refusal(id)
        if not is_resource_id(new_id):
            raise service_error("MVU_ID_INVALID", "newId must be 1-200 characters")
        async with self._lock:
            await self._allocate_for(id, parsed)
            record = await self._authorize(id, parsed)
            doc = self._doc
            if new_id in doc.ledger.states or new_id in self._legacy or new_id in doc.templates:
                raise service_error("MVU_ID_EXISTS", "that id is taken", 409)
            now = self._clock()
            copied = StateRecord(
                id=new_id,
                template_id=record.template_id,
                instance=None,
                content=record.content,
                content_sha256=record.content_sha256,
                revision=1,
                created_at=now,
                updated_at=now,
                inherited_from={"id": id, "revision": record.revision, "copy": True},
                interpreter_version=record.interpreter_version,
            )
            entry = HistoryEntry(
                1,
                now,
                "initial",
                record.content,
                record.content_sha256,
                None,
                None,
                source={"copiedFrom": id, "revision": record.revision},
            )
            ledger = msgspec.structs.replace(
                doc.ledger,
                states={**doc.ledger.states, new_id: copied},
                history={**doc.ledger.history, new_id: [entry]},
            )
            owners = dict(doc.owners)
            owner = self._session_of(doc, id)
            if owner is not None:
                owners[new_id] = owner
            coordinates = {**doc.coordinates, new_id: [(1, 0)]}
            try:
                await self._commit(
                    self._with(doc, ledger=ledger, owners=owners, coordinates=coordinates)
                )
            except LedgerError as exc:
                raise ledger_error(exc) from None
            return self._record_json(copied, parsed, content=copied.content)

    async def set_management_mode(
        self,
        *,
        id: str,
        mode: str,
        expected_revision: int,
        operation_id: str,
        scope: Mapping[str, Any],
    ) -> dict[str, Any]:
        """Save the stored preference with CAS and idempotency (``setManagementMode``,
        docs/contract/mvu.md#management); actual ownership follows the manager registration."""
        parsed = parse_scope(scope)
        self._legacy_refusal(id)
        if mode not in ("native", "managed"):
            raise service_error("MVU_MODE_INVALID", "mode must be native or managed")
        check_operation_id(operation_id)
        async with self._lock:
            record = await self._authorize(id, parsed)
            doc = self._doc
            request = json_sha256(["mode", id, mode, expected_revision])
            previous = doc.mode_receipts.get(id, {}).get(operation_id)
            if previous is not None:
                if previous.request_sha256 != request:
                    raise service_error("MVU_OPERATION_CONFLICT", "operationId reused", 409)
                receipt = previous
            else:
                if expected_revision != record.revision:
                    raise service_error(
                        "MVU_REVISION_CONFLICT",
                        f"expected revision {expected_revision}, current is {record.revision}",
                        409,
                    )
                receipt = ModeReceipt(
                    request_sha256=request,
                    state_id=id,
                    mode=mode,
                    revision=record.revision,
                    at=self._clock(),
                )
                receipts = {
                    **doc.mode_receipts,
                    id: {**doc.mode_receipts.get(id, {}), operation_id: receipt},
                }
                try:
                    await self._commit(
                        self._with(
                            doc,
                            stored_modes={**doc.stored_modes, id: mode},
                            mode_receipts=receipts,
                        )
                    )
                except LedgerError as exc:
                    raise ledger_error(exc) from None
            return {
                "operationId": operation_id,
                "id": id,
                "revision": receipt.revision,
                "managementMode": self._actual_mode(),
                "storedManagementMode": receipt.mode,
            }
