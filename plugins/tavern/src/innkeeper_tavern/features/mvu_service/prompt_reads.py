"""Prompt reads: ``resolvePromptDependency`` and ``getManagementDefaults``, each with a
synchronous ``checkCurrent`` lease (docs/contract/mvu.md#prompt-reads).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .common import (
    RESOURCE_TYPE,
    RETRIEVE_CHAIN,
    RETRIEVE_TRIGGER,
    STORE_CHAIN,
    STORE_TRIGGER,
    detached,
    parse_scope,
    service_error,
)
from .core import ServiceCore


class MvuPromptReads(ServiceCore):
    """Prompt reads of :class:`~.service.MvuService`."""

    async def resolve_prompt_dependency(
        self,
        *,
        scope: Mapping[str, Any],
        event: Mapping[str, Any],
        id: str | None = None,
    ) -> dict[str, Any] | None:
        """Whole variables for prompt use (docs/contract/mvu.md#prompt-reads).

        ``event.turn`` reads that turn's durable pre-turn checkpoint (frozen now if this is the
        first read of the turn). Every registered usage handler must allow the read, or the
        result is ``None``. ``checkCurrent()`` is synchronous and turns false when the state
        revision, any registration, the session's selection or the card/linked-book files
        change, the service unloads, or — for a play session — a catalog or timeline is
        written or the workspace changes (:attr:`~.core.ServiceCore.context_lease`).
        """
        parsed = parse_scope(scope, require_session=True)
        if parsed.historical:
            raise service_error("MVU_SCOPE_INVALID", "prompt reads take a current scope")
        if not isinstance(event, Mapping):
            raise service_error("MVU_SCOPE_INVALID", "event must be an object")
        session_id = parsed.session_id
        assert session_id is not None
        turn = event.get("turn")
        if turn is not None and (isinstance(turn, bool) or not isinstance(turn, int)):
            raise service_error("MVU_SCOPE_INVALID", "event.turn must be an integer")
        play_current = (
            await self.context_lease(session_id) if self.context_lease is not None else None
        )
        async with self._lock:
            active = await self._ensure_instance(session_id)
        state_id = id if id is not None else active
        if state_id is None or state_id not in self._doc.ledger.states:
            return None
        record = await self._authorize(state_id, parsed)
        for handler, _provider in list(self._usage.values()):
            decision = await handler(
                {
                    "id": state_id,
                    "trigger": RETRIEVE_TRIGGER,
                    "scope": dict(scope),
                    "event": {k: v for k, v in event.items() if k != "text"},
                }
            )
            if decision is None or decision.get("enabled") is not True:
                return None
        content: dict[str, Any] = record.content
        revision = record.revision
        if turn is not None and state_id == active:
            checkpoint = await self.checkpoint(session_id, turn)
            if checkpoint is not None:
                revision = int(checkpoint["revision"])
                entry = self._content_at(self._doc.ledger, state_id, revision)
                if entry is None:
                    return None
                content = entry.content
        own = self._read_lease(state_id, session_id)

        def check_current() -> bool:
            return own() and (play_current is None or play_current())

        return {
            "id": state_id,
            "adapterId": "tavern.mvu",
            "content": detached(content),
            "revision": revision,
            "configRevision": None,
            "checkCurrent": check_current,
        }

    def get_management_defaults(
        self, *, id: str, scope: Mapping[str, Any] | None = None
    ) -> dict[str, Any] | None:
        """Source defaults for a manager (docs/contract/mvu.md#management-defaults);
        ``checkCurrent`` expires like a prompt read's (:meth:`~.core.ServiceCore._read_lease`) and,
        for a state of a play session, also on any catalog or timeline write and on a workspace
        change (:attr:`~.core.ServiceCore.context_lease_now`)."""
        parse_scope(scope)
        record = self._doc.ledger.states.get(id)
        if record is None:
            return None
        revision = record.revision
        owner = record.instance.session_id if record.instance is not None else None
        play_current = (
            self.context_lease_now(owner)
            if owner is not None and self.context_lease_now is not None
            else None
        )
        own = self._read_lease(id, owner)

        def check_current() -> bool:
            return own() and (play_current is None or play_current())

        return {
            "protocolVersion": 1,
            "revision": revision,
            "configuration": {
                "type": RESOURCE_TYPE,
                "store": {"trigger": STORE_TRIGGER, "strategy": list(STORE_CHAIN)},
                "retrieve": {"trigger": RETRIEVE_TRIGGER, "strategy": list(RETRIEVE_CHAIN)},
            },
            "scopePolicy": "source-bound",
            "checkCurrent": check_current,
        }
