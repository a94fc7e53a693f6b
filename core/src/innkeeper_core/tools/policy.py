"""Sandbox mode, approval policy and permission preset of sessions, and pending approvals.

A session's policy is the last ``permission/preset``, ``sandbox/mode`` and
``approval/policy`` event of its log (inherited ones included), each falling back to the host
default from the ``[tools]`` configuration. Nothing is written when a session is created, so
an empty session stays empty (``docs/contract/mvu-cards.md#empty-session`` allows
only these three event types, with their bare fields, besides a few others). A value the host
does not know (written by a newer host, or by hand) is read as the most careful one:
``read-only`` for a mode, ``untrusted`` for a policy.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Final, Literal

from innkeeper_core.agents.hub import LiveHub, Partial
from innkeeper_core.sessions import EventStore
from innkeeper_hostapi.sessions import (
    ApprovalPolicy,
    EventData,
    PermissionPreset,
    SandboxMode,
    SessionEvent,
)
from innkeeper_hostapi.tools import (
    APPROVAL_DECISIONS,
    APPROVAL_POLICIES,
    PERMISSION_PRESETS,
    PRESET_NAMES,
    SANDBOX_MODES,
    ApprovalDecision,
    ApprovalPolicyName,
    EffectivePolicy,
    PendingApproval,
    PermissionPresetName,
    SandboxModeName,
    ToolRisk,
    mode_rank,
)

__all__ = ["MAX_CACHED_POLICIES", "PolicyDefaults", "ToolPolicy", "Verdict", "decide"]

#: Sessions whose policy is kept in memory (others are read again from their log).
MAX_CACHED_POLICIES: Final = 4096
#: Most calls waiting for a person in one session.
MAX_PENDING_PER_SESSION: Final = 64

Verdict = Literal["run", "ask", "refuse"]


def decide(risk: ToolRisk, mode: SandboxModeName, policy: ApprovalPolicyName) -> Verdict:
    """Whether a call of a ``risk`` tool runs, waits for a person or is refused."""
    within = mode_rank(risk) <= mode_rank(mode)
    if policy == "never":
        return "run" if within else "refuse"
    if policy == "on-request":
        return "run" if within else "ask"
    return "run" if risk == "read-only" else "ask"  # untrusted


@dataclass(frozen=True, slots=True)
class PolicyDefaults:
    """The host's defaults (``[tools]`` in the configuration)."""

    preset: PermissionPresetName = "auto"
    sandbox_mode: SandboxModeName = "workspace-write"
    approval_policy: ApprovalPolicyName = "on-request"
    approval_timeout_s: float = 300.0

    @classmethod
    def from_config(
        cls,
        preset: str,
        sandbox_mode: str | None,
        approval_policy: str | None,
        approval_timeout_s: float,
    ) -> PolicyDefaults:
        """Defaults from a named preset, with the mode or policy overridden if given."""
        if preset not in PRESET_NAMES:
            raise ValueError(f"unknown permission preset {preset!r}")
        if preset == "custom" and (sandbox_mode is None or approval_policy is None):
            raise ValueError("preset 'custom' needs both sandbox_mode and approval_policy")
        base = PERMISSION_PRESETS.get(preset, ("read-only", "untrusted"))
        mode = _mode(sandbox_mode or base[0])
        policy = _policy(approval_policy or base[1])
        label: PermissionPresetName = preset if (mode, policy) == base else "custom"
        return cls(label, mode, policy, approval_timeout_s)


def _mode(value: str) -> SandboxModeName:
    return value if value in SANDBOX_MODES else "read-only"


def _policy(value: str) -> ApprovalPolicyName:
    return value if value in APPROVAL_POLICIES else "untrusted"


@dataclass(frozen=True, slots=True)
class _Recorded:
    """The last value of each policy event in a log (``None``: never written)."""

    preset: str | None = None
    mode: str | None = None
    policy: str | None = None

    def after(self, data: EventData) -> _Recorded:
        if isinstance(data, PermissionPreset):
            return replace(self, preset=data.preset)
        if isinstance(data, SandboxMode):
            return replace(self, mode=data.mode)
        if isinstance(data, ApprovalPolicy):
            return replace(self, policy=data.policy)
        return self


@dataclass(slots=True)
class _Pending:
    info: PendingApproval
    answer: asyncio.Future[ApprovalDecision]


class ToolPolicy:
    """Implements :class:`innkeeper_hostapi.tools.ToolPolicyService`."""

    def __init__(
        self,
        store: EventStore,
        hub: LiveHub,
        defaults: PolicyDefaults,
        clock: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self._store = store
        self._hub = hub
        self.defaults = defaults
        self._clock = clock
        self._cache: OrderedDict[str, _Recorded] = OrderedDict()
        self._pending: dict[str, dict[str, _Pending]] = {}

    # -- the log -------------------------------------------------------------------------------
    def prime(self, session_id: str, events: Sequence[SessionEvent]) -> None:
        """Remember a session's policy from its whole log (the agent reads it anyway)."""
        recorded = _Recorded()
        for event in events:
            recorded = recorded.after(event.data)
        self._remember(session_id, recorded)

    def on_append(self, session_id: str, events: Sequence[SessionEvent]) -> None:
        """Event-store listener: keep cached sessions current."""
        recorded = self._cache.get(session_id)
        if recorded is None:
            return
        for event in events:
            recorded = recorded.after(event.data)
        self._cache[session_id] = recorded

    def _remember(self, session_id: str, recorded: _Recorded) -> None:
        self._cache[session_id] = recorded
        self._cache.move_to_end(session_id)
        while len(self._cache) > MAX_CACHED_POLICIES:
            self._cache.popitem(last=False)

    async def _recorded(self, session_id: str) -> _Recorded:
        recorded = self._cache.get(session_id)
        if recorded is not None:
            self._cache.move_to_end(session_id)
            return recorded
        self.prime(session_id, await self._store.read_all(session_id))
        return self._cache[session_id]

    # -- ToolPolicyService ---------------------------------------------------------------------
    async def effective(self, session_id: str) -> EffectivePolicy:
        recorded = await self._recorded(session_id)
        d = self.defaults
        preset = recorded.preset if recorded.preset is not None else d.preset
        return EffectivePolicy(
            preset=preset if preset in PRESET_NAMES else "custom",
            sandbox_mode=_mode(recorded.mode) if recorded.mode is not None else d.sandbox_mode,
            approval_policy=(
                _policy(recorded.policy) if recorded.policy is not None else d.approval_policy
            ),
        )

    async def set(
        self,
        session_id: str,
        *,
        preset: PermissionPresetName | None = None,
        sandbox_mode: SandboxModeName | None = None,
        approval_policy: ApprovalPolicyName | None = None,
    ) -> EffectivePolicy:
        if preset is not None and preset not in PRESET_NAMES:
            raise ValueError(f"preset must be one of {', '.join(PRESET_NAMES)}")
        if sandbox_mode is not None and sandbox_mode not in SANDBOX_MODES:
            raise ValueError(f"sandboxMode must be one of {', '.join(SANDBOX_MODES)}")
        if approval_policy is not None and approval_policy not in APPROVAL_POLICIES:
            raise ValueError(f"approvalPolicy must be one of {', '.join(APPROVAL_POLICIES)}")
        events: list[EventData] = []
        if preset is not None and preset != "custom":
            mode, policy = PERMISSION_PRESETS[preset]
            if (sandbox_mode or mode, approval_policy or policy) != (mode, policy):
                raise ValueError(f"preset {preset!r} is {mode} with {policy}")
            events = [
                PermissionPreset(preset=preset),
                SandboxMode(mode=mode),
                ApprovalPolicy(policy=policy),
            ]
        else:
            if preset == "custom" or sandbox_mode is not None or approval_policy is not None:
                events.append(PermissionPreset(preset="custom"))
            if sandbox_mode is not None:
                events.append(SandboxMode(mode=sandbox_mode))
            if approval_policy is not None:
                events.append(ApprovalPolicy(policy=approval_policy))
        await self._recorded(session_id)  # cached before the append, so the listener updates it
        if events:
            await self._store.append_many(session_id, events)
        return await self.effective(session_id)

    # -- approvals -----------------------------------------------------------------------------
    def pending(self, session_id: str) -> tuple[PendingApproval, ...]:
        return tuple(p.info for p in self._pending.get(session_id, {}).values())

    def decide(self, session_id: str, call_id: str, decision: ApprovalDecision) -> bool:
        if decision not in APPROVAL_DECISIONS:
            raise ValueError(f"decision must be one of {', '.join(APPROVAL_DECISIONS)}")
        pending = self._pending.get(session_id, {}).get(call_id)
        if pending is None or pending.answer.done():
            return False
        pending.answer.set_result(decision)
        return True

    async def ask(
        self, info: PendingApproval, timeout_s: float
    ) -> ApprovalDecision | Literal["timeout"]:
        """Hold a call until a person answers or ``timeout_s`` passes. The pending call and its
        end are published on the session's live stream (``approval/pending``,
        ``approval/resolved``)."""
        calls = self._pending.setdefault(info.session_id, {})
        if len(calls) >= MAX_PENDING_PER_SESSION or info.call_id in calls:
            return "timeout" if info.call_id not in calls else "deny"
        answer: asyncio.Future[ApprovalDecision] = asyncio.get_running_loop().create_future()
        calls[info.call_id] = _Pending(info, answer)
        self._hub.publish(info.session_id, Partial("approval/pending", describe_pending(info)))
        outcome: ApprovalDecision | Literal["timeout"] = "timeout"
        published = "cancelled"  # the turn was cancelled while the call waited
        try:
            outcome = await asyncio.wait_for(asyncio.shield(answer), timeout_s)
            published = outcome
        except TimeoutError:
            outcome = published = "timeout"
        finally:
            calls.pop(info.call_id, None)
            if not calls:
                self._pending.pop(info.session_id, None)
            self._hub.publish(
                info.session_id,
                Partial(
                    "approval/resolved",
                    {"callId": info.call_id, "turn": info.turn, "outcome": published},
                ),
            )
        return outcome

    def new_pending(
        self,
        session_id: str,
        call_id: str,
        name: str,
        turn: int,
        risk: ToolRisk,
        policy: EffectivePolicy,
        mode: SandboxModeName,
    ) -> PendingApproval:
        return PendingApproval(
            session_id=session_id,
            call_id=call_id,
            name=name,
            turn=turn,
            risk=risk,
            sandbox_mode=mode,
            approval_policy=policy.approval_policy,
            expires_at=self._clock() + int(self.defaults.approval_timeout_s * 1000),
        )


def describe_pending(info: PendingApproval) -> dict[str, object]:
    """The JSON shape of a pending call (SSE ``approval/pending`` and the approvals route)."""
    return {
        "callId": info.call_id,
        "name": info.name,
        "turn": info.turn,
        "risk": info.risk,
        "sandboxMode": info.sandbox_mode,
        "approvalPolicy": info.approval_policy,
        "expiresAt": info.expires_at,
    }
