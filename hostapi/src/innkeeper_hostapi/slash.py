"""Slash commands in user input (``/rp``, ``/rp off``, ``/roll 2d6``): answered by a plugin
without a model call.

``AGENTS.prompt`` looks at input first: text whose first word is ``/<name>`` of a registered
command runs that command instead of entering the inbox. Nothing is written to the session
for it (no user message, no command event: an empty session stays empty); the answer is the
prompt's response (``command``) and is published on the session's live stream as
``command/result``. Input that starts with ``/`` but names no registered command is ordinary
input.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal, Protocol

from .keys import ServiceKey

if TYPE_CHECKING:
    from .context import PluginContext
    from .registration import Registration

#: Command names: a lowercase letter, then up to 31 of ``[a-z0-9_-]``.
COMMAND_NAME_PATTERN: Final = r"^[a-z][a-z0-9_-]{0,31}$"
#: Longest answer text kept (characters).
MAX_COMMAND_ANSWER_CHARS: Final = 4000
#: Longest a command may take before it is answered with an error (seconds).
COMMAND_TIMEOUT_S: Final = 30.0


@dataclass(frozen=True, slots=True)
class CommandInvocation:
    """One use of a command."""

    session_id: str
    name: str
    #: The text after the command word, stripped (``"off"`` for ``/rp off``).
    args: str
    #: Whether the session's agent is running a turn now.
    running: bool


@dataclass(frozen=True, slots=True)
class CommandAnswer:
    """A command's answer. ``kind`` is ``success`` or ``error``."""

    name: str
    kind: Literal["success", "error"]
    text: str


CommandHandler = Callable[[CommandInvocation], Awaitable["CommandAnswer | str | None"]]
"""``async def handler(invocation)``: return text (a success), an answer, or ``None``."""


@dataclass(frozen=True, slots=True)
class CommandInfo:
    """A registered command."""

    name: str
    owner: str
    description: str
    hint: str | None


class CommandService(Protocol):
    """The host's slash-command registry (``COMMANDS``)."""

    def register(
        self,
        ctx: PluginContext,
        name: str,
        description: str,
        handler: CommandHandler,
        *,
        hint: str | None = None,
    ) -> Registration:
        """Add ``/name`` (unique across plugins; a duplicate names both owners). ``hint``
        describes the arguments (``"[off]"``). Disposed with the plugin."""
        ...

    def list(self) -> tuple[CommandInfo, ...]:
        """Every registered command, by name."""
        ...


COMMANDS: ServiceKey[CommandService] = ServiceKey("host.commands")
