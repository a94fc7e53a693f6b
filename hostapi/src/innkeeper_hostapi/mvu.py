"""The ``tavernMvu`` service as other plugins see it: key, protocol and command processors.

docs/contract/mvu.md#host-service: the Tavern plugin provides ``tavernMvu`` (protocol 1), the owner
of MVU variable state — content, history, CAS revisions and idempotent operations, one state
instance per session. Plugins resolve it at call time with ``ctx.get(TAVERN_MVU)`` (or
``ctx.get_optional``) and never import the Tavern plugin.

Records, receipts and facts cross this boundary as plain JSON objects with the spec's camelCase
field names (``{id, name, type, authority, scope, content, revision, currentRevision, ...}``), so
they can be handed to HTTP clients unchanged.

Command processors (docs/contract/mvu-vm.md#command-processors) are trusted Python callables
registered with :meth:`TavernMvuService.register_command_processor`. A processor receives a
:class:`MvuCommandBatch` — the parsed command views in original order, a private copy of the
variables and the reply text — and returns the commands to run. It may only **filter** the
original commands or **recover** one of the malformed blocks the host offers in
:attr:`MvuCommandBatch.recoverable`; anything else (new writes, changed values, reordering) is
rejected and the reply commits nothing, with a diagnostic receipt. A registration replaces the
card's own declared processor (a card script run by the Tavern plugin in a QuickJS VM) while it
lasts.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol, TypeAlias

from .keys import ServiceKey

#: A list of JSON records (an alias: the service has a method named ``list``).
JsonList: TypeAlias = list[dict[str, Any]]

#: Protocol version of the service (docs/contract/mvu.md#host-service).
MVU_PROTOCOL_VERSION: Final = 1
#: Protocol version of a command-processor receipt, ``commandProcessor:{protocolVersion:1, ...}``
#: (docs/contract/mvu-vm.md#receipt).
COMMAND_PROCESSOR_PROTOCOL: Final = 1
#: Wall-clock budget of one processor call, the 250 ms a card's VM entry gets
#: (docs/contract/mvu-vm.md#vm-limits).
COMMAND_PROCESSOR_BUDGET_SECONDS: Final = 0.25

#: Kinds of a session seed (docs/contract/mvu.md#forks-and-seeds).
SeedKind = Literal["fork", "reply-swipe", "request-retry"]
#: How a malformed block was recovered (docs/contract/mvu-vm.md#command-processors).
RecoveryKind = Literal["json-patch-separator", "update-variable-array"]


@dataclass(frozen=True, slots=True)
class MvuCommandView:
    """MVU's command view ``{type, args, full_match, reason}``: raw argument strings (quotes
    kept), before alias normalisation, exactly as parsed from the reply."""

    type: str
    args: tuple[str, ...]
    full_match: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        """The view as the JSON object MVU listeners see."""
        return {
            "type": self.type,
            "args": list(self.args),
            "full_match": self.full_match,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class MvuRecoverable:
    """A malformed block the host can recover, with the exact commands recovery yields.

    ``kind`` is ``json-patch-separator`` (one strict JSON Patch block that only lacks a value
    separator) or ``update-variable-array`` (an ``<UpdateVariable>`` envelope holding a bare
    JSON Patch array). ``block`` is the block's original text; a processor recovers it by
    including ``commands`` (all or some, in order) in its output, before the original command
    at ``index`` (``index`` = how many original commands precede the block).
    """

    kind: RecoveryKind
    block: str
    commands: tuple[MvuCommandView, ...]
    index: int


@dataclass(frozen=True, slots=True)
class MvuCommandBatch:
    """What a command processor sees for one reply (``COMMAND_PARSED`` arguments).

    ``variables`` is a private deep copy of the committed variables (changing it changes
    nothing); ``commands`` are in original order; ``message_content`` is the reply text.
    """

    state_id: str
    variables: Mapping[str, Any]
    commands: tuple[MvuCommandView, ...]
    message_content: str
    recoverable: tuple[MvuRecoverable, ...] = ()


#: A processor: return the commands to run (``None`` keeps them all). Synchronous; it runs off
#: the event loop under :data:`COMMAND_PROCESSOR_BUDGET_SECONDS`.
CommandProcessor = Callable[[MvuCommandBatch], "Sequence[MvuCommandView] | None"]


@dataclass(frozen=True, slots=True)
class CommandProcessorSpec:
    """``registerCommandProcessor({id, source})``: ``id`` is a state instance id or a template
    id (then it applies to every instance of that template without its own processor)."""

    id: str
    source: CommandProcessor


@dataclass(frozen=True, slots=True)
class CommandProcessorReceipt:
    """Proof of registration (not of any commit): ``commandProcessor`` of
    docs/contract/mvu-vm.md#receipt."""

    registration_id: str
    source: str
    sha256: str
    listener_count: int = 1
    registered: bool = True
    protocol_version: int = COMMAND_PROCESSOR_PROTOCOL

    def to_json(self) -> dict[str, Any]:
        """The receipt as docs/contract/mvu-vm.md#receipt names its fields."""
        return {
            "protocolVersion": self.protocol_version,
            "registered": self.registered,
            "registrationId": self.registration_id,
            "source": self.source,
            "sha256": self.sha256,
            "listenerCount": self.listener_count,
        }


@dataclass(frozen=True, slots=True)
class CommandProcessorRegistration:
    """``{receipt, dispose}``: ``dispose`` removes this registration only — never a newer one."""

    receipt: CommandProcessorReceipt
    dispose: Callable[[], Awaitable[None]]


#: A usage decision handler (docs/contract/mvu.md#management): given the decision request, return
#: ``None`` (no configuration) or ``{enabled, configRevision?, strategy?, reason?}``.
UsageHandler = Callable[[Mapping[str, Any]], "Awaitable[Mapping[str, Any] | None]"]
#: A facts listener (docs/contract/mvu.md#facts); it never takes part in writes.
FactListener = Callable[[Mapping[str, Any]], "Awaitable[None] | None"]


class MvuServiceError(Exception):
    """A refused ``tavernMvu`` call; ``code`` is stable (``MVU_REVISION_CONFLICT``, ...) and
    ``status`` is the HTTP status the v1 routes answer with."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status


class TavernMvuService(Protocol):
    """docs/contract/mvu.md#host-service (Python names; arguments as keywords).

    ``scope`` is ``{authority: 'local', sessionId?, messageId?, endEventId?}``; only local
    authority is accepted.
    """

    async def list(self, *, scope: Mapping[str, Any] | None = None) -> JsonList:
        """Authorized resources (summaries without content)."""
        ...

    async def read(self, *, id: str, scope: Mapping[str, Any]) -> dict[str, Any] | None:
        """One record or ``None``; historical scopes read the recorded version."""
        ...

    async def update(
        self,
        *,
        id: str,
        content: Mapping[str, Any],
        expected_revision: int,
        operation_id: str,
        scope: Mapping[str, Any],
    ) -> dict[str, Any]:
        """CAS edit of the current content; an identical replay returns the first receipt."""
        ...

    async def copy(self, *, id: str, new_id: str, scope: Mapping[str, Any]) -> dict[str, Any]:
        """A new manual resource with the same content and access scope."""
        ...

    async def history(
        self, *, id: str, scope: Mapping[str, Any], include_before: bool = False
    ) -> JsonList:
        """Versions oldest first, with before/after evidence when asked."""
        ...

    async def facts(self, *, id: str, scope: Mapping[str, Any]) -> JsonList:
        """Bounded, body-free observations for this resource."""
        ...

    async def set_management_mode(
        self,
        *,
        id: str,
        mode: str,
        expected_revision: int,
        operation_id: str,
        scope: Mapping[str, Any],
    ) -> dict[str, Any]:
        """CAS/idempotent save of the stored management preference."""
        ...

    async def register_command_processor(
        self, spec: CommandProcessorSpec
    ) -> CommandProcessorRegistration:
        """Install the effective processor of a state instance (or template)."""
        ...

    def register_usage(
        self, handler: UsageHandler, *, provider_id: str | None = None
    ) -> Callable[[], None]:
        """Register a usage decision handler; the returned disposer revokes it."""
        ...

    def observe(self, listener: FactListener) -> Callable[[], None]:
        """Receive facts as they are recorded; returns a disposer."""
        ...

    def validate_config(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """``{ok, errors}`` for a ``type: 'mvu-state'`` configuration."""
        ...

    async def discover(
        self, *, definition: Mapping[str, Any], session_id: str | None = None
    ) -> dict[str, Any] | None:
        """The template of a definition (``{characterId}``) or ``None`` without MVU data."""
        ...

    async def capture_session_seed(
        self,
        *,
        session_id: str,
        kind: SeedKind,
        at_event_id: int,
        prefix_end_event_id: int | None = None,
        target_session_id: str | None = None,
    ) -> str | None:
        """Freeze a source state for a new session; an opaque ticket or ``None`` (no state)."""
        ...

    async def install_session_seed(self, *, ticket: str, session_id: str) -> dict[str, Any]:
        """Install a captured seed into the created session (idempotent per ticket/target)."""
        ...

    async def checkpoint(self, session_id: str, turn: int) -> dict[str, Any] | None:
        """Freeze the pre-turn baseline of ``turn`` (later calls return the same one)."""
        ...

    async def resolve_prompt_dependency(
        self,
        *,
        scope: Mapping[str, Any],
        event: Mapping[str, Any],
        id: str | None = None,
    ) -> dict[str, Any] | None:
        """Whole variables for prompt use, with a synchronous ``checkCurrent`` lease."""
        ...

    async def list_bound(self, *, scope: Mapping[str, Any]) -> Mapping[str, Any]:
        """The session's existing instances of its current character
        (`docs/contract/catalogs.md#bound-resources`): deeply immutable ``{items, revision,
        checkCurrent}``, no content, nothing allocated."""
        ...

    def get_management_defaults(
        self, *, id: str, scope: Mapping[str, Any] | None = None
    ) -> dict[str, Any] | None:
        """Source defaults for a manager, with a ``checkCurrent`` lease."""
        ...


#: The service key, resolved at call time (docs/contract/mvu.md#host-service).
TAVERN_MVU: ServiceKey[TavernMvuService] = ServiceKey("tavernMvu", TavernMvuService)

__all__ = [
    "COMMAND_PROCESSOR_BUDGET_SECONDS",
    "COMMAND_PROCESSOR_PROTOCOL",
    "MVU_PROTOCOL_VERSION",
    "TAVERN_MVU",
    "CommandProcessor",
    "CommandProcessorReceipt",
    "CommandProcessorRegistration",
    "CommandProcessorSpec",
    "FactListener",
    "MvuCommandBatch",
    "MvuCommandView",
    "MvuRecoverable",
    "MvuServiceError",
    "RecoveryKind",
    "SeedKind",
    "TavernMvuService",
    "UsageHandler",
]
