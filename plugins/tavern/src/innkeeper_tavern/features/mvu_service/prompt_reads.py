"""Prompt reads: ``resolvePromptDependency`` and ``getManagementDefaults``, each with a
synchronous ``checkCurrent`` lease (docs/contract/mvu.md#prompt-reads).

``resolvePromptDependency`` serves two callers only, named by ``event.usage`` and
``event.consumer`` (docs/mvu.md "Prompt reads"): ``prompt-template-dependency`` for the
``tavern.prompt-templates`` consumer whose id is the template bound to the session, and
``world-book-variable`` for the ``tavern.world-books`` consumer whose id is a world book bound to
it. The consumer is checked against what the session really has bound, so code cannot pick a
resource, a scope or a consumer; anything else is ``MVU_SCOPE_INVALID`` and never a lease. The
Tavern's own ``tavern.mvu/state`` request source reads through
:meth:`MvuPromptReads.resolve_request_source_state`, whose consumer is fixed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from .common import (
    RESOURCE_TYPE,
    RETRIEVE_CHAIN,
    RETRIEVE_TRIGGER,
    STORE_CHAIN,
    STORE_TRIGGER,
    Scope,
    detached,
    parse_scope,
    service_error,
)
from .core import ServiceCore

#: docs/contract/mvu.md#prompt-reads and docs/contract/mvu.md#variables-in-lore:
#: each usage and the one consumer adapter that may ask for it.
PROMPT_USAGES: Final[Mapping[str, str]] = {
    "prompt-template-dependency": "tavern.prompt-templates",
    "world-book-variable": "tavern.world-books",
}
#: The usage and consumer of the Tavern's own request source (fixed by the service).
REQUEST_SOURCE_USAGE: Final = "request-source"
REQUEST_SOURCE_CONSUMER: Final = "tavern.mvu/state"
#: Longest consumer id accepted (a resource id).
MAX_CONSUMER_ID_CHARS: Final = 200


def _consumer(event: Mapping[str, Any]) -> tuple[str, str, str]:
    """``(usage, adapterId, id)`` of a well-formed prompt-dependency event, else
    ``MVU_SCOPE_INVALID``."""
    usage = event.get("usage")
    if not isinstance(usage, str) or usage not in PROMPT_USAGES:
        raise service_error(
            "MVU_SCOPE_INVALID",
            "event.usage must be 'prompt-template-dependency' or 'world-book-variable'",
        )
    consumer = event.get("consumer")
    if not isinstance(consumer, Mapping) or set(consumer) != {"adapterId", "id"}:
        raise service_error("MVU_SCOPE_INVALID", "event.consumer must be {adapterId, id}")
    adapter_id, consumer_id = consumer["adapterId"], consumer["id"]
    if adapter_id != PROMPT_USAGES[usage]:
        raise service_error(
            "MVU_SCOPE_INVALID", f"usage {usage!r} is for the {PROMPT_USAGES[usage]} consumer"
        )
    if not isinstance(consumer_id, str) or not 0 < len(consumer_id) <= MAX_CONSUMER_ID_CHARS:
        raise service_error("MVU_SCOPE_INVALID", "event.consumer.id must be a resource id")
    return usage, adapter_id, consumer_id


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

        ``event.usage`` and ``event.consumer`` must name one of :data:`PROMPT_USAGES` and a
        resource of that consumer actually bound to the session (:attr:`~.core.ServiceCore.
        consumer_bound`); otherwise ``MVU_SCOPE_INVALID`` is raised before anything is read.
        ``event.turn`` reads that turn's durable pre-turn checkpoint (frozen now if this is the
        first read of the turn). Every registered usage handler must allow the read, or the
        result is ``None``. ``checkCurrent()`` is synchronous and turns false when the state
        revision, any registration, the session's selection or the card/linked-book files
        change, the service unloads, or — for a play session — a catalog or timeline is
        written or the workspace changes (:attr:`~.core.ServiceCore.context_lease`).
        """
        parsed = self._prompt_scope(scope, event)
        session_id = parsed.session_id
        assert session_id is not None
        _, adapter_id, consumer_id = _consumer(event)
        attest = self.consumer_bound
        if attest is None or not await attest(session_id, adapter_id, consumer_id):
            raise service_error(
                "MVU_SCOPE_INVALID",
                f"event.consumer is not a {adapter_id} resource bound to this session",
            )
        return await self._prompt_read(parsed, scope, event, id)

    async def resolve_request_source_state(
        self,
        *,
        scope: Mapping[str, Any],
        event: Mapping[str, Any],
        id: str | None = None,
    ) -> dict[str, Any] | None:
        """:meth:`resolve_prompt_dependency` for the Tavern's own ``tavern.mvu/state`` request
        source: the same read, checks and lease, with usage and consumer set here (any the
        caller gives are replaced), so usage handlers see what asks."""
        parsed = self._prompt_scope(scope, event)
        fixed = {
            **{k: v for k, v in event.items() if k not in ("usage", "consumer")},
            "usage": REQUEST_SOURCE_USAGE,
            "consumer": {"adapterId": REQUEST_SOURCE_CONSUMER, "id": REQUEST_SOURCE_CONSUMER},
        }
        return await self._prompt_read(parsed, scope, fixed, id)

    @staticmethod
    def _prompt_scope(scope: Mapping[str, Any], event: Mapping[str, Any]) -> Scope:
        parsed = parse_scope(scope, require_session=True)
        if parsed.historical:
            raise service_error("MVU_SCOPE_INVALID", "prompt reads take a current scope")
        if not isinstance(event, Mapping):
            raise service_error("MVU_SCOPE_INVALID", "event must be an object")
        return parsed

    async def _prompt_read(
        self,
        parsed: Scope,
        scope: Mapping[str, Any],
        event: Mapping[str, Any],
        id: str | None,
    ) -> dict[str, Any] | None:
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
