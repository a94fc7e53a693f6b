r"""Agents and turns, as plugins see them: services, hooks and events.

A live session has one agent. Input reaches it through ``AGENTS.prompt`` (queued or steering);
every inbox change is first recorded as a durable ``agent/inbox/spliced`` event. A turn runs::

    turn/start → claim the queued batch → system assembly (SYSTEM_PROMPT sections, by order)
      → agent/pre-step (PRE_STEP listeners; may pin the sandbox mode)
      → request (REQUEST_HOOKS adjust the call config, by order) → provider stream
      → assistant/message {toolCalls?} → tool/result per call (then another step)
      → turn/end {completed | interrupted | error}

A step is one request. A reply that calls tools is followed by the calls' results and another
step (claiming steering input, re-assembling the system prompt, ``agent/pre-step``), up to the
host's per-turn step limit; steering input also adds a step.

Plugins take part through:

- :data:`SYSTEM_PROMPT` — ``section(ctx, name, order, render)`` contributes a section of the
  system prompt of every turn (or, returning :class:`SectionPart`\ s, several named ones);
- :data:`REQUEST_HOOKS` — ``adjust(ctx, name, order, hook)`` edits the call config of a request;
- :data:`AGENT_CREATED` — serial, awaited listeners that finish before the agent serves its
  first request; a failing listener fails the agent's creation;
- :data:`REQUEST_ERROR` — after an explicit invalid-parameter rejection a listener may ask for
  one retry without that parameter (``notice.retry_without(name)``);
- :data:`PRE_STEP` — serial, awaited listeners after each step's claim and system assembly,
  before its request; a listener may pin the step's sandbox mode (``notice.pin_sandbox``);
- :data:`TURN_ENDED` — published after every ``turn/end``;
- :data:`SESSION_EVENTS_COMMITTED` — published after every commit that appended events to a
  session (any event type, any writer), in commit order;
- :data:`REQUEST_PROJECTOR` — one adapter that may rewrite the array actually sent (recorded
  durably as ``request/assembly``).

Both registration methods take the plugin's ``ctx`` so the registration is disposed with the
plugin; they also return the :class:`~innkeeper_hostapi.Registration` for early removal.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

import msgspec

from .keys import AdapterSlot, EventKey, ServiceKey
from .providers import CallParams, ChatMessage, Provider
from .sampler import PARAMETER_FIELDS, ParamName, SamplerFields
from .sessions import (
    InboxItem,
    PromptMode,
    SessionController,
    SessionEvent,
    TurnKind,
    WorkspaceController,
)
from .slash import CommandAnswer
from .tools import SandboxModeName, stricter

if TYPE_CHECKING:
    from .context import PluginContext
    from .registration import Registration


@dataclass(frozen=True, slots=True)
class TurnContext:
    """What section renderers and request hooks know about the turn being assembled."""

    session_id: str
    turn: int
    #: 0 for a top-level session, >0 for a delegated (sub-agent) session.
    delegation_depth: int
    #: The queued input this turn claimed (empty for a steering-only step).
    claimed: tuple[InboxItem, ...]
    #: Seq of the durable claim event, the claim's identity; ``None`` if nothing was claimed.
    claim_seq: int | None
    #: 1 for the turn's first request; steering input can add further steps.
    step: int = 1
    #: What the turn asks for (docs/sessions.md "Turn kinds"); ``continue`` and ``impersonate``
    #: turns claim no input and run one step without tools.
    kind: TurnKind = "normal"
    #: For a ``continue`` turn: the text of the assistant message being extended.
    continued: str = ""


@dataclass(frozen=True, slots=True)
class SectionPart:
    """One named section of a renderer's output, when a renderer contributes several: the host
    places each non-empty part as a section of its own, in order, at the registered section's
    position, and records it under ``name`` (``system/message.sections``). Names need not be
    registered; they should start with the plugin's prefix (e.g. ``pmp-dsh-tavern:part:main``)."""

    name: str
    text: str


#: What a renderer returns: its text, several named :class:`SectionPart`\ s, or ``None``/``""``
#: (an empty sequence) to leave the section out of this turn.
SectionOutput = str | Sequence[SectionPart] | None
#: Renders one section.
SectionRender = Callable[[TurnContext], "Awaitable[SectionOutput] | SectionOutput"]


class SystemPromptService(Protocol):
    """Ordered system-prompt sections contributed by plugins."""

    def section(
        self, ctx: PluginContext, name: str, order: int, render: SectionRender
    ) -> Registration:
        """Add section ``name`` (unique across plugins) at ``order`` (lower comes first)."""
        ...


class CallConfigDraft(SamplerFields, kw_only=True):
    """The call config of one request, editable by request hooks (in hook order): the
    sampling parameters of :class:`~innkeeper_hostapi.sampler.SamplerFields` plus the model,
    ``extras`` and the tools offered.

    ``None`` means "not sent; the provider's default". ``extras`` are provider-specific fields
    sent verbatim (e.g. ``top_p``).
    """

    model: str | None = None
    extras: dict[str, Any] = msgspec.field(default_factory=dict)
    #: Names of the tools offered (default: every registered tool); a hook may remove some.
    tools: list[str] = msgspec.field(default_factory=list)
    #: ``auto`` (default when tools are offered), ``none``, ``required`` or a tool name.
    tool_choice: str | None = None

    def to_params(self) -> CallParams:
        values = {attr: getattr(self, attr) for attr in PARAMETER_FIELDS.values()}
        return CallParams(**values, extras=dict(self.extras))


RequestHook = Callable[[TurnContext, CallConfigDraft], "Awaitable[None] | None"]

#: Annotates a page of the host's session list: session id → a small JSON object (e.g. the
#: Tavern's bound character), shown under the annotator's name in each row's ``annotations``.
SessionAnnotator = Callable[[Sequence[str]], "Awaitable[Mapping[str, Mapping[str, Any]]]"]


class SessionAnnotations(Protocol):
    """What plugins add to the rows of ``GET /host/api/sessions`` (body-free, small)."""

    def annotate(self, ctx: PluginContext, name: str, annotator: SessionAnnotator) -> Registration:
        """Add ``annotator`` under ``name`` (unique); unloading the plugin removes it."""
        ...


class RequestHooks(Protocol):
    """Ordered call-config hooks."""

    def adjust(self, ctx: PluginContext, name: str, order: int, hook: RequestHook) -> Registration:
        """Run ``hook`` on every request's call config, by ``order`` (lower runs first)."""
        ...


@dataclass(frozen=True, slots=True)
class PromptReceipt:
    """What ``prompt`` did: the inbox item and the durable splice that recorded it, or, for a
    slash command (:mod:`innkeeper_hostapi.slash`), the command's answer and nothing else."""

    session_id: str
    item_id: str | None
    splice_seq: int | None
    mode: PromptMode
    #: True when the input started a turn (the agent was idle).
    started_turn: bool
    command: CommandAnswer | None = None


class AgentService(Protocol):
    """The host's agents: one per live session."""

    async def prompt(self, session_id: str, text: str, mode: PromptMode = "queue") -> PromptReceipt:
        """Deliver user input: ``queue`` waits for the next turn, ``steer`` joins the running one
        at its next step (or starts a turn when idle)."""
        ...

    async def cancel(
        self, session_id: str, reason: str | None = None, *, keep_inbox: bool = True
    ) -> bool:
        """Interrupt the running turn (``turn/end`` reason ``interrupted``, with code
        ``CANCELLED`` and ``message`` = ``reason`` when one is given: short and body-free); a
        running stream or tool call stops at once. ``keep_inbox=False`` also drops every queued
        input (durable ``cancel`` splices); by default it stays and is served next. ``False``
        when no turn is running."""
        ...

    async def retry(self, session_id: str) -> int:
        """Re-run the session's failed last turn without a new user message; returns the new
        turn's number. Raises a ``SessionError`` (code ``no-failed-turn`` / ``turn-open``) when
        there is nothing to retry or a turn runs."""
        ...

    async def reply(self, session_id: str) -> int:
        """Start a normal turn over the durable history that claims no input (the model
        answers again without a new user message: a group's next speaker); returns the turn's
        number. A ``SessionError`` (``turn-open``) while a turn runs or input is queued."""
        ...

    async def continue_reply(self, session_id: str) -> int:
        """Start a ``continue`` turn that extends the session's last assistant message (its
        text is appended as an ``assistant/message`` with ``continues`` = that message's id);
        returns the turn's number. A ``SessionError`` (``nothing-to-continue`` /
        ``turn-open``) when the last message with text is not an assistant reply or a turn
        runs."""
        ...

    async def impersonate(self, session_id: str) -> Impersonation:
        """Run an ``impersonate`` turn and wait for it: the model writes the player's next
        message, streamed as ``assistant/partial`` and returned here; nothing is appended to
        the chat (no message event). ``turn-open`` when a turn runs or input is queued."""
        ...

    async def resolve_agent(self, session_id: str) -> None:
        """Restore a cold session's agent (its ``agent/created`` listeners run once)."""
        ...

    def is_running(self, session_id: str) -> bool:
        """Whether the session's agent is running a turn now."""
        ...

    async def wait_idle(self, session_id: str) -> None:
        """Wait until the session's agent has no turn running and nothing queued."""
        ...


@dataclass(frozen=True, slots=True)
class Impersonation:
    """What an ``impersonate`` turn wrote: the text (partial when it was interrupted) and how
    the turn ended (``completed``, ``interrupted`` or ``error`` with ``code``/``message``)."""

    turn: int
    text: str
    reason: Literal["completed", "interrupted", "error"]
    code: str | None = None
    message: str | None = None


@dataclass(frozen=True, slots=True)
class AgentCreated:
    """An agent was created for a session, before it serves any request."""

    session_id: str
    delegation_depth: int
    #: Set for a fork: the parent session and the event it was forked at.
    parent_session_id: str | None
    #: True when a session that existed before (cold, or after a restart) was resumed.
    resumed: bool


@dataclass
class RequestErrorNotice:
    """A provider attempt failed. Listeners may ask for a retry without one parameter.

    Only an explicit ``invalid-parameter`` rejection, before any output and while not aborted,
    is retryable, once per parameter and at most four times per request; authentication, quota
    and network errors never are (``docs/contract/loader.md#parameter-fallback``).
    """

    session_id: str
    turn: int
    attempt: int
    kind: str
    message: str
    parameter: ParamName | None
    status: int | None
    #: The parameters this attempt sent.
    params: CallParams
    retryable: bool
    retry: set[ParamName] = field(default_factory=set)

    def retry_without(self, parameter: ParamName) -> bool:
        """Ask for one more attempt with ``parameter`` omitted; ``False`` if not allowed."""
        if not self.retryable or parameter != self.parameter:
            return False
        self.retry.add(parameter)
        return True


@dataclass
class PreStep:
    """A step is about to send its request: its input is claimed and its system prompt
    assembled (``agent/pre-step``)."""

    session_id: str
    turn: int
    step: int
    delegation_depth: int
    claim_seq: int | None
    #: The strictest sandbox mode a listener pinned for this step, if any.
    pinned: SandboxModeName | None = None

    def pin_sandbox(self, mode: SandboxModeName) -> None:
        """Hold the step's calls to ``mode`` (the strictest pin wins). The host records it as
        a ``sandbox/mode`` event when the session's mode differs."""
        self.pinned = mode if self.pinned is None else stricter(mode, self.pinned)


@dataclass(frozen=True, slots=True)
class TurnEnded:
    """A turn ended (published after the durable ``turn/end``)."""

    session_id: str
    turn: int
    reason: Literal["completed", "interrupted", "error"]
    #: Seq of the turn's last assistant message, if it produced one.
    assistant_seq: int | None


@dataclass(frozen=True, slots=True)
class SessionEventsCommitted:
    """Events one commit appended to a session, published once they are durable.

    Delivery is asynchronous and in commit order: the writer does not wait for listeners, so
    other events may be committed before a listener runs (read the session's current state
    rather than trusting the events to be the latest). A failing listener is logged; the
    others still run. Events committed while the host stops may not be delivered.
    """

    session_id: str
    #: The appended events, oldest first (at least one).
    events: tuple[SessionEvent, ...]


class RequestProjector(Protocol):
    """Rewrites the message array of a request before it is sent (advanced placement).

    At most one projector is installed (the ``REQUEST_PROJECTOR`` adapter slot). It receives
    the messages the host built — the turn's system prompt, then history — and returns the array
    to send, or ``None`` to send them unchanged. It may insert request-only messages (lore or
    preset prompts at a depth, author's-note positions) and reorder; it must not invent history.
    Messages returned unchanged (the same objects) are recorded as references to durable
    events; new ones are recorded inline in the ``request/assembly`` event.
    """

    @property
    def name(self) -> str:
        """Recorded as ``projector`` in ``request/assembly``."""
        ...

    async def project(
        self, turn: TurnContext, messages: tuple[ChatMessage, ...]
    ) -> tuple[ChatMessage, ...] | None:
        """The array to send, or ``None`` to leave it as built."""
        ...


SESSION_ANNOTATIONS: ServiceKey[SessionAnnotations] = ServiceKey("host.session_annotations")
SYSTEM_PROMPT: ServiceKey[SystemPromptService] = ServiceKey("host.system_prompt")
REQUEST_HOOKS: ServiceKey[RequestHooks] = ServiceKey("host.request_hooks")
AGENTS: ServiceKey[AgentService] = ServiceKey("host.agents")
SESSIONS: ServiceKey[SessionController] = ServiceKey("host.sessions")
WORKSPACES: ServiceKey[WorkspaceController] = ServiceKey("host.workspaces")
PROVIDER: ServiceKey[Provider] = ServiceKey("host.provider")

#: The single request projector (claim it with ``ctx.claim_slot``).
REQUEST_PROJECTOR: AdapterSlot[RequestProjector] = AdapterSlot("host.request_projector")

AGENT_CREATED: EventKey[AgentCreated] = EventKey("agent/created", AgentCreated)
REQUEST_ERROR: EventKey[RequestErrorNotice] = EventKey("request/error", RequestErrorNotice)
TURN_ENDED: EventKey[TurnEnded] = EventKey("turn/ended", TurnEnded)
PRE_STEP: EventKey[PreStep] = EventKey("agent/pre-step", PreStep)
SESSION_EVENTS_COMMITTED: EventKey[SessionEventsCommitted] = EventKey(
    "session/events-committed", SessionEventsCommitted
)
