"""MVU (MagVarUpdate-compatible) variable state — the pure engine.

Pure layer: no I/O, no host import (import-linter enforces it). The later ``tavernMvu``
service calls:

* :func:`load_initvar` / :func:`initialize_variables` — `[initvar]` world-book entries to a
  fresh variables object (native metadata), or :func:`initialize_with_schema` when the card
  declares a schema (:func:`descriptor_for` validates and records the declaration);
* :func:`apply_greeting` — a greeting's opening envelopes, all-or-nothing;
* :func:`apply_reply` — one assistant reply applied to a committed variables
  object, returning an :class:`UpdateResult` (new variables or the fatal reason, diagnostics,
  changes); :func:`extract_commands` + :func:`apply_commands` when a command processor filters
  the parsed commands in between;
* :func:`check_variables` — the per-state budgets for content written through other paths
  (manual edits, imports).

See ``docs/mvu.md`` for what card authors can rely on and the deliberate differences from MVU.
"""

from __future__ import annotations

from .dsl.engine import (
    CURRENT_INTERPRETER_VERSION,
    compile_declaration,
    descriptor_for,
    initialize_with_schema,
)
from .engine import (
    Change,
    Diagnostic,
    UpdateResult,
    apply_commands,
    apply_greeting,
    apply_reply,
    check_variables,
    with_display_data,
)
from .extract import Command, ExtractIssue, extract_commands
from .initvar import InitEntry, InitvarResult, initialize_variables, load_initvar
from .jsvalue import UNDEFINED
from .limits import (
    MAX_STATE_BYTES,
    Budget,
    MvuBudgetError,
    MvuError,
    MvuFatalError,
    MvuSyntaxError,
)

__all__ = [
    "CURRENT_INTERPRETER_VERSION",
    "MAX_STATE_BYTES",
    "UNDEFINED",
    "Budget",
    "Change",
    "Command",
    "Diagnostic",
    "ExtractIssue",
    "InitEntry",
    "InitvarResult",
    "MvuBudgetError",
    "MvuError",
    "MvuFatalError",
    "MvuSyntaxError",
    "UpdateResult",
    "apply_commands",
    "apply_greeting",
    "apply_reply",
    "check_variables",
    "compile_declaration",
    "descriptor_for",
    "extract_commands",
    "initialize_variables",
    "initialize_with_schema",
    "load_initvar",
    "with_display_data",
]
