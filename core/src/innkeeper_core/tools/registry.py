"""The tool registry: tools plugins add with ``ctx.add_tool``, and the guards they install.

Argument validation uses ``jsonschema`` (the reference implementation of JSON Schema for
Python: Draft 2020-12 and earlier, schemas checked against their meta-schema at registration,
and no remote ``$ref`` is ever fetched). One validator is built per tool at registration.
"""

from __future__ import annotations

import asyncio
import builtins
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import jsonschema
import jsonschema.exceptions
import jsonschema.validators

from innkeeper_core.agents.contributions import OrderedContributions
from innkeeper_hostapi import PluginContext, Registration, RegistrationConflict
from innkeeper_hostapi.tools import (
    MAX_TOOL_ARGUMENTS_BYTES,
    MAX_TOOL_DESCRIPTION_CHARS,
    MAX_TOOL_ERROR_CHARS,
    MAX_TOOL_SCHEMA_BYTES,
    MAX_TOOLS,
    SANDBOX_MODES,
    TOOL_NAME_PATTERN,
    ToolGuard,
    ToolHandler,
    ToolInfo,
    ToolRisk,
)

__all__ = ["ArgumentsInvalid", "ToolEntry", "ToolRegistry", "bounded"]

_NAME: Final = re.compile(TOOL_NAME_PATTERN)
#: Most validation errors listed in one refusal.
MAX_LISTED_ERRORS: Final = 5


class ArgumentsInvalid(Exception):
    """A call's arguments are not JSON, not an object, too large or fail the schema."""


def bounded(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, saying how much was cut."""
    if len(text) <= limit:
        return text
    note = f"\n[truncated: {len(text)} more characters]"  # the longest the count can be
    keep = max(0, limit - len(note))
    return text[:keep] + f"\n[truncated: {len(text) - keep} more characters]"


@dataclass(frozen=True, slots=True, eq=False)
class ToolEntry:
    """One registered tool. Removed by identity."""

    name: str
    owner: str
    description: str
    parameters: Mapping[str, Any]
    risk: ToolRisk
    handler: ToolHandler
    timeout_s: float | None
    validator: Any = field(repr=False)
    #: Calls of this tool running now (their handler tasks).
    running: set[asyncio.Task[Any]] = field(default_factory=set, repr=False)

    def info(self) -> ToolInfo:
        return ToolInfo(
            name=self.name,
            owner=self.owner,
            description=self.description,
            parameters=self.parameters,
            risk=self.risk,
        )

    def parse(self, arguments: str) -> dict[str, Any]:
        """Decode and validate a call's argument text (``""`` means ``{}``)."""
        if len(arguments.encode()) > MAX_TOOL_ARGUMENTS_BYTES:
            raise ArgumentsInvalid(f"arguments are larger than {MAX_TOOL_ARGUMENTS_BYTES} bytes")
        try:
            value = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            raise ArgumentsInvalid(f"arguments are not valid JSON: {exc.msg}") from None
        if not isinstance(value, dict):
            raise ArgumentsInvalid("arguments must be a JSON object")
        errors = sorted(self.validator.iter_errors(value), key=lambda e: list(e.absolute_path))
        if errors:
            listed = "; ".join(
                f"{'/'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message}"
                for e in errors[:MAX_LISTED_ERRORS]
            )
            more = (
                f" (+{len(errors) - MAX_LISTED_ERRORS} more)"
                if len(errors) > MAX_LISTED_ERRORS
                else ""
            )
            raise ArgumentsInvalid(
                bounded(f"arguments do not match the schema: {listed}{more}", MAX_TOOL_ERROR_CHARS)
            )
        return value


def _check_schema(name: str, parameters: Mapping[str, Any]) -> Any:
    try:
        encoded = json.dumps(parameters, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"tool {name!r}: parameters must be JSON ({exc})") from None
    if len(encoded.encode()) > MAX_TOOL_SCHEMA_BYTES:
        raise ValueError(f"tool {name!r}: parameters schema is over {MAX_TOOL_SCHEMA_BYTES} bytes")
    if parameters.get("type") != "object":
        raise ValueError(f"tool {name!r}: parameters must be an object schema (type: object)")
    cls = jsonschema.validators.validator_for(parameters, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(dict(parameters))
    except jsonschema.exceptions.SchemaError as exc:
        raise ValueError(f"tool {name!r}: invalid JSON Schema: {exc.message}") from None
    return cls(json.loads(encoded))


class ToolRegistry:
    """Name → tool, plus the ordered guards. Implements :class:`ToolService`."""

    def __init__(self) -> None:
        self._tools: dict[str, ToolEntry] = {}
        self.guards: OrderedContributions[ToolGuard] = OrderedContributions("tool guard")

    def add(
        self,
        owner: str,
        name: str,
        description: str,
        parameters: Mapping[str, Any],
        handler: ToolHandler,
        *,
        risk: ToolRisk,
        timeout_s: float | None,
    ) -> ToolEntry:
        """Register a tool; raises ``RegistrationConflict`` or ``ValueError``."""
        if not _NAME.match(name):
            raise ValueError(f"tool name {name!r} must match {TOOL_NAME_PATTERN}")
        existing = self._tools.get(name)
        if existing is not None:
            raise RegistrationConflict("tool", name, existing.owner, owner)
        if len(description) > MAX_TOOL_DESCRIPTION_CHARS:
            raise ValueError(
                f"tool {name!r}: description must be text of at most "
                f"{MAX_TOOL_DESCRIPTION_CHARS} characters"
            )
        if risk not in SANDBOX_MODES:
            raise ValueError(f"tool {name!r}: risk must be one of {', '.join(SANDBOX_MODES)}")
        if timeout_s is not None and not timeout_s > 0:
            raise ValueError(f"tool {name!r}: timeout_s must be positive")
        if len(self._tools) >= MAX_TOOLS:
            raise ValueError(f"at most {MAX_TOOLS} tools can be registered")
        validator = _check_schema(name, parameters)
        entry = ToolEntry(
            name=name,
            owner=owner,
            description=description,
            parameters=validator.schema,
            risk=risk,
            handler=handler,
            timeout_s=timeout_s,
            validator=validator,
        )
        self._tools[name] = entry
        return entry

    async def remove(self, entry: ToolEntry) -> None:
        """Unregister ``entry`` and interrupt its running calls (they record an interrupted
        result: a running call never outlives its plugin)."""
        if self._tools.get(entry.name) is entry:
            del self._tools[entry.name]
        running = tuple(entry.running)
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)

    def get(self, name: str) -> ToolEntry | None:
        return self._tools.get(name)

    def entries(self) -> tuple[ToolEntry, ...]:
        return tuple(self._tools[name] for name in sorted(self._tools))

    # -- ToolService -----------------------------------------------------------------------
    def list(self) -> tuple[ToolInfo, ...]:
        return tuple(entry.info() for entry in self.entries())

    def guard(self, ctx: PluginContext, name: str, order: int, guard: ToolGuard) -> Registration:
        return self.guards.add(ctx, name, order, guard)

    # -- snapshots -------------------------------------------------------------------------
    def snapshot(self) -> frozenset[tuple[str, str, str]]:
        tools = {("tool", e.name, e.owner) for e in self._tools.values()}
        guards = {("guard", c.name, c.owner) for c in self.guards.items}
        return frozenset(tools | guards)

    def owned_by(self, owner: str) -> builtins.list[str]:
        return [e.name for e in self._tools.values() if e.owner == owner] + [
            f"guard:{name}" for name in self.guards.owned_by(owner)
        ]
