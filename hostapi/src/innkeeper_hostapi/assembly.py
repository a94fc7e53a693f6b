"""Prompt assembly across plugins: the source registry, strategies and the Assembler service.

The Assembler plugin (``innkeeper-assembler``) owns strategies, the source registry and
placement (`docs/contract/loader.md#ownership`). Plugins never import it: they meet
it through the service keys below, which resolve at call time.

- :data:`PROMPT_SOURCES` (``dshPromptSources``, protocol :data:`SOURCE_PROTOCOL`) is the shared
  source registry; :data:`TAVERN_REQUEST_SOURCES` (``tavernRequestSources``) is an alias of the
  **same** registry object (`docs/contract/loader.md#ownership`). A plugin registers a
  :class:`PromptSource`; at assembly time the Assembler asks it for :class:`Contribution` items.
- A :class:`Strategy` is an ordered list of :class:`Module` rows (which source, which items,
  where) plus a backend: ``standard`` delivers within the host's native surface (system text and
  durable context messages), ``advanced`` additionally projects request-only messages (items
  :class:`AtDepth`, :class:`ChatStart`, in-chat Author's Note) into the array actually sent
  through the host's ``REQUEST_PROJECTOR`` slot, recorded by the host as ``request/assembly``.
- A strategy is *applied* to a session as an immutable snapshot (:class:`AppliedStrategy`):
  editing the strategy or applying another one to a different session never changes it.
- :data:`PROMPT_ASSEMBLER` (``dshPromptAssembler``) is the Assembler itself; it carries a
  ``version`` that dependants check at setup.

Only the standard library and msgspec are used here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal, Protocol, TypeAlias

import msgspec

from .keys import EventKey, ServiceKey
from .providers import ChatMessage

if TYPE_CHECKING:
    from .agents import TurnContext
    from .context import PluginContext
    from .registration import Registration

__all__ = [
    "DEFAULT_MAX_PROFILE_BYTES",
    "HARD_MAX_PROFILE_BYTES",
    "PROMPT_ASSEMBLER",
    "PROMPT_SOURCES",
    "SOURCES_READY",
    "SOURCE_PROTOCOL",
    "SYSTEM_SNAPSHOT_MAX_BYTES",
    "TAVERN_REQUEST_SOURCES",
    "AppliedStrategy",
    "AssemblerService",
    "AssemblyDiagnostic",
    "AtDepth",
    "AuthorsNote",
    "AuthorsNoteSetting",
    "Backend",
    "ChatStart",
    "Context",
    "Contribution",
    "HistoryBudget",
    "InSystem",
    "MessageName",
    "Module",
    "Placement",
    "PromptRole",
    "PromptSource",
    "PromptSourceRegistry",
    "RequestKind",
    "RequestPreview",
    "RequestShape",
    "SourceInfo",
    "SourceRequest",
    "Strategy",
    "serialized_bytes",
]

#: The source protocol this registry speaks (`docs/contract/loader.md#ownership`).
SOURCE_PROTOCOL: Final = 1
#: `docs/contract/world-info.md#profile-budget`: complete system snapshots have a fixed
#: 2 MiB physical ceiling that no profile limit can raise.
SYSTEM_SNAPSHOT_MAX_BYTES: Final = 2 * 1024 * 1024
#: The logical profile budget of a strategy (same default as the Tavern profile: 512 KiB) ...
DEFAULT_MAX_PROFILE_BYTES: Final = 512 * 1024
#: ... and its hard cap (`docs/contract/world-info.md#profile-budget`).
HARD_MAX_PROFILE_BYTES: Final = 2 * 1024 * 1024

PromptRole: TypeAlias = Literal["system", "user", "assistant"]
#: A message ``name`` (OpenAI-style: letters, digits, ``_`` and ``-``).
MessageName: TypeAlias = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_-]{1,64}$")]
#: What a request asks the model for: the next reply, the continuation of the last message, or
#: a reply written as the user (SillyTavern's continue and impersonate).
RequestKind: TypeAlias = Literal["normal", "continue", "impersonate"]
Backend: TypeAlias = Literal["standard", "advanced"]
Severity: TypeAlias = Literal["info", "warning", "error"]


class _Model(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True, rename="camel"):
    """Base: immutable, keyword-only, camelCase on the wire, unknown fields rejected."""


# --------------------------------------------------------------------------- placements


class InSystem(_Model, tag_field="kind", tag="system", frozen=True):
    """In the system text, in strategy order (native delivery in both backends)."""


class AtDepth(_Model, tag_field="kind", tag="depth", frozen=True):
    """A request-only message ``depth`` messages before the end of the chat (0 = after the last
    message), with ``role``; ``order`` sorts items of one depth (lower first, SillyTavern's
    ``injection_order``). The standard backend degrades it to system text (reported)."""

    depth: Annotated[int, msgspec.Meta(ge=0, le=10_000)] = 4
    role: PromptRole = "system"
    order: int = 100
    #: The message's ``name`` (``None``: none). Items with a name are a message of their own.
    name: MessageName | None = None
    #: ``False`` keeps the message apart when a :class:`RequestShape` squashes system messages.
    merge: bool = True


class ChatStart(_Model, tag_field="kind", tag="chat-start", frozen=True):
    """A request-only message where the chat begins (before the first history message), e.g. a
    card's greeting as an assistant message. Standard: degraded to system text."""

    role: PromptRole = "system"
    #: Items at the chat start go in ascending ``order``; items of one order, role and name are
    #: one message (e.g. a preset's relative prompts, each its own message, then the greeting).
    order: int = 0
    #: The message's ``name`` (``None``: none).
    name: MessageName | None = None
    #: ``True``: the chat's first message (a greeting). It counts as history: in-chat items are
    #: placed as if it were the oldest history message, and the history budget treats it as one.
    chat: bool = False
    #: ``False`` keeps the message apart when a :class:`RequestShape` squashes system messages.
    merge: bool = True


class AuthorsNote(_Model, tag_field="kind", tag="authors-note", frozen=True):
    """Around the Author's Note (``top`` above it, ``bottom`` below); where the note goes is the
    strategy's :class:`AuthorsNoteSetting`."""

    edge: Literal["top", "bottom"] = "top"


class Context(_Model, tag_field="kind", tag="context", frozen=True):
    """A runtime-context message after the history. Standard: a durable ``user/message`` with
    ``origin.kind = "context"`` appended before the request (native delivery; later requests see
    it as history). Advanced: a request-only ``user`` message at depth 0 (history untouched)."""


class HistoryBudget(_Model, tag_field="kind", tag="history-budget", frozen=True):
    """Not a message: the request's context budget in tokens (the advanced backend only). The
    whole array must fit ``tokens`` (estimated, see ``docs/assembler.md``): system messages and
    request-only messages are always sent, then the newest history messages that fit, whole;
    older ones are left out of this request (durable history untouched). The smallest budget of
    a plan counts; the item's text is ignored."""

    tokens: Annotated[int, msgspec.Meta(gt=0)]


class RequestShape(_Model, tag_field="kind", tag="request-shape", frozen=True):
    """Not a message: how the advanced backend shapes the whole array it sends (SillyTavern's
    Chat Completion settings). Several items combine: a flag is on when any item sets it, the
    last item that names the speakers counts.

    - ``squash_system``: consecutive request-only ``system`` messages without a name are sent as
      one, their texts joined by a newline (items with ``merge=False`` stay apart);
    - ``history_names``: ``"name"`` sends each history ``user``/``assistant`` message with
      ``name`` set to ``user_name`` / ``assistant_name``; ``"content"`` prefixes its content with
      ``"<name>: "``;
    - ``continue_prefill``: in a ``continue`` request the message being continued (the last
      history message) is sent last, after every other message, for the model to extend;
    - ``assistant_names``: the names of the session's assistant messages, oldest first (a
      group chat, where each reply has its own speaker): the history's assistant messages are
      named from the newest backwards by this list (so a history trimmed at its start still
      matches); one without an entry, or with ``""``, gets ``assistant_name``.
    """

    squash_system: bool = False
    history_names: Literal["none", "name", "content"] = "none"
    user_name: str = ""
    assistant_name: str = ""
    continue_prefill: bool = False
    assistant_names: tuple[str, ...] = ()


#: Where a contribution goes.
Placement: TypeAlias = (
    InSystem | AtDepth | ChatStart | AuthorsNote | Context | HistoryBudget | RequestShape
)


# --------------------------------------------------------------------------- sources


class Contribution(_Model, frozen=True):
    """One item a source offers for one request.

    ``key`` is unique within the source (a strategy module selects items by key prefix).
    ``rank`` marks a trimmable item (lore): when the profile budget is exceeded, items are
    dropped from the highest rank down; ``None`` is never trimmed. ``kind`` and ``provenance``
    are metadata for the audit (never model-visible).
    """

    key: Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
    text: str
    placement: Placement = InSystem()
    kind: str = "prompt"
    rank: int | None = None
    provenance: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SourceRequest:
    """What a source is asked for: one request of a session (or a preview of one)."""

    session_id: str | None
    #: The turn being assembled; ``None`` for a preview.
    turn: TurnContext | None
    #: The module's ``options`` from the strategy (source-defined, JSON builtins).
    options: Mapping[str, Any] = field(default_factory=dict)
    #: The request's kind; a turn is ``normal`` (continue and impersonate are previewed).
    kind: RequestKind = "normal"
    #: For a ``continue`` request: the text of the message being continued.
    continued: str = ""

    @property
    def preview(self) -> bool:
        """A preview must not commit any state (timed effects, variables, ...)."""
        return self.turn is None


class PromptSource(Protocol):
    """A source of prompt contributions (protocol :data:`SOURCE_PROTOCOL`)."""

    @property
    def id(self) -> str:
        """Unique, namespaced id (``tavern.profile``, ``my-plugin.notes``)."""
        ...

    async def render(self, request: SourceRequest) -> Sequence[Contribution]:
        """The items for this request, in the source's own order. Raising leaves the source out
        of this request (reported as ``ASSEMBLER_SOURCE_FAILED``); it never fails the turn."""
        ...


@dataclass(frozen=True, slots=True)
class SourceInfo:
    """A registered source, as listed by the registry."""

    id: str
    owner: str
    protocol: int = SOURCE_PROTOCOL


class PromptSourceRegistry(Protocol):
    """``dshPromptSources`` (alias ``tavernRequestSources``): where plugins register sources."""

    @property
    def protocol(self) -> int:
        """:data:`SOURCE_PROTOCOL`."""
        ...

    def register(self, ctx: PluginContext, source: PromptSource) -> Registration:
        """Register ``source`` for ``ctx``'s plugin; disposed with that plugin. A duplicate id
        raises ``RegistrationConflict`` naming both owners."""
        ...

    def get(self, source_id: str) -> PromptSource | None:
        """The source registered under ``source_id``, if any."""
        ...

    def sources(self) -> tuple[SourceInfo, ...]:
        """Every registered source, sorted by id."""
        ...


# --------------------------------------------------------------------------- strategies


class Module(_Model, frozen=True):
    """One row of a strategy: the items of ``source`` whose key starts with one of ``keys`` (all
    items when empty), placed where each item asks, or at ``placement`` when set."""

    source: Annotated[str, msgspec.Meta(min_length=1, max_length=128)]
    keys: tuple[str, ...] = ()
    placement: Placement | None = None
    enabled: bool = True
    options: dict[str, Any] = {}


class AuthorsNoteSetting(_Model, frozen=True):
    """Where the Author's Note (and :class:`AuthorsNote` items) goes: ``in-chat`` at ``depth``
    with ``role`` (SillyTavern's default: depth 4, system), or at the top/bottom of the system
    text (ST's "before main" / "after main" positions, simplified)."""

    position: Literal["in-chat", "system-top", "system-bottom"] = "in-chat"
    depth: Annotated[int, msgspec.Meta(ge=0, le=10_000)] = 4
    role: PromptRole = "system"
    text: str = ""


class Strategy(_Model, frozen=True):
    """An assembly strategy: ordered modules, a backend and the logical profile budget."""

    id: Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")]
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
    backend: Backend = "standard"
    modules: tuple[Module, ...] = ()
    max_profile_bytes: Annotated[int, msgspec.Meta(gt=0)] = DEFAULT_MAX_PROFILE_BYTES
    authors_note: AuthorsNoteSetting = AuthorsNoteSetting()
    revision: int = 1


class AppliedStrategy(_Model, frozen=True):
    """The immutable snapshot a session uses: a copy of the strategy as it was when applied."""

    session_id: str
    strategy: Strategy
    applied_at: str
    sha256: str


# --------------------------------------------------------------------------- results


class AssemblyDiagnostic(_Model, frozen=True):
    """A problem or an approximation, body-free (``details`` holds counts and ids only)."""

    code: str
    message: str
    severity: Severity = "warning"
    details: dict[str, Any] = {}


class RequestPreview(_Model, frozen=True):
    """What a request would send, built without calling a provider or writing anything.

    ``messages`` is the array: the Assembler's system text (other plugins' sections are not
    rendered by a preview), the durable history, the optional pending input, with request-only
    messages placed as the backend would. ``rejected`` is true when a limit refused the
    assembly (the diagnostics say which); the array is then what would be sent without it.
    """

    session_id: str | None
    strategy_id: str | None
    backend: Backend | None
    messages: tuple[ChatMessage, ...]
    request_only: tuple[int, ...]
    diagnostics: tuple[AssemblyDiagnostic, ...]
    profile_bytes: int
    snapshot_bytes: int
    rejected: bool


class AssemblerService(Protocol):
    """``dshPromptAssembler``: strategies, applied snapshots, placement and preview."""

    @property
    def version(self) -> str:
        """The Assembler's version (``1.1.3``); dependants check a compatible range."""
        ...

    @property
    def protocol(self) -> int:
        """The source protocol (:data:`SOURCE_PROTOCOL`)."""
        ...

    @property
    def sources(self) -> PromptSourceRegistry:
        """The shared source registry (also ``dshPromptSources``)."""
        ...

    def strategies(self) -> tuple[Strategy, ...]:
        """Every stored strategy, sorted by id."""
        ...

    def strategy(self, strategy_id: str) -> Strategy | None:
        """One stored strategy."""
        ...

    async def put_strategy(self, strategy: Strategy) -> Strategy:
        """Create or replace a strategy (its ``revision`` is bumped); applied snapshots of it
        are not touched."""
        ...

    async def delete_strategy(self, strategy_id: str) -> bool:
        """Delete a stored strategy; sessions keep their applied snapshots."""
        ...

    async def apply(self, session_id: str, strategy_id: str | None) -> AppliedStrategy | None:
        """Snapshot a stored strategy onto a session (``None`` clears it: the session goes back
        to the no-strategy path)."""
        ...

    def applied(self, session_id: str) -> AppliedStrategy | None:
        """The session's applied snapshot, if any."""
        ...

    async def preview(
        self,
        session_id: str | None,
        *,
        strategy: Strategy | None = None,
        pending_input: str | None = None,
        kind: RequestKind = "normal",
    ) -> RequestPreview:
        """What a request would send now (``strategy`` defaults to the applied snapshot);
        ``kind`` ``continue`` extends the last history message, ``impersonate`` asks for the
        user's next message."""
        ...


def serialized_bytes(message: ChatMessage) -> int:
    """Physical size of one carrier: the UTF-8 JSON ``{role, content, name}`` the host hashes."""
    wire = {"role": message.role, "content": message.content, "name": message.name}
    return len(msgspec.json.encode(wire))


#: The shared source registry (protocol 1).
PROMPT_SOURCES: ServiceKey[PromptSourceRegistry] = ServiceKey("dshPromptSources")
#: Legacy alias: the very same registry object as :data:`PROMPT_SOURCES`.
TAVERN_REQUEST_SOURCES: ServiceKey[PromptSourceRegistry] = ServiceKey("tavernRequestSources")
#: The Assembler service.
PROMPT_ASSEMBLER: ServiceKey[AssemblerService] = ServiceKey("dshPromptAssembler")
#: Emitted by the Assembler at the end of its setup with the (new, empty) registry: a plugin
#: that registered sources into an earlier generation registers them again here (a reloaded
#: Assembler starts with an empty registry). A failing listener is logged, never fatal.
SOURCES_READY: EventKey[PromptSourceRegistry] = EventKey("dshPromptSources/ready")
