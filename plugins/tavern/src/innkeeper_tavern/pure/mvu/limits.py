"""Budgets and errors of the pure MVU engine.

Every limit is a named constant citing where it comes from. ``docs/contract/mvu.md#budgets`` fixes
the 2 MiB budget of one complete variables object and says that the structural limits apply to it;
it also splits failures into *rejections* (a diagnostic, later commands still run) and *fatal*
errors (interpreter budgets, invalid syntax: nothing of the reply commits). The structural numbers
are the Tavern-wide ones of ``docs/contract/world-info.md#structure-guard``
(``innkeeper_tavern.pure.formats.guards``), so a state that passes here also passes an import.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import msgspec

from innkeeper_tavern.pure.formats import guards
from innkeeper_tavern.pure.formats.guards import (
    StructureLimitError,
    StructureLimits,
    check_structure,
)

#: UTF-8 bytes of one complete variables object as compact JSON (docs/contract/mvu.md#budgets).
MAX_STATE_BYTES: Final = 2 * 1024 * 1024
#: Nesting depth of a state (docs/contract/mvu.md#budgets, structural limits; the
#: number is docs/contract/world-info.md#structure-guard).
MAX_STATE_DEPTH: Final = guards.MAX_DEPTH
#: Containers plus scalars in one variables object. The contract names no number for a state;
#: the Tavern-wide 100,000 of docs/contract/world-info.md#structure-guard bounds one document,
#: and MVU's generated ``schema`` mirrors ``stat_data`` with about two nodes per data node, so
#: the whole object may hold 2.5 times that. The 2 MiB byte budget still binds first for most
#: shapes.
MAX_STATE_NODES: Final = guards.MAX_NODES * 5 // 2
#: Characters of one object key in a state (same sources as :data:`MAX_STATE_DEPTH`).
MAX_KEY_CHARS: Final = guards.MAX_KEY_CHARS

#: Characters of reply text scanned for commands. A reply is a message body, which the state
#: budget bounds as well (docs/contract/mvu.md#budgets); longer text is fatal.
MAX_REPLY_CHARS: Final = MAX_STATE_BYTES
#: Commands taken from one reply (docs/contract/mvu.md#commands:
#: interpreter budgets are fatal). Generous for real cards (tens of commands per reply).
MAX_COMMANDS_PER_REPLY: Final = 2_000
#: Characters of one `[initvar]` entry, YAML/JSON5 document or command argument parsed as data
#: (bounded YAML/JSON5: docs/contract/mvu-dsl.md#compatibility).
MAX_DOCUMENT_CHARS: Final = MAX_STATE_BYTES
#: Characters of one YAML document (an `[initvar]` entry or a JSON Patch body written as YAML).
#: YAML is parsed by a pure-Python parser at roughly 100 KB/s, so it gets a tighter bound than
#: JSON/JSON5 (bounded YAML/JSON5: docs/contract/mvu-dsl.md#compatibility); real
#: `[initvar]` entries are a few KB to a few tens of KB.
MAX_YAML_CHARS: Final = 512 * 1024
#: Characters of one command argument still tried as YAML; a longer bare argument is text
#: (docs/mvu.md#command-values, the last step) without a YAML attempt.
MAX_YAML_VALUE_CHARS: Final = 64 * 1024
#: Characters of one argument handed to the arithmetic evaluator
#: (pure expressions have static syntax and execution budgets:
#: docs/contract/mvu-dsl.md#compatibility).
MAX_EXPRESSION_CHARS: Final = 4_096
#: Nesting depth of an expression, a JS object literal or a YAML/JSON5 document while parsing.
MAX_PARSE_DEPTH: Final = MAX_STATE_DEPTH
#: Abstract computation steps for one reply: parsing, evaluating, walking and copying all charge
#: this meter, regex construction and matching included (docs/contract/mvu-dsl.md#declarations,
#: docs/contract/mvu-dsl.md#regex).
MAX_STEPS_PER_REPLY: Final = 20_000_000


class MvuError(Exception):
    """Base class of engine errors. ``code`` is a stable machine-readable name."""

    code: str = "MVU_ERROR"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message


class MvuFatalError(MvuError):
    """A fatal error: the whole reply (or initialization) commits nothing."""

    code = "MVU_FATAL"


class MvuBudgetError(MvuFatalError):
    """A computation, size or structure budget was exceeded."""

    code = "MVU_BUDGET_EXCEEDED"


class MvuSyntaxError(MvuFatalError):
    """Text that must be parsed (an update block, an `[initvar]` entry, a schema) is invalid."""

    code = "MVU_SYNTAX"


class Budget:
    """A monotonically consumed computation meter shared by one reply or one initialization."""

    __slots__ = ("limit", "used")

    def __init__(self, limit: int = MAX_STEPS_PER_REPLY) -> None:
        self.limit = limit
        self.used = 0

    def charge(self, steps: int = 1) -> None:
        """Consume ``steps``; raise :class:`MvuBudgetError` once the limit is passed."""
        self.used += steps
        if self.used > self.limit:
            raise MvuBudgetError(f"computation budget of {self.limit} steps exceeded")


#: Structure limits of one variables object (docs/contract/mvu.md#commands).
STATE_LIMITS: Final = StructureLimits(
    max_depth=MAX_STATE_DEPTH,
    max_nodes=MAX_STATE_NODES,
    max_string_bytes=MAX_STATE_BYTES,
    max_key_chars=MAX_KEY_CHARS,
)

_ENCODER: Final = msgspec.json.Encoder()


def state_bytes(variables: Mapping[str, Any]) -> int:
    """The compact JSON size of a variables object; :class:`MvuBudgetError` (fatal) when it is
    not JSON or over :data:`MAX_STATE_BYTES`."""
    try:
        size = len(_ENCODER.encode(variables))
    except (TypeError, ValueError, OverflowError) as exc:
        raise MvuBudgetError(f"state is not JSON: {exc}", code="MVU_NOT_JSON") from exc
    if size > MAX_STATE_BYTES:
        raise MvuBudgetError(
            f"state is {size} bytes; at most {MAX_STATE_BYTES} are allowed",
            code="MVU_STATE_TOO_LARGE",
        )
    return size


def check_variables(variables: Mapping[str, Any]) -> int:
    """Enforce the per-state budgets on a whole variables object; returns its JSON size.

    The structure limits apply to every member except the derived ``schema`` (whose depth and
    size follow from ``stat_data``); the byte budget applies to the whole object. Raises
    :class:`MvuBudgetError` (fatal) on a violation.
    """
    for key, value in variables.items():
        if key == "schema":
            continue
        try:
            check_structure(value, STATE_LIMITS)
        except StructureLimitError as exc:
            raise MvuBudgetError(f"{key} breaks a structure limit: {exc}", code=exc.code) from exc
    return state_bytes(variables)
