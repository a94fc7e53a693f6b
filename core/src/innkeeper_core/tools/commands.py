"""The slash-command registry (implements :class:`innkeeper_hostapi.slash.CommandService`)."""

from __future__ import annotations

import asyncio
import builtins
import logging
import re
from dataclasses import dataclass
from typing import Final

from innkeeper_core.tools.registry import bounded
from innkeeper_hostapi import PluginContext, Registration, RegistrationConflict
from innkeeper_hostapi.slash import (
    COMMAND_NAME_PATTERN,
    COMMAND_TIMEOUT_S,
    MAX_COMMAND_ANSWER_CHARS,
    CommandAnswer,
    CommandHandler,
    CommandInfo,
    CommandInvocation,
)

__all__ = ["CommandEntry", "CommandRegistry", "parse_command"]

log = logging.getLogger("innkeeper.commands")
_NAME: Final = re.compile(COMMAND_NAME_PATTERN)
_WORD: Final = re.compile(r"^/([a-z][a-z0-9_-]{0,31})(?:\s+(.*))?$", re.DOTALL)
#: Longest hint or description kept.
MAX_COMMAND_DESCRIPTION_CHARS: Final = 512


def parse_command(text: str) -> tuple[str, str] | None:
    """``(name, args)`` when ``text`` starts with ``/name``; else ``None``."""
    match = _WORD.match(text.strip())
    if match is None:
        return None
    return match.group(1), (match.group(2) or "").strip()


@dataclass(frozen=True, slots=True, eq=False)
class CommandEntry:
    name: str
    owner: str
    description: str
    hint: str | None
    handler: CommandHandler


class CommandRegistry:
    """Name → command."""

    def __init__(self) -> None:
        self._commands: dict[str, CommandEntry] = {}

    def add(
        self,
        owner: str,
        name: str,
        description: str,
        handler: CommandHandler,
        hint: str | None = None,
    ) -> CommandEntry:
        if not _NAME.match(name):
            raise ValueError(f"command name {name!r} must match {COMMAND_NAME_PATTERN}")
        existing = self._commands.get(name)
        if existing is not None:
            raise RegistrationConflict("command", name, existing.owner, owner)
        if len(description) > MAX_COMMAND_DESCRIPTION_CHARS or len(hint or "") > 64:
            raise ValueError(f"command {name!r}: description or hint is too long")
        entry = CommandEntry(name, owner, description, hint, handler)
        self._commands[name] = entry
        return entry

    def remove(self, entry: CommandEntry) -> None:
        if self._commands.get(entry.name) is entry:
            del self._commands[entry.name]

    def get(self, name: str) -> CommandEntry | None:
        return self._commands.get(name)

    # -- CommandService ----------------------------------------------------------------------
    def register(
        self,
        ctx: PluginContext,
        name: str,
        description: str,
        handler: CommandHandler,
        *,
        hint: str | None = None,
    ) -> Registration:
        entry = self.add(ctx.plugin_id, name, description, handler, hint)
        return ctx.on_dispose(lambda: self.remove(entry))

    def list(self) -> tuple[CommandInfo, ...]:
        return tuple(
            CommandInfo(e.name, e.owner, e.description, e.hint)
            for _, e in sorted(self._commands.items())
        )

    async def run(self, entry: CommandEntry, invocation: CommandInvocation) -> CommandAnswer:
        """Run a command under :data:`COMMAND_TIMEOUT_S`; failures become error answers."""
        try:
            result = await asyncio.wait_for(entry.handler(invocation), COMMAND_TIMEOUT_S)
        except TimeoutError:
            return CommandAnswer(entry.name, "error", "the command did not answer in time")
        except Exception as exc:
            log.warning("command /%s of %s failed: %s", entry.name, entry.owner, type(exc).__name__)
            return CommandAnswer(entry.name, "error", f"the command failed ({type(exc).__name__})")
        if isinstance(result, CommandAnswer):
            return CommandAnswer(
                entry.name, result.kind, bounded(result.text, MAX_COMMAND_ANSWER_CHARS)
            )
        return CommandAnswer(entry.name, "success", bounded(result or "", MAX_COMMAND_ANSWER_CHARS))

    # -- snapshots ---------------------------------------------------------------------------
    def snapshot(self) -> frozenset[tuple[str, str]]:
        return frozenset((e.name, e.owner) for e in self._commands.values())

    def owned_by(self, owner: str) -> builtins.list[str]:
        return [e.name for e in self._commands.values() if e.owner == owner]
