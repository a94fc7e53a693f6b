"""Commands under a schema declaration (placeholder until the interpreter lands)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from innkeeper_tavern.mvu.jsvalue import Json
from innkeeper_tavern.mvu.limits import Budget, MvuFatalError

if TYPE_CHECKING:
    from innkeeper_tavern.mvu.engine import Diagnostic, UpdateResult
    from innkeeper_tavern.mvu.extract import Command


def apply_dsl_commands(
    variables: Mapping[str, Json],
    commands: Sequence[Command],
    *,
    budget: Budget,
    diagnostics: list[Diagnostic],
) -> UpdateResult:
    """Apply ``commands`` under the declared schema of ``variables``."""
    from innkeeper_tavern.mvu.engine import UpdateResult

    return UpdateResult(
        variables=dict(variables),
        modified=False,
        commands=list(commands),
        diagnostics=diagnostics,
        fatal=MvuFatalError("schema declarations are not supported yet", code="MVU_SCHEMA"),
        steps=budget.used,
    )
