"""Public session types: durable events, headers, derived messages and the controller protocol.

A session is an append-only log of typed events with a per-session, monotonic, 1-based ``seq``
(``docs/contract/sessions.md#event-log``: event ids are log seqs). The log format is
version :data:`SESSION_FORMAT_VERSION` (``docs/contract/sessions.md#format-version``:
``meta.version``).

Event payloads form one msgspec tagged union, :data:`EventData`, keyed by the ``type`` field
(``"user/message"``, ``"turn/start"``, ...). Plugins read them; the host writes them. A plugin
that needs an event of its own appends :class:`ExtensionEvent` with a namespaced ``name``.

This module imports only the standard library, msgspec and the sampler field table (which
imports only those two), so a plugin can depend on it freely.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Annotated, Any, Final, Literal, Protocol, TypeAlias

import msgspec

from .sampler import SamplerFields

#: The session log format this host writes and reads (``meta.version`` of ``inspect``).
SESSION_FORMAT_VERSION: Final = 4

#: Bounds of the optional display metadata on ``origin`` (``docs/contract/sessions.md#messages``).
ORIGIN_PRODUCER_MAX_CHARS: Final = 128
ORIGIN_FORM_MAX_CHARS: Final = 64
ORIGIN_SUMMARY_MAX_CHARS: Final = 512

#: Longest session title accepted by ``create``/``rename``.
SESSION_TITLE_MAX_CHARS: Final = 512

#: Default and maximum number of events in one history page.
DEFAULT_PAGE_LIMIT: Final = 200
MAX_PAGE_LIMIT: Final = 1000

#: Deepest delegation (sub-agent) chain a session may sit in.
MAX_DELEGATION_DEPTH: Final = 8


class Model(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True, rename="camel"):
    """Base of the session structs: immutable, keyword-only, camelCase on the wire and on disk."""


# --------------------------------------------------------------------------- content


class TextBlock(Model, tag_field="type", tag="text", frozen=True):
    """A run of text inside a message body."""

    text: str


#: One block of a message body. Only text exists today; the union leaves room for media.
ContentBlock: TypeAlias = TextBlock

Role: TypeAlias = Literal["user", "assistant", "system", "developer", "tool"]
"""Model-facing message role."""

OriginKind: TypeAlias = Literal["user", "context", "steering", "assistant", "system"]
"""Display origin of a message, independent of :data:`Role`."""

InboxTarget: TypeAlias = Literal["next-turn", "next-step"]
"""Which inbox queue a splice edits: ``next-turn`` (queued input) or ``next-step`` (steering)."""

PromptMode: TypeAlias = Literal["queue", "steer"]
"""How ``prompt`` delivers input: queue it for the next turn, or steer the running one."""


class MessageOrigin(Model, frozen=True):
    """Where a message came from, for display (``docs/contract/sessions.md#messages``).
    ``producer``/``form``/``summary`` are bounded metadata for ``context``; the body is never copied
    here."""

    kind: OriginKind
    producer: Annotated[str, msgspec.Meta(max_length=ORIGIN_PRODUCER_MAX_CHARS)] | None = None
    form: Annotated[str, msgspec.Meta(max_length=ORIGIN_FORM_MAX_CHARS)] | None = None
    summary: Annotated[str, msgspec.Meta(max_length=ORIGIN_SUMMARY_MAX_CHARS)] | None = None


USER_ORIGIN: Final = MessageOrigin(kind="user")


# --------------------------------------------------------------------------- event payloads


class EventBase(Model, tag_field="type", omit_defaults=True, frozen=True):
    """Base of every event payload; the subclass ``tag`` is the event ``type``."""


class UserMessage(EventBase, tag="user/message", frozen=True):
    """A model-side ``user`` message: real input (``origin.kind`` ``user``/``steering``) or a
    runtime context injection (``origin.kind`` ``context``)."""

    message_id: str
    content: tuple[ContentBlock, ...]
    origin: MessageOrigin = USER_ORIGIN
    turn: int | None = None


class SystemSection(Model, frozen=True):
    """One section of an assembled system prompt: its name and where its text sits in the
    message's text (UTF-8 byte offsets, ``end`` exclusive; sections are joined by a blank
    line)."""

    name: str
    start: Annotated[int, msgspec.Meta(ge=0)]
    end: Annotated[int, msgspec.Meta(ge=0)]


class SystemMessage(EventBase, tag="system/message", frozen=True):
    """A ``system`` or ``developer`` message (e.g. the assembled system prompt of a turn).

    ``sections`` names the system-prompt sections the text was assembled from, in order (empty
    for a message that was not assembled from sections)."""

    message_id: str
    content: tuple[ContentBlock, ...]
    role: Literal["system", "developer"] = "system"
    origin: MessageOrigin = MessageOrigin(kind="system")
    turn: int | None = None
    sections: tuple[SystemSection, ...] = ()


class ToolCall(Model, frozen=True):
    """A tool invocation requested by the assistant; ``arguments`` is the raw JSON text."""

    id: str
    name: str
    arguments: str


class Usage(Model, frozen=True):
    """Token accounting reported by a provider (fields it did not report stay ``None``)."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    reasoning_tokens: int | None = None


class AssistantMessage(EventBase, tag="assistant/message", frozen=True):
    """The assistant's reply of one request inside a turn."""

    message_id: str
    content: tuple[ContentBlock, ...]
    turn: int
    reasoning: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    interrupted: bool = False
    finish_reason: str | None = None
    provider: str | None = None
    model: str | None = None
    usage: Usage | None = None
    #: A ``continue`` turn's text: the id of the assistant message it extends (its text follows
    #: that message's; a client shows the two as one message).
    continues: str | None = None


class ToolResult(EventBase, tag="tool/result", frozen=True):
    """The result of a tool call, fed back to the model with role ``tool``."""

    message_id: str
    tool_call_id: str
    name: str
    content: tuple[ContentBlock, ...]
    turn: int | None = None
    is_error: bool = False


class InboxItem(Model, frozen=True):
    """One queued input waiting in an agent's inbox."""

    id: str
    content: tuple[ContentBlock, ...]
    role: Literal["user"] = "user"


class InboxSpliced(EventBase, tag="agent/inbox/spliced", frozen=True):
    """A durable change to an agent's inbox, published before the live inbox changes.

    ``op`` names the intent; ``target``/``start``/``removed_count``/``inserted`` are the exact
    splice on that queue, so replaying every splice rebuilds the queue:

    * ``insert``: ``removed_count == 0``, ``inserted`` non-empty (``prompt``);
    * ``replace``: removes and inserts (editing queued input);
    * ``cancel``: removes, inserts nothing; the removed input is dropped, never sent;
    * ``claim``: removes, inserts nothing; the removed input is taken by the running turn.
      ``claim_event_seqs`` lists the seqs of the splices that inserted the claimed items, so a
      plugin can tie the claimed batch to its durable origin. The claim event's own ``seq`` is
      the claim identity (``docs/contract/loader.md#activation-input``).
    """

    op: Literal["insert", "replace", "cancel", "claim"]
    target: InboxTarget
    start: Annotated[int, msgspec.Meta(ge=0)]
    removed_count: Annotated[int, msgspec.Meta(ge=0)] = 0
    inserted: tuple[InboxItem, ...] = ()
    turn: int | None = None
    claim_event_seqs: tuple[int, ...] = ()


#: What a turn asks the model for: the reply to the claimed input (``normal``), more of the last
#: assistant message (``continue``), or the player's next message (``impersonate``: its text is
#: handed to the caller, never appended as a message). See docs/sessions.md "Turn kinds".
TurnKind: TypeAlias = Literal["normal", "continue", "impersonate"]


class TurnStart(EventBase, tag="turn/start", frozen=True):
    """A turn began. At most one turn is open per session."""

    turn: Annotated[int, msgspec.Meta(ge=1)]
    #: Left out of the log for a ``normal`` turn (every turn before turn kinds existed).
    kind: TurnKind = "normal"


class TurnEndReason(Model, frozen=True):
    """Why a turn ended. ``message`` is a short, body-free diagnostic (never prompt text)."""

    kind: Literal["completed", "interrupted", "error"]
    code: str | None = None
    message: str | None = None


class TurnEnd(EventBase, tag="turn/end", frozen=True):
    """The open turn ended."""

    turn: Annotated[int, msgspec.Meta(ge=1)]
    reason: TurnEndReason


# msgspec allows a frozen struct over the non-frozen table; mypy applies the stdlib
# dataclass rule (a runtime error there, not here) and still treats every field as read-only.
class CallParamsRecord(SamplerFields, frozen=True, kw_only=True):  # type: ignore[misc]
    """Sampling parameters as sent (or requested) for one attempt (the fields of
    :class:`~innkeeper_hostapi.sampler.SamplerFields`); ``None`` = not sent."""


class RequestHeader(EventBase, tag="request/header", frozen=True):
    """Body-free record of one provider attempt: who was called with which parameters, and
    which tools were offered (``tools`` by name, ``toolChoice``)."""

    turn: int
    attempt: Annotated[int, msgspec.Meta(ge=1)]
    provider: str
    model: str | None
    requested: CallParamsRecord
    effective: CallParamsRecord
    omitted: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()
    tool_choice: str | None = None
    #: The request step of the turn (1 for the first; tool and steering steps add more).
    step: int | None = None


class RequestError(EventBase, tag="request/error", frozen=True):
    """A provider attempt failed. ``message`` is the provider's message, never prompt text."""

    turn: int
    attempt: int
    kind: str
    message: str
    parameter: str | None = None
    status: int | None = None


class AssemblyEntry(Model, frozen=True):
    """One message of a projected request. ``ref`` is the seq of the durable event that holds
    its body (history, the turn's system message); a request-only message has no ``ref`` and
    carries its ``content`` inline."""

    role: Literal["system", "developer", "user", "assistant", "tool"]
    ref: int | None = None
    content: str | None = None
    name: str | None = None


class RequestAssembly(EventBase, tag="request/assembly", frozen=True):
    """The array actually sent for one request step when a request projector changed it.

    Durable history is never rewritten: entries reference the events they came from, and only
    request-only messages (e.g. lore or preset prompts placed at a depth) are stored inline.
    ``sha256`` covers the UTF-8 JSON of ``[{role, content, name}]`` as sent.
    """

    turn: int
    step: int
    projector: str
    entries: tuple[AssemblyEntry, ...]
    sha256: str


class SessionTitle(EventBase, tag="session/title", frozen=True):
    """The title changed (``rename``). ``source.kind`` says who set it."""

    title: str
    source: MessageOrigin = USER_ORIGIN
    message_seqs: tuple[int, ...] = ()


class ModelSelection(EventBase, tag="model/selection", frozen=True):
    """The provider/model used for later requests."""

    provider: str
    model: str
    reasoning_effort: str | None = None


class SandboxMode(EventBase, tag="sandbox/mode", frozen=True):
    """The sandbox mode of the session's tools changed."""

    mode: str


class PermissionPreset(EventBase, tag="permission/preset", frozen=True):
    """The permission preset of the session changed."""

    preset: str


class ApprovalPolicy(EventBase, tag="approval/policy", frozen=True):
    """The tool approval policy of the session changed."""

    policy: str


class SessionEndSeed(EventBase, tag="session/end-seed", frozen=True):
    """Marks the end of the seed (restored or inherited) part of a log."""


class ExtensionEvent(EventBase, tag="ext", frozen=True):
    """An event a plugin defines: ``name`` is namespaced (``plugin-id:thing``), ``payload`` is
    any JSON object the plugin owns. The host stores it verbatim and never interprets it."""

    name: Annotated[str, msgspec.Meta(min_length=1, max_length=128)]
    payload: dict[str, Any] = {}


#: Every event payload the host knows, discriminated by ``type``.
EventData: TypeAlias = (
    UserMessage
    | SystemMessage
    | AssistantMessage
    | ToolResult
    | InboxSpliced
    | TurnStart
    | TurnEnd
    | RequestHeader
    | RequestError
    | RequestAssembly
    | SessionTitle
    | ModelSelection
    | SandboxMode
    | PermissionPreset
    | ApprovalPolicy
    | SessionEndSeed
    | ExtensionEvent
)

#: The ``type`` string of each payload class.
EVENT_TYPES: Final[dict[type[EventBase], str]] = {
    cls: str(cls.__struct_config__.tag)
    for cls in (
        UserMessage,
        SystemMessage,
        AssistantMessage,
        ToolResult,
        InboxSpliced,
        TurnStart,
        TurnEnd,
        RequestHeader,
        RequestError,
        RequestAssembly,
        SessionTitle,
        ModelSelection,
        SandboxMode,
        PermissionPreset,
        ApprovalPolicy,
        SessionEndSeed,
        ExtensionEvent,
    )
}


def event_type(data: EventBase) -> str:
    """Return the ``type`` tag of an event payload (``"user/message"``, ...)."""
    return str(type(data).__struct_config__.tag)


class SessionEvent(Model, frozen=True):
    """One durable event: ``seq`` is 1-based and monotonic per session; ``at`` is epoch ms."""

    seq: int
    at: int
    data: EventData

    @property
    def type(self) -> str:
        """The event ``type`` (the payload's tag)."""
        return event_type(self.data)


#: What a fork's title adds to its parent's (issue 10, item 12: a branch is told apart).
BRANCH_TITLE_SUFFIX: Final = " (branch)"


def branch_title(parent_title: str | None) -> str | None:
    """The title of a fork: the parent's plus :data:`BRANCH_TITLE_SUFFIX` (once; a branch of a
    branch keeps one suffix), cut to :data:`SESSION_TITLE_MAX_CHARS`. An untitled parent gives
    an untitled fork."""
    if parent_title is None:
        return None
    if parent_title.endswith(BRANCH_TITLE_SUFFIX):
        return parent_title
    room = SESSION_TITLE_MAX_CHARS - len(BRANCH_TITLE_SUFFIX)
    return parent_title[:room].rstrip() + BRANCH_TITLE_SUFFIX


def text_of(content: Sequence[ContentBlock]) -> str:
    """Join the text blocks of a body the way derived messages do (no separator)."""
    return "".join(block.text for block in content)


def text_content(text: str) -> tuple[ContentBlock, ...]:
    """A body of one text block (empty text gives an empty body)."""
    return (TextBlock(text=text),) if text else ()


# --------------------------------------------------------------------------- headers & reads


class ParentRef(Model, frozen=True):
    """The session this one was forked (or delegated) from, and the seq it was cut at."""

    session_id: str
    at_event_id: Annotated[int, msgspec.Meta(ge=0)]


class SessionHeader(Model, frozen=True):
    """Immutable identity of a session plus its current title.

    ``seed_length`` is how many events were inherited from ``parent`` (``0`` for a new or a
    delegated session); those events keep their seqs in the child. ``created_at`` is an ISO-8601
    UTC timestamp with milliseconds.
    """

    id: str
    created_at: str
    title: str | None
    workspace_id: str | None
    parent: ParentRef | None
    delegation_depth: int
    format_version: int
    seed_length: int = 0


class SessionMeta(Model, frozen=True):
    """Format metadata of a session log: ``inspect()`` ``meta.version``
    (``docs/contract/sessions.md#format-version``)."""

    version: int


class SessionInspection(Model, frozen=True):
    """Result of ``inspect``: the header, the format version, and whether a turn is open."""

    header: SessionHeader
    meta: SessionMeta
    turn_open: bool
    open_turn: int | None
    last_seq: int
    #: Highest turn number used so far; a fork inherits its parent's, so the next turn of any
    #: session is ``last_turn + 1`` (turn numbers only grow).
    last_turn: int = 0


class HistoryPage(Model, frozen=True):
    """One page of history, newest first.

    ``through_seq`` is the pinned upper bound of the whole read: pass it back with
    ``before_seq=next_before_seq`` to get the next page of the *same* snapshot.
    """

    events: tuple[SessionEvent, ...]
    has_more: bool
    through_seq: int
    next_before_seq: int | None


#: Characters of the last message a session list row previews.
MESSAGE_PREVIEW_MAX_CHARS: Final = 200


class MessagePreview(Model, frozen=True):
    """The newest user or assistant message of a session, cut to
    :data:`MESSAGE_PREVIEW_MAX_CHARS` characters (``truncated`` says so)."""

    seq: int
    at: int
    role: Literal["user", "assistant"]
    text: str
    truncated: bool


class SessionSummary(Model, frozen=True):
    """A row of ``list``: the header, the last seq, whether a turn is open and a preview of
    the newest user or assistant message (``None`` before the first one)."""

    header: SessionHeader
    last_seq: int
    turn_open: bool
    last_message: MessagePreview | None = None


class SessionList(Model, frozen=True):
    """A page of sessions, newest first; pass ``next_cursor`` back to continue."""

    sessions: tuple[SessionSummary, ...]
    next_cursor: str | None


class Workspace(Model, frozen=True):
    """A named root folder sessions can belong to."""

    id: str
    root_path: str
    name: str
    created_at: str


# --------------------------------------------------------------------------- derived messages


class DerivedMessage(Model, frozen=True):
    """A message derived from the log (``docs/contract/sessions.md#messages``).

    ``role`` is model-facing; ``origin.kind`` is display origin; the two are independent.
    ``incomplete_turn`` is true when the message belongs to a turn with no ``turn/end`` (running,
    or cut by a fork/crash).
    """

    id: str
    seq: int
    role: Role
    text: str
    content: tuple[ContentBlock, ...]
    origin: MessageOrigin
    incomplete_turn: bool
    turn: int | None = None
    #: The tool calls of an ``assistant`` message (its ``text`` may then be empty).
    tool_calls: tuple[ToolCall, ...] = ()
    #: For a ``tool`` message: the call it answers.
    tool_call_id: str | None = None
    #: For a ``tool`` message: whether the result is an error, a refusal or an interruption.
    is_error: bool = False
    #: For the text of a ``continue`` turn: the id of the assistant message it extends.
    continues: str | None = None


class StoppedRequest(Model, frozen=True):
    """The last turn, when it was interrupted after a human request and before any assistant
    text: evidence for a retry, not a reply (``docs/contract/sessions.md#event-log``:
    ``stoppedRequest``)."""

    user_event_id: int
    turn_start_event_id: int
    turn_end_event_id: int


class FailedTurn(Model, frozen=True):
    """The last turn, when it ended with an error: what failed (the ``turn/end`` reason's
    ``code`` and body-free ``message``) and where, so a client can show it with the messages
    and offer a retry (``POST /host/api/sessions/{id}/retry``). ``user_event_id`` is the turn's
    first real user message, if it had one."""

    turn: int
    turn_start_event_id: int
    turn_end_event_id: int
    user_event_id: int | None
    code: str | None
    message: str | None


class SessionMessages(Model, frozen=True):
    """Every derived message of a session, read from one pinned snapshot."""

    messages: tuple[DerivedMessage, ...]
    incomplete_turn: bool
    through_seq: int
    session_format_version: int
    stopped_request: StoppedRequest | None = None
    failed_turn: FailedTurn | None = None


class RecentMessages(Model, frozen=True):
    """The newest derived messages with text of some roles, and how many a session has in all
    (:meth:`SessionController.recent_messages`)."""

    #: At most ``limit`` messages, oldest first.
    messages: tuple[DerivedMessage, ...]
    #: Messages with text of each asked role in the whole session (not only ``messages``).
    text_counts: dict[Role, int]
    incomplete_turn: bool
    through_seq: int


# --------------------------------------------------------------------------- errors


class SessionError(Exception):
    """Base of session errors. ``code`` is stable and machine-readable."""

    code: str = "session-error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class SessionNotFound(SessionError, LookupError):
    """No session has this id."""

    code = "session-not-found"


class WorkspaceNotFound(SessionError, LookupError):
    """No workspace has this id."""

    code = "workspace-not-found"


class WorkspaceInvalidPath(SessionError, ValueError):
    """A workspace root is not an absolute path to an existing directory."""

    code = "workspace-invalid-path"


class InvalidSessionArgument(SessionError, ValueError):
    """An argument is malformed (bad title, limit, seq, cursor...)."""

    code = "invalid-argument"


class CoordinateOutOfRange(SessionError, ValueError):
    """An event coordinate (``atEventId``, ``beforeSeq``, ``throughSeq``) is outside the log."""

    code = "coordinate-out-of-range"


class TurnConflict(SessionError):
    """The operation needs no open turn (e.g. ``fork`` while the source runs a turn), or a turn
    event does not match the open turn. HTTP maps this to 409."""

    code = "turn-open"


class DelegationTooDeep(SessionError):
    """A delegated session would exceed :data:`MAX_DELEGATION_DEPTH`."""

    code = "delegation-too-deep"


# --------------------------------------------------------------------------- protocols


class SessionController(Protocol):
    """The host's session service (``docs/contract/loader.md#ownership``: the host owns
    durable sessions). ``prompt``, ``cancel`` and ``resolve_agent`` arrive with agents."""

    async def create(
        self,
        *,
        title: str | None = None,
        workspace_id: str | None = None,
        delegated_from: str | None = None,
    ) -> SessionHeader:
        """Create an empty session; ``delegated_from`` makes it a sub-agent session."""
        ...

    async def rename(self, session_id: str, title: str) -> SessionHeader:
        """Set the title (records a ``session/title`` event)."""
        ...

    async def fork(self, session_id: str, at_event_id: int) -> SessionHeader:
        """Create a child inheriting events ``1..at_event_id``; :class:`TurnConflict` if the
        source has an open turn."""
        ...

    async def inspect(self, session_id: str) -> SessionInspection:
        """Header, ``meta.version`` and whether a turn is open."""
        ...

    async def page(
        self,
        session_id: str,
        *,
        before_seq: int | None = None,
        limit: int = DEFAULT_PAGE_LIMIT,
        through_seq: int | None = None,
    ) -> HistoryPage:
        """Events newest first, below ``before_seq`` and at most ``through_seq``."""
        ...

    async def list(
        self,
        *,
        workspace_id: str | None = None,
        limit: int = DEFAULT_PAGE_LIMIT,
        cursor: str | None = None,
    ) -> SessionList:
        """Sessions, newest first."""
        ...

    async def append(self, session_id: str, data: EventData) -> SessionEvent:
        """Append one event (plugins: ``ext``, ``sandbox/mode``, context messages...)."""
        ...

    async def messages(
        self, session_id: str, *, roles: Collection[Role] | None = None
    ) -> SessionMessages:
        """Every derived message (``deriveMessages``) as of one committed seq; ``roles`` keeps
        only messages of those roles (cheaper: e.g. the chat without each turn's system
        prompt)."""
        ...

    async def recent_messages(
        self, session_id: str, *, roles: Collection[Role], limit: int
    ) -> RecentMessages:
        """The newest ``limit`` derived messages of ``roles`` that have text (oldest first) and
        how many such messages each role has in all, as of one committed seq. Costs what it
        returns, not the session's length (a scan window over a long story)."""
        ...


class WorkspaceController(Protocol):
    """Named root folders (``workspaceController.create`` never creates the folder)."""

    async def create(self, root_path: str) -> Workspace:
        """Register an existing directory; the same root returns the same workspace."""
        ...

    async def list(self) -> Sequence[Workspace]:
        """Every workspace, oldest first."""
        ...
