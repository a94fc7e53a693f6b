"""Extracting a reply's commands for a command processor, and checking what it returns.

docs/contract/mvu-vm.md#command-view: a processor sees the command view
``{type, args, full_match, reason}`` in original order and may only *filter* the original
commands or *recover* one offered block (a single strict JSON Patch that only lacks its value
separator, or a single ``<UpdateVariable>`` holding a bare JSON Patch array) with exactly the
views the host derived; new writes, changed values, reordering, unknown syntax and unsafe paths
are refused.

The host derives the recoverable blocks itself (:func:`prepare`) and offers their exact commands
to the processor; the processor recovers a block by returning (some of) those commands. Output
is checked by :func:`select`, which maps every returned view back to the engine's own
:class:`~innkeeper_tavern.pure.mvu.Command` objects, so nothing a processor writes is parsed again.
Paths, schema and the atomic apply are then checked by the engine as for any reply.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from innkeeper_hostapi.mvu import MvuCommandView, MvuRecoverable, RecoveryKind
from innkeeper_tavern.pure.mvu import (
    Budget,
    Command,
    ExtractIssue,
    MvuSyntaxError,
    extract_commands,
)
from innkeeper_tavern.pure.mvu.limits import MAX_STEPS_PER_REPLY

#: JSON Patch blocks, spelled as the engine reads them (docs/mvu.md "JSON Patch").
_PATCH_BLOCK: Final = re.compile(
    r"<(json_?patch)>((?:(?!<\1>).)*?)</\1>", re.IGNORECASE | re.DOTALL
)
_ENVELOPE: Final = re.compile(r"<UpdateVariable>(.*?)</UpdateVariable>", re.IGNORECASE | re.DOTALL)
_FENCE: Final = re.compile(r"^\s*```[^\n]*\n|\n?\s*```\s*$")
#: Characters of one block considered for recovery (the engine's command budget bounds it too).
MAX_RECOVERY_CHARS: Final = 64 * 1024


class ProcessorOutputRejected(Exception):
    """The processor returned something other than a filter or an offered recovery."""

    code = "MVU_PROCESSOR_OUTPUT_REJECTED"


@dataclass(slots=True)
class Recovery:
    """One recoverable block: the offered view and the engine commands behind it."""

    offer: MvuRecoverable
    commands: list[Command]


@dataclass(slots=True)
class Prepared:
    """A reply split for a processor: original commands, broken blocks and recoveries."""

    commands: list[Command]
    issues: list[ExtractIssue]
    broken: list[tuple[int, int]] = field(default_factory=list)
    recoveries: list[Recovery] = field(default_factory=list)

    def views(self) -> tuple[MvuCommandView, ...]:
        """The original commands' views, in order."""
        return tuple(view_of(c) for c in self.commands)


def view_of(command: Command) -> MvuCommandView:
    """The plain view of an engine command."""
    return MvuCommandView(command.type, tuple(command.args), command.full_match, command.reason)


def _strict_repair(body: str) -> str | None:
    """Insert the one missing ``,`` that makes ``body`` strict JSON; ``None`` otherwise."""
    try:
        json.loads(body)
    except json.JSONDecodeError as exc:
        if exc.msg != "Expecting ',' delimiter":
            return None
        fixed = body[: exc.pos] + "," + body[exc.pos :]
    else:
        return None
    try:
        json.loads(fixed)
    except json.JSONDecodeError:
        return None
    return fixed


def _patch_commands(body: str, position: int) -> list[Command] | None:
    try:
        commands = extract_commands(f"<JSONPatch>{body}</JSONPatch>")
    except MvuSyntaxError:
        return None
    for command in commands:
        command.position = position
    return commands or None


def _offer(kind: RecoveryKind, block: str, commands: list[Command]) -> Recovery:
    views = tuple(view_of(c) for c in commands)
    return Recovery(MvuRecoverable(kind, block, views, 0), commands)


def prepare(text: str) -> Prepared:
    """Extract ``text``'s commands, setting malformed JSON Patch blocks aside.

    Raises what :func:`extract_commands` raises for the rest of the text (budgets are fatal
    whatever a processor does). Broken blocks stay fatal unless the processor recovers them.
    """
    broken: list[tuple[int, int]] = []
    recoveries: list[Recovery] = []
    masked = text
    for match in _PATCH_BLOCK.finditer(text):
        try:
            extract_commands(match.group(0))
        except MvuSyntaxError:
            broken.append((match.start(), match.end()))
            body = _FENCE.sub("", match.group(2))
            if len(body) <= MAX_RECOVERY_CHARS:
                repaired = _strict_repair(body)
                commands = _patch_commands(repaired, match.start()) if repaired else None
                if commands:
                    recoveries.append(_offer("json-patch-separator", match.group(0), commands))
            # Blank the block (same length keeps every other command's position).
            masked = (
                masked[: match.start()]
                + " " * (match.end() - match.start())
                + masked[match.end() :]
            )
    for match in _ENVELOPE.finditer(masked):
        body = _FENCE.sub("", match.group(1)).strip()
        if not body.startswith("[") or len(body) > MAX_RECOVERY_CHARS:
            continue
        try:
            json.loads(body)
        except json.JSONDecodeError:
            continue
        commands = _patch_commands(body, match.start())
        if commands:
            recoveries.append(_offer("update-variable-array", match.group(0), commands))
    issues: list[ExtractIssue] = []
    budget = Budget(MAX_STEPS_PER_REPLY)
    commands = extract_commands(masked, budget, issues)
    for recovery in recoveries:
        start = recovery.commands[0].position
        index = sum(1 for c in commands if c.position < start)
        recovery.offer = MvuRecoverable(
            recovery.offer.kind, recovery.offer.block, recovery.offer.commands, index
        )
    return Prepared(commands, issues, broken, recoveries)


def _is_view_sequence(value: object) -> bool:
    return isinstance(value, (list, tuple))


def select(prepared: Prepared, output: Sequence[MvuCommandView] | None) -> list[Command]:
    """Map a processor's output back to engine commands, or raise
    :class:`ProcessorOutputRejected`.

    Accepted: an order-preserving subsequence of the original commands, merged with (some of)
    the commands of at most one offered recovery, at their textual positions. A broken block
    that is not recovered keeps the reply fatal (:class:`MvuSyntaxError`).
    """
    if output is None:
        chosen: list[Command] = list(prepared.commands)
        recovered: Recovery | None = None
    else:
        if not _is_view_sequence(output):
            raise ProcessorOutputRejected("a processor must return a sequence of command views")
        chosen = []
        recovered = None
        originals = list(prepared.commands)
        index = 0
        used_in_recovery = 0
        for item in output:
            if not isinstance(item, MvuCommandView):
                raise ProcessorOutputRejected("a processor returned something that is not a view")
            match_index = next(
                (i for i in range(index, len(originals)) if view_of(originals[i]) == item), None
            )
            if match_index is not None:
                chosen.append(originals[match_index])
                index = match_index + 1
                continue
            candidates = [recovered] if recovered is not None else prepared.recoveries
            found = None
            for recovery in candidates:
                assert recovery is not None
                rest = recovery.commands[used_in_recovery if recovery is recovered else 0 :]
                hit = next((c for c in rest if view_of(c) == item), None)
                if hit is not None:
                    found = (recovery, hit)
                    break
            if found is None:
                raise ProcessorOutputRejected(
                    "a processor may only filter the parsed commands or recover an offered block"
                )
            recovered = found[0]
            used_in_recovery = recovered.commands.index(found[1]) + 1
            chosen.append(found[1])
        positions = [c.position for c in chosen]
        if positions != sorted(positions):
            raise ProcessorOutputRejected("a processor may not reorder commands")
    remaining = [
        span
        for span in prepared.broken
        if recovered is None
        or recovered.offer.kind != "json-patch-separator"
        or recovered.commands[0].position != span[0]
    ]
    if remaining:
        raise MvuSyntaxError(f"JSON Patch block at offset {remaining[0][0]} is not valid JSON/YAML")
    return chosen


__all__ = ["Prepared", "ProcessorOutputRejected", "Recovery", "prepare", "select", "view_of"]
