"""The services a turn uses, as one frozen bundle the agent manager builds and passes in.

An :class:`~innkeeper_core.agents.agent.Agent` reads nothing else from outside: no service
locator, no back reference to its manager. Plugins come and go while agents live (hot reload,
unload), so the bundle holds the host-owned *registries* a plugin registers into, never what a
plugin registered: the system prompt sections, the request hooks, the adapter slots (the
request projector), the event bus and the tool registry behind the runner are each asked at the
moment a turn needs them, so a turn after an unload sees the host as the unload left it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from innkeeper_core.agents.contributions import RequestHookChain, SystemPromptSections
from innkeeper_core.agents.hub import LiveHub
from innkeeper_core.plugins.registries import AdapterSlots, HostEventBus
from innkeeper_core.sessions import EventStore, StoreSessionController
from innkeeper_core.tools.policy import ToolPolicy
from innkeeper_core.tools.runner import ToolRunner
from innkeeper_hostapi.providers import Provider

__all__ = ["TurnServices"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnServices:
    """Exactly what a session's turns use. Built once by the agent manager; every agent of the
    host shares it (the manager swaps in a new bundle when its provider is replaced)."""

    #: The event log: transactions of several events (claims, tool results).
    store: EventStore
    #: Single appends and the derived conversation (history, the failed last turn).
    sessions: StoreSessionController
    #: Live, non-durable fragments to session subscribers (partial text, tool progress).
    hub: LiveHub
    #: ``agent/pre-step`` listeners, ``turn/ended`` and ``request/error`` notices.
    bus: HostEventBus
    #: The ordered system prompt sections plugins contribute (rendered per step).
    sections: SystemPromptSections
    #: The ordered call-config hooks plugins contribute (applied per request).
    request_hooks: RequestHookChain
    #: Adapter slots; the request projector is looked up per request.
    slots: AdapterSlots
    #: The model provider requests stream from.
    provider: Provider
    #: The host's default call config of every request, before the hooks adjust it.
    call_config: Callable[[], dict[str, Any]]
    #: Whether a hook may ask for a retry without a rejected parameter.
    parameter_fallback: bool
    #: Runs tool calls (its registry is the tools offered, asked per request).
    tools: ToolRunner
    #: The sandbox and approval policy (the runner's); a step's pin is recorded against it.
    policy: ToolPolicy
    #: Most requests (steps) one turn may make.
    max_steps: int
    #: Message and inbox item ids.
    new_id: Callable[[], str]
    #: Whether the host is shutting down: a finished loop then starts no new one.
    closing: Callable[[], bool]
