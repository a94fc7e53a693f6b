"""Discovery and configuration: ``discover`` (a card's template or a host-defined resource
granted to a session) and ``validateConfig`` (docs/contract/mvu.md#identity).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from innkeeper_tavern.pure.mvu.ledger import LedgerError
from innkeeper_tavern.state.session_bindings.lifecycle import pending_selection

from .common import (
    RESOURCE_TYPE,
    RETRIEVE_CHAIN,
    RETRIEVE_TRIGGER,
    STORE_CHAIN,
    STORE_TRIGGER,
    ledger_error,
    service_error,
)
from .core import ServiceCore
from .store import TemplateRecord
from .templates import Template, explicit_template, parse_explicit


class MvuDiscovery(ServiceCore):
    """Discovery and configuration of :class:`~.service.MvuService`."""

    def validate_config(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """Check a ``type:'mvu-state'`` configuration (docs/contract/mvu.md#host-service)."""
        errors: list[str] = []
        if config.get("type") != RESOURCE_TYPE:
            errors.append("type must be 'mvu-state'")
        unknown = set(config) - {"type", "store", "retrieve"}
        errors.extend(f"unknown field {key!r}" for key in sorted(unknown))
        for part, trigger, chain in (
            ("store", STORE_TRIGGER, STORE_CHAIN),
            ("retrieve", RETRIEVE_TRIGGER, RETRIEVE_CHAIN),
        ):
            value = config.get(part)
            if value is None:
                continue
            if not isinstance(value, Mapping):
                errors.append(f"{part} must be an object")
                continue
            extra = set(value) - {"trigger", "strategy"}
            errors.extend(f"{part}: unsupported parameter {key!r}" for key in sorted(extra))
            if value.get("trigger", trigger) != trigger:
                errors.append(f"{part}.trigger must be {trigger!r}")
            strategy = value.get("strategy", list(chain))
            if not isinstance(strategy, list):
                errors.append(f"{part}.strategy must be an array")
                continue
            names: list[Any] = []
            for step in strategy:
                if isinstance(step, Mapping):
                    if set(step) != {"operation"}:
                        errors.append(f"{part}.strategy: only {{operation}} entries")
                    names.append(step.get("operation"))
                else:
                    names.append(step)
            if names and tuple(names) != chain:
                errors.append(f"{part}.strategy must be {list(chain)}")
        return {"ok": not errors, "errors": errors}

    async def discover(
        self, *, definition: Mapping[str, Any], session_id: str | None = None
    ) -> dict[str, Any] | None:
        """Trusted discovery (docs/contract/mvu.md#host-service): a stable template identity with a
        native default, and an explicit session grant.

        * ``{characterId}``: the card's template (``None`` without MVU data). A card applies to
          the sessions that bind it; ``granted`` says whether ``session_id`` does.
        * ``{id, initial | characterId, managementMode?, sharing?}``: a host-defined template
          (the shape of a configured ``mvu.resources[]`` entry). ``session_id`` grants it to
          that session (persisted); without one it grants nothing. A configured id is refused.
        """
        if "id" in definition:
            return await self._discover_definition(definition, session_id)
        character_id = definition.get("characterId")
        if not isinstance(character_id, str) or not character_id:
            raise service_error(
                "MVU_DEFINITION_INVALID", "discover takes {characterId} or {id, ...}"
            )
        template = await self._template(character_id)
        if template is None:
            return None
        stored = await self._store_template(template)
        out: dict[str, Any] = {
            "id": template.id,
            "characterId": character_id,
            "versionKey": template.version_key,
            "storedManagementMode": stored.management_mode,
            "managementMode": self._actual_mode(),
            "sourceError": template.source_error,
        }
        if session_id is not None:
            selection = await pending_selection(self._selections, session_id, self._sessions())
            out["sessionId"] = session_id
            out["granted"] = selection.character_card_id == character_id
        return out

    async def _store_template(self, template: Template) -> TemplateRecord:
        async with self._lock:
            doc = self._doc
            stored = doc.templates.get(template.id)
            if stored is None:
                stored = TemplateRecord(
                    id=template.id,
                    character_id=template.character_id,
                    version_key=template.version_key,
                    discovered_at=self._clock(),
                    management_mode=template.management_mode,
                )
                try:
                    await self._commit(
                        self._with(doc, templates={**doc.templates, template.id: stored})
                    )
                except LedgerError as exc:
                    raise ledger_error(exc) from None
            return stored

    async def _discover_definition(
        self, definition: Mapping[str, Any], session_id: str | None
    ) -> dict[str, Any]:
        raw = dict(definition)
        if "sessionIds" in raw:
            raise service_error(
                "MVU_DEFINITION_INVALID", "grants come from sessionId, not sessionIds"
            )
        resource_id = raw.get("id")
        if any(r.id == resource_id for r in self._explicit):
            raise service_error("MVU_ID_EXISTS", "that id is configured by the host", 409)
        if session_id is not None:
            await self._header(session_id)
        async with self._lock:
            doc = self._doc
            previous = doc.discovered.get(str(resource_id))
            granted = list(previous.get("sessionIds", [])) if previous is not None else []
            if (
                previous is not None
                and {k: v for k, v in previous.items() if k != "sessionIds"} != raw
            ):
                raise service_error(
                    "MVU_DEFINITION_CONFLICT", "that id has another definition", 409
                )
            if session_id is not None and session_id not in granted:
                granted.append(session_id)
            try:
                (resource,) = parse_explicit(
                    {"resources": [{**raw, "sessionIds": granted or ["-"]}]}
                )
            except ValueError as exc:
                raise service_error("MVU_DEFINITION_INVALID", str(exc)) from None
            stored = {**raw, "sessionIds": granted}
            if previous != stored:
                try:
                    await self._commit(
                        self._with(doc, discovered={**doc.discovered, resource.id: stored})
                    )
                except LedgerError as exc:
                    raise ledger_error(exc) from None
        card = await self._template(resource.character_id) if resource.character_id else None
        template = explicit_template(resource, card)
        record = await self._store_template(template)
        out: dict[str, Any] = {
            "id": template.id,
            "characterId": template.character_id,
            "versionKey": template.version_key,
            "storedManagementMode": record.management_mode,
            "managementMode": self._actual_mode(),
            "sourceError": template.source_error,
            "sessionIds": granted,
        }
        if session_id is not None:
            out["sessionId"] = session_id
            out["granted"] = True
        return out
