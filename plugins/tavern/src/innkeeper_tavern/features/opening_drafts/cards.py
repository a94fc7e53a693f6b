"""Card variable bindings and writes (`docs/contract/mvu-cards.md#card-variables` and
`docs/contract/mvu-cards.md#empty-session`): ``POST /v1/mvu/card-binding``, ``/card-write`` and
``/card-binding/revoke``.

A binding ties one live rendering grant to one verified scope — a playthrough's empty-session
opening (``mode:'initial'``, checked like the initial snapshot, with the exact current
``selectionToken`` when the scope names a greeting) — and captures a lease: the session's
selection generation and the catalog/timeline mutation tokens. A write checks the capability,
the grant (synchronously, right before the commit), the lease and the session, then commits
through the MVU service's CAS (``expectedRevision``) and ``operationId`` idempotency. An
identical replay answers the first receipt; reusing an ``operationId`` for another write is
refused.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from innkeeper_hostapi import HttpProblem
from innkeeper_hostapi.mvu import MvuServiceError
from innkeeper_hostapi.sessions import AssistantMessage
from innkeeper_tavern.features.mvu_service import MvuService
from innkeeper_tavern.features.mvu_service.common import event_after
from innkeeper_tavern.features.play import Play
from innkeeper_tavern.features.play.leases import Lease, file_key
from innkeeper_tavern.features.play.playthroughs import CATALOG_PATH
from innkeeper_tavern.pure.mvu import apply_greeting

from .grants import RenderingAuthority, object_body
from .snapshots import OpeningSnapshots

CARD_BINDING_INVALID: Final = "CARD_BINDING_INVALID"
CARD_BINDING_DENIED: Final = "CARD_BINDING_DENIED"
CARD_BINDING_CONFLICT: Final = "CARD_BINDING_CONFLICT"
CARD_BINDING_NOT_FOUND: Final = "CARD_BINDING_NOT_FOUND"
CARD_BINDING_STALE: Final = "CARD_BINDING_STALE"
CARD_WRITE_INVALID: Final = "CARD_WRITE_INVALID"
CARD_OPERATION_CONFLICT: Final = "CARD_OPERATION_CONFLICT"
CARD_MESSAGE_READ_ONLY: Final = "CARD_MESSAGE_READ_ONLY"
#: Live card bindings at once (the next is refused).
MAX_BINDINGS: Final = 256
#: Receipts remembered per binding for ``operationId`` replay.
MAX_RECEIPTS: Final = 1024
CAUSES: Final = frozenset({"user-interaction", "interval", "script"})
_BIND_KEYS: Final = frozenset({"scope", "grantId", "sourceIdentity", "bindingId"})
_WRITE_KEYS: Final = frozenset(
    {"capability", "operation", "value", "expectedRevision", "operationId", "cause"}
)


def _bad(message: str, code: str = CARD_BINDING_INVALID) -> HttpProblem:
    return HttpProblem(400, code, message)


@dataclass(slots=True)
class Binding:
    """One live card binding."""

    #: A timeline head message's binding (else an empty-session opening's).
    message: bool
    binding_id: str
    capability: str
    grant_id: str
    fingerprint: str
    scope: dict[str, Any]
    session_id: str
    resource_id: str
    generation: int
    lease: Lease
    #: The session's last event seq when bound: any new event (a title or model change, a
    #: turn) expires the binding, even when it is changed back.
    last_seq: int
    receipts: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)


def _fingerprint(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


class CardBindings:
    """The live card bindings of this plugin instance (cleared on unload)."""

    def __init__(
        self,
        play: Play,
        mvu: MvuService,
        authority: RenderingAuthority,
        snapshots: OpeningSnapshots,
    ) -> None:
        self.play = play
        self.mvu = mvu
        self.authority = authority
        self.snapshots = snapshots
        self._bindings: dict[str, Binding] = {}
        self._by_capability: dict[str, str] = {}
        self._lock = asyncio.Lock()

    def close(self) -> None:
        """Unload: every capability is removed."""
        self._bindings.clear()
        self._by_capability.clear()

    # -- bind --------------------------------------------------------------------------------
    async def bind(self, request: object) -> dict[str, Any]:
        """``POST /mvu/card-binding``."""
        body = object_body(request, _BIND_KEYS, CARD_BINDING_INVALID)
        scope = body.get("scope")
        message = isinstance(scope, dict) and "mode" not in scope and "nodeId" in scope
        if not isinstance(scope, dict) or not (message or scope.get("mode") == "initial"):
            raise _bad(
                "card bindings take an empty-session opening scope {mode:'initial', …} or the "
                "active timeline head's message scope {playthroughId, sessionId, nodeId, "
                "variantId, endEventId}"
            )
        if (
            not message
            and "greetingIndex" in scope
            and not isinstance(scope.get("selectionToken"), str)
        ):
            raise _bad("an indexed initial scope must carry its observed selectionToken")
        grant_id = body.get("grantId")
        resolved = self.authority.resolve(grant_id, body.get("sourceIdentity"))
        if resolved is None:
            raise HttpProblem(403, CARD_BINDING_DENIED, "no live execution binding matches")
        assert isinstance(grant_id, str)
        binding_id = body.get("bindingId")
        if binding_id is not None and (
            not isinstance(binding_id, str) or not binding_id or len(binding_id) > 200
        ):
            raise _bad("bindingId must be a non-empty string of at most 200 chars")
        fingerprint = _fingerprint([scope, grant_id, body.get("sourceIdentity")])
        async with self._lock:
            if binding_id is not None and binding_id in self._bindings:
                known = self._bindings[binding_id]
                if known.fingerprint != fingerprint:
                    raise HttpProblem(409, CARD_BINDING_CONFLICT, "bindingId names another binding")
                if self._current(known):
                    return self._answer(known)
                self._drop(known)
            if len(self._bindings) >= MAX_BINDINGS:
                raise HttpProblem(409, CARD_BINDING_CONFLICT, "too many live card bindings")
            try:
                if message:
                    view = await self.mvu.snapshot(scope)
                else:
                    view = await self.snapshots.snapshot(scope)
            except MvuServiceError as exc:
                raise HttpProblem(exc.status, exc.code, exc.message) from None
            session_id = str(scope["sessionId"])
            item = await self.play.playthroughs.find(scope["playthroughId"])
            inspection = await self.play.sessions.inspect(session_id)
            if message:
                await self._writable_message(scope, inspection.turn_open)
            lease = self.play.workspace.leases.capture_read_lease(
                [file_key(CATALOG_PATH), file_key(item.row["path"])]
            )
            binding = Binding(
                message=message,
                binding_id=binding_id or "binding-" + secrets.token_hex(16),
                capability="cap-" + secrets.token_hex(24),
                grant_id=grant_id,
                fingerprint=fingerprint,
                scope=dict(scope),
                session_id=session_id,
                resource_id=view["resourceId"],
                generation=self.play.sessions.selections.generation(session_id),
                lease=lease,
                last_seq=inspection.last_seq,
            )
            self._bindings[binding.binding_id] = binding
            self._by_capability[binding.capability] = binding.binding_id
            return self._answer(binding, view)

    async def _writable_message(self, scope: Mapping[str, Any], running: bool) -> None:
        """A message scope binds only the active timeline head's message of an idle session
        whose latest reply it is (historic and running messages stay
        read-only: docs/contract/mvu-cards.md#card-variables): ``409 CARD_MESSAGE_READ_ONLY``."""
        try:
            coordinates = await self.snapshots.message_membership(scope)
        except MvuServiceError as exc:
            raise HttpProblem(exc.status, exc.code, exc.message) from None
        if not coordinates.head:
            raise HttpProblem(
                409, CARD_MESSAGE_READ_ONLY, "only the active timeline head's message is writable"
            )
        if running:
            raise HttpProblem(409, CARD_MESSAGE_READ_ONLY, "the session is running a turn")
        session_id = str(scope["sessionId"])
        controller = self.play.sessions.controller()
        if await event_after(controller, session_id, int(scope["endEventId"]), AssistantMessage):
            raise HttpProblem(
                409, CARD_MESSAGE_READ_ONLY, "a later reply of the session is the current one"
            )

    @staticmethod
    def _answer(binding: Binding, view: Mapping[str, Any] | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "ok": True,
            "bindingId": binding.binding_id,
            "capability": binding.capability,
            "resourceId": binding.resource_id,
        }
        if view is not None:
            out["revision"] = view["revision"]
            if "currentRevision" in view:
                out["currentRevision"] = view["currentRevision"]
            if "viewIdentity" in view:
                out["viewIdentity"] = view["viewIdentity"]
        return out

    def _drop(self, binding: Binding) -> None:
        self._bindings.pop(binding.binding_id, None)
        self._by_capability.pop(binding.capability, None)

    def _current(self, binding: Binding) -> bool:
        """Synchronous checks: grant live, selection and catalog/timeline unchanged."""
        return (
            self.authority.is_current(binding.grant_id)
            and self.play.sessions.selections.generation(binding.session_id) == binding.generation
            and self.play.workspace.leases.valid(binding.lease)
        )

    # -- revoke ------------------------------------------------------------------------------
    async def revoke(self, body: object) -> dict[str, Any]:
        """``POST /mvu/card-binding/revoke`` ``{bindingId}`` or ``{capability}`` (idempotent)."""
        if not isinstance(body, dict) or not body or set(body) - {"bindingId", "capability"}:
            raise _bad("pass {bindingId} or {capability}")
        async with self._lock:
            bid = body.get("bindingId")
            cap = body.get("capability")
            binding = self._bindings.get(bid) if isinstance(bid, str) else None
            if binding is None and isinstance(cap, str):
                found = self._by_capability.get(cap)
                binding = self._bindings.get(found) if found else None
            if binding is not None:
                self._drop(binding)
        return {"ok": True, "revoked": binding is not None}

    # -- write -------------------------------------------------------------------------------
    async def write(self, request: object) -> dict[str, Any]:
        """``POST /mvu/card-write``."""
        body = object_body(request, _WRITE_KEYS, CARD_WRITE_INVALID)
        operation = body.get("operation")
        value = body.get("value")
        if operation == "replace":
            if not isinstance(value, dict) or not isinstance(value.get("stat_data"), dict):
                raise _bad("replace takes a whole variables object", CARD_WRITE_INVALID)
        elif operation == "patch":
            if not isinstance(value, list) or not value:
                raise _bad("patch takes a non-empty JSON patch array", CARD_WRITE_INVALID)
        else:
            raise _bad("operation must be 'patch' or 'replace'", CARD_WRITE_INVALID)
        expected = body.get("expectedRevision")
        if isinstance(expected, bool) or not isinstance(expected, int) or expected < 1:
            raise _bad("expectedRevision must be a positive integer", CARD_WRITE_INVALID)
        operation_id = body.get("operationId")
        if not isinstance(operation_id, str) or not operation_id or len(operation_id) > 200:
            raise _bad("operationId must be a non-empty string", CARD_WRITE_INVALID)
        if body.get("cause") not in CAUSES:
            raise _bad(f"cause must be one of {sorted(CAUSES)}", CARD_WRITE_INVALID)
        cap = body.get("capability")
        found = self._by_capability.get(cap) if isinstance(cap, str) else None
        binding = self._bindings.get(found) if found else None
        if binding is None:
            raise HttpProblem(404, CARD_BINDING_NOT_FOUND, "no live card binding has it")
        request = _fingerprint([operation, value, expected])
        replay = binding.receipts.get(operation_id)
        if replay is not None:
            if replay[0] != request:
                raise HttpProblem(
                    409, CARD_OPERATION_CONFLICT, "operationId was used for another write"
                )
            return {**replay[1], "replayed": True}
        if not self._current(binding):
            self._drop(binding)
            raise HttpProblem(409, CARD_BINDING_STALE, "the binding is no longer current")
        inspection = await self.play.sessions.inspect(binding.session_id)
        if inspection.last_seq != binding.last_seq or inspection.turn_open:
            self._drop(binding)
            raise HttpProblem(409, CARD_BINDING_STALE, "the session changed since the binding")
        scope = {"authority": "local", "sessionId": binding.session_id}
        try:
            if isinstance(value, dict):
                content = dict(value)
            else:
                content = await self._patched(value, scope)
            if not self._current(binding):  # the final synchronous check before the commit
                self._drop(binding)
                raise HttpProblem(409, CARD_BINDING_STALE, "the binding is no longer current")
            result = await self.mvu.update(
                id=binding.resource_id,
                content=content,
                expected_revision=expected,
                operation_id=f"card:{binding.binding_id}:{operation_id}",
                scope=scope,
                card_write=(
                    {"cause": body["cause"], "endEventId": binding.scope["endEventId"]}
                    if binding.message
                    else {"initial": True, "cause": body["cause"]}
                ),
            )
        except MvuServiceError as exc:
            raise HttpProblem(exc.status, exc.code, exc.message) from None
        receipt = {"ok": True, "receipt": result["receipt"], "replayed": False}
        binding.receipts[operation_id] = (request, receipt)
        while len(binding.receipts) > MAX_RECEIPTS:
            binding.receipts.pop(next(iter(binding.receipts)))
        return receipt

    async def _patched(self, patch: list[Any], scope: dict[str, Any]) -> dict[str, Any]:
        """The current variables with the JSON patch applied (the MVU ``<JSONPatch>`` rules)."""
        view = await self.mvu.opening_view(scope["sessionId"], first_checkpoint=False)
        text = "<JSONPatch>" + json.dumps(patch) + "</JSONPatch>"
        result = await asyncio.to_thread(apply_greeting, view["variables"], text, mathjs=True)
        if result.fatal is not None:
            raise _bad(result.fatal.message, CARD_WRITE_INVALID)
        if not isinstance(result.variables, dict):
            raise _bad("the patch did not produce variables", CARD_WRITE_INVALID)
        return result.variables
