"""The ``template`` adapter of ``tavernMemorySources``: session templates
(`docs/contract/catalogs.md#bound-resources`: the template a session's configuration was
applied from).

A session template is a named selection projection
(:mod:`innkeeper_tavern.state.session_templates`). It is bound to a session when that session's
configuration was applied from it and still is: the
apply is recorded in :mod:`innkeeper_tavern.state.session_templates.bindings`, and the binding holds
while the
session's resources are the ones that apply wrote and the template exists. Items never carry
content; ``read`` (global management) adds the template's selection projection.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, Final

import msgspec

from innkeeper_tavern.state.session_bindings.model import Selection
from innkeeper_tavern.state.session_templates.bindings import bound_template
from innkeeper_tavern.state.session_templates.configuration import SessionConfigurations
from innkeeper_tavern.state.session_templates.model import Template, selection_to_wire

from .memory import Items

TEMPLATE_ADAPTER: Final = "template"
TEMPLATE_TYPE: Final = "session-template"

__all__ = ["TEMPLATE_ADAPTER", "TEMPLATE_TYPE", "TemplateSource"]


def _revision(template: Template) -> str:
    return hashlib.sha256(msgspec.json.encode(template)).hexdigest()[:32]


def _item(template: Template, binding: dict[str, Any] | None = None) -> dict[str, Any]:
    item: dict[str, Any] = {
        "id": template.id,
        "adapterId": TEMPLATE_ADAPTER,
        "name": template.name,
        "type": TEMPLATE_TYPE,
        "revision": _revision(template),
        "managementMode": "native",
    }
    if binding is not None:
        item["binding"] = binding
    return item


class TemplateSource:
    """Session templates as a memory source, read through the template service at call time
    (none while the template feature is absent)."""

    adapter_id: Final = TEMPLATE_ADAPTER

    def __init__(self, configurations: Callable[[], SessionConfigurations | None]) -> None:
        self._configurations = configurations

    async def list(self) -> Items:
        """Every template, metadata only, oldest first."""
        found = self._configurations()
        return [_item(t) for t in found.templates.templates()] if found is not None else []

    async def read(self, resource_id: str) -> dict[str, Any] | None:
        """One template with its selection projection as ``content``; ``None`` if absent."""
        found = self._configurations()
        template = found.templates.find(resource_id) if found is not None else None
        if template is None:
            return None
        content = {"name": template.name, "selection": selection_to_wire(template.selection)}
        return {**_item(template), "content": content}

    async def bound_items(self, session_id: str, selection: Selection) -> Items:
        """The template the session's current configuration was applied from (at most one)."""
        found = self._configurations()
        if found is None or found.bindings is None:
            return []
        binding = found.bindings.get(session_id)
        template = bound_template(binding, selection, found.templates.find)
        if template is None or binding is None:
            return []
        origin = {"sessionId": session_id, "origins": ["applied"], "appliedAt": binding.applied_at}
        return [_item(template, origin)]

    def version(self, session_id: str) -> Any:
        """What the session's bound template is read from: its binding record and the bound
        template's revision (a lease compares it; the selection is compared by the caller)."""
        found = self._configurations()
        if found is None or found.bindings is None:
            return None
        binding = found.bindings.get(session_id)
        if binding is None:
            return None
        template = found.templates.find(binding.template_id)
        return [binding.template_id, binding.applied_at, template and _revision(template)]
