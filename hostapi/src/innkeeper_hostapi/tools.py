"""Agent tools, as plugins see them: registration, calls, guards, sandbox and approval policy.

The host executes tools for its agents (``docs/contract/loader.md#ownership``: the
host owns "tool execution"). A plugin registers a tool with ``ctx.add_tool(...)``; the host
offers every registered tool to the model, and when the model calls one, runs it::

    assistant/message {toolCalls}
      → parse the arguments (JSON) and validate them against the tool's JSON Schema
      → guards (TOOLS.guard): the first that returns a reason blocks the call
      → policy: the tool's risk against the session's sandbox mode and approval policy
        (a call that needs a person stays pending until someone answers, or it times out)
      → the handler → tool/result (durable; the model sees it in the next step's request)

Values (``docs/sessions.md`` "Tools, sandbox and approval" says the same, with examples):

* **risk** of a tool and **sandbox mode** of a session share three ordered levels:
  ``read-only`` < ``workspace-write`` < ``danger-full-access``. A call is *within the mode*
  when its tool's risk is not above the mode.
* **approval policy**: ``never`` (nobody is asked: calls within the mode run, the others are
  refused), ``on-request`` (calls within the mode run; a call above the mode waits for a
  person), ``untrusted`` (only ``read-only`` tools run unasked; every other call waits for a
  person). ``on-request`` and ``untrusted`` can need a person; ``never`` never does.
* **permission preset**: a named pair of mode and policy — ``read-only``
  (read-only, on-request), ``auto`` (workspace-write, on-request), ``full-access``
  (danger-full-access, never) — or ``custom`` when the two were set separately.
* **decision** on a pending call: ``approve`` (run it this once) or ``deny`` (refuse it).

This module imports only the standard library.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol, TypeAlias

from .keys import ServiceKey

if TYPE_CHECKING:
    from .context import PluginContext
    from .registration import Registration

ToolRisk: TypeAlias = Literal["read-only", "workspace-write", "danger-full-access"]
"""What a tool may touch: nothing outside the conversation, the session's workspace, anything."""

SandboxModeName: TypeAlias = ToolRisk
"""The sandbox mode of a session (the ``mode`` of a ``sandbox/mode`` event)."""

ApprovalPolicyName: TypeAlias = Literal["untrusted", "on-request", "never"]
"""The approval policy of a session (the ``policy`` of an ``approval/policy`` event)."""

PermissionPresetName: TypeAlias = Literal["read-only", "auto", "full-access", "custom"]
"""The permission preset of a session (the ``preset`` of a ``permission/preset`` event)."""

ApprovalDecision: TypeAlias = Literal["approve", "deny"]
"""A person's answer to a pending call (``POST /host/api/sessions/:id/approvals/:callId``)."""

#: The three levels, least to most powerful (risk and sandbox mode share them).
SANDBOX_MODES: Final[tuple[SandboxModeName, ...]] = (
    "read-only",
    "workspace-write",
    "danger-full-access",
)
APPROVAL_POLICIES: Final[tuple[ApprovalPolicyName, ...]] = ("untrusted", "on-request", "never")
#: Policies under which a call can wait for a person.
POLICIES_NEEDING_A_PERSON: Final[frozenset[ApprovalPolicyName]] = frozenset(
    {"untrusted", "on-request"}
)
#: Each named preset's sandbox mode and approval policy (``custom`` has none).
PERMISSION_PRESETS: Final[Mapping[str, tuple[SandboxModeName, ApprovalPolicyName]]] = {
    "read-only": ("read-only", "on-request"),
    "auto": ("workspace-write", "on-request"),
    "full-access": ("danger-full-access", "never"),
}
PRESET_NAMES: Final[tuple[PermissionPresetName, ...]] = (
    "read-only",
    "auto",
    "full-access",
    "custom",
)
APPROVAL_DECISIONS: Final[tuple[ApprovalDecision, ...]] = ("approve", "deny")

#: Tool names follow the OpenAI function-name rule: 1-64 of ``[A-Za-z0-9_-]``.
TOOL_NAME_PATTERN: Final = r"^[A-Za-z0-9_-]{1,64}$"
MAX_TOOL_DESCRIPTION_CHARS: Final = 4096
#: Largest JSON Schema of a tool's parameters (UTF-8 JSON bytes).
MAX_TOOL_SCHEMA_BYTES: Final = 64 * 1024
#: Most tools registered at once (OpenAI accepts at most 128 functions per request).
MAX_TOOLS: Final = 128
#: Largest argument text of one call accepted for parsing (bytes).
MAX_TOOL_ARGUMENTS_BYTES: Final = 256 * 1024
#: Longest result text kept (characters); the rest is cut and the cut is said.
MAX_TOOL_RESULT_CHARS: Final = 64 * 1024
#: Longest error or refusal text kept (characters).
MAX_TOOL_ERROR_CHARS: Final = 2000
#: Longest guard reason kept (characters).
MAX_GUARD_REASON_CHARS: Final = 1000


def mode_rank(mode: SandboxModeName) -> int:
    """0, 1 or 2: the level of a sandbox mode or a tool risk."""
    return SANDBOX_MODES.index(mode)


def stricter(a: SandboxModeName, b: SandboxModeName) -> SandboxModeName:
    """The less powerful of two modes."""
    return a if mode_rank(a) <= mode_rank(b) else b


class ToolError(Exception):
    """Raise from a tool handler to answer the model with an error result (``isError``).

    The message is what the model reads; keep it short and body-free.
    """


@dataclass(frozen=True, slots=True)
class ToolInvocation:
    """One call of a tool, as its handler and the guards see it."""

    session_id: str
    turn: int
    step: int
    call_id: str
    name: str
    #: The parsed, schema-valid arguments.
    arguments: Mapping[str, Any]
    #: The sandbox mode the call is checked against (the session's, or the step's pin).
    sandbox_mode: SandboxModeName
    delegation_depth: int = 0
    #: The workspace the session belongs to, if any.
    workspace_id: str | None = None


ToolHandler = Callable[[ToolInvocation], Coroutine[Any, Any, Any]]
"""``async def handler(call) -> str | JSON``; raise :class:`ToolError` for an error result."""

ToolGuard = Callable[[ToolInvocation], "Awaitable[str | None] | str | None"]
"""Inspect a call before it runs: return a reason to block it, ``None`` to let it through."""


@dataclass(frozen=True, slots=True)
class ToolInfo:
    """A registered tool (``GET /host/api/tools`` lists these)."""

    name: str
    owner: str
    description: str
    parameters: Mapping[str, Any]
    risk: ToolRisk


@dataclass(frozen=True, slots=True)
class EffectivePolicy:
    """A session's tool policy now: the last event of each kind, else the host default."""

    preset: PermissionPresetName
    sandbox_mode: SandboxModeName
    approval_policy: ApprovalPolicyName


@dataclass(frozen=True, slots=True)
class PendingApproval:
    """A call waiting for a person's decision."""

    session_id: str
    call_id: str
    name: str
    turn: int
    risk: ToolRisk
    sandbox_mode: SandboxModeName
    approval_policy: ApprovalPolicyName
    #: Epoch ms after which the call is refused unanswered.
    expires_at: int


class ToolService(Protocol):
    """The host's tools (``TOOLS``). Tools themselves are added with ``ctx.add_tool``."""

    def list(self) -> tuple[ToolInfo, ...]:
        """Every registered tool, by name."""
        ...

    def guard(self, ctx: PluginContext, name: str, order: int, guard: ToolGuard) -> Registration:
        """Install ``guard`` (unique ``name``), run before every call by ``order``.

        The first guard that returns a reason blocks the call: the handler never runs and the
        model reads ``"blocked: <reason>"`` as the result. To also stop the turn (keeping queued
        input), call ``AGENTS.cancel(session_id, reason=..., keep_inbox=True)`` from the guard.
        """
        ...


class ToolPolicyService(Protocol):
    """Sandbox mode, approval policy and pending approvals of sessions (``TOOL_POLICY``)."""

    async def effective(self, session_id: str) -> EffectivePolicy:
        """The session's policy now (defaults from the host configuration)."""
        ...

    async def set(
        self,
        session_id: str,
        *,
        preset: PermissionPresetName | None = None,
        sandbox_mode: SandboxModeName | None = None,
        approval_policy: ApprovalPolicyName | None = None,
    ) -> EffectivePolicy:
        """Record a change as bare ``permission/preset``/``sandbox/mode``/``approval/policy``
        events (one transaction). A named preset also sets its mode and policy; setting only
        a mode or a policy records preset ``custom``. Unknown values raise ``ValueError``."""
        ...

    def pending(self, session_id: str) -> tuple[PendingApproval, ...]:
        """The session's calls waiting for a person."""
        ...

    def decide(self, session_id: str, call_id: str, decision: ApprovalDecision) -> bool:
        """Answer a pending call; ``False`` when no such call is pending."""
        ...


TOOLS: ServiceKey[ToolService] = ServiceKey("host.tools")
TOOL_POLICY: ServiceKey[ToolPolicyService] = ServiceKey("host.tool_policy")
