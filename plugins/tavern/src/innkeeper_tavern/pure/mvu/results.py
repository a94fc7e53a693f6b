"""What applying commands produces: the diagnostics, the applied changes and the result.

Shared by the native engine (:mod:`.engine`) and the schema DSL (:mod:`.dsl.engine`), which both
build them; neither imports the other for these.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from .extract import Command
from .jsvalue import Json
from .limits import MvuFatalError

__all__ = ["Change", "Diagnostic", "Severity", "UpdateResult"]

Severity = Literal["error", "warning"]


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """Why a command (or part of the text) was not applied. Never fatal by itself."""

    code: str
    message: str
    command: int | None = None
    full_match: str | None = None
    severity: Severity = "error"


@dataclass(frozen=True, slots=True)
class Change:
    """One applied write (MVU's ``mag_variable_updated``).

    ``path`` is MVU's reported path (the container for inserts and removals by argument);
    ``pointer`` is the exact JSON pointer written; ``old``/``new`` are the values there
    (:data:`UNDEFINED` for a key that did not exist / was removed).
    """

    command: int
    kind: str
    path: str
    pointer: str
    old: Json
    new: Json
    event: bool = True
    """False for writes MVU performs without a ``mag_variable_updated`` event."""


@dataclass(slots=True)
class UpdateResult:
    """The outcome of one reply.

    ``variables`` is the new variables object when ``fatal`` is ``None``, otherwise the input
    unchanged. ``modified`` is true when ``stat_data`` differs from the input.
    """

    variables: dict[str, Json]
    modified: bool
    commands: list[Command]
    diagnostics: list[Diagnostic] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)
    fatal: MvuFatalError | None = None
    steps: int = 0
    state_bytes: int = 0

    @property
    def committed(self) -> bool:
        """True when the result may be persisted (no fatal error)."""
        return self.fatal is None
