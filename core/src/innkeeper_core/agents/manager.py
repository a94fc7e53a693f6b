"""The agent manager: implements ``AgentService``, creates agents and runs their initialization."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from typing import Any

from innkeeper_core.agents.agent import Agent, NoFailedTurn, continue_target, new_message_id
from innkeeper_core.agents.contributions import RequestHookChain, SystemPromptSections
from innkeeper_core.agents.hub import LiveHub, Partial
from innkeeper_core.agents.services import TurnServices
from innkeeper_core.plugins.registries import AdapterSlots, HostEventBus
from innkeeper_core.sessions import EventStore, StoreSessionController
from innkeeper_core.tools.commands import CommandRegistry, parse_command
from innkeeper_core.tools.policy import ToolPolicy
from innkeeper_core.tools.runner import ToolRunner
from innkeeper_hostapi.agents import AGENT_CREATED, AgentCreated, Impersonation, PromptReceipt
from innkeeper_hostapi.providers import Provider
from innkeeper_hostapi.sessions import InvalidSessionArgument, PromptMode
from innkeeper_hostapi.slash import CommandInvocation

#: Default most requests (steps) one turn may make: the first, plus tool and steering steps.
DEFAULT_MAX_STEPS = 16

log = logging.getLogger("innkeeper.agents")

#: Longest prompt text accepted (characters); the HTTP body limit bounds it too.
MAX_PROMPT_CHARS = 1_000_000


class AgentInitError(Exception):
    """An ``agent/created`` listener failed; the agent was not created."""


class AgentManager:
    """One agent per live session, created on demand (``resolve_agent``)."""

    def __init__(
        self,
        *,
        store: EventStore,
        sessions: StoreSessionController,
        hub: LiveHub,
        bus: HostEventBus,
        sections: SystemPromptSections,
        request_hooks: RequestHookChain,
        slots: AdapterSlots,
        provider: Provider,
        call_config: Callable[[], dict[str, Any]],
        tools: ToolRunner,
        commands: CommandRegistry,
        parameter_fallback: bool = True,
        max_steps: int = DEFAULT_MAX_STEPS,
        new_id: Callable[[], str] = new_message_id,
    ) -> None:
        # What the manager itself uses (agent creation, commands, retry checks).
        self.store = store
        self.sessions = sessions
        self.hub = hub
        self.bus = bus
        self.policy: ToolPolicy = tools.policy
        self.commands = commands
        self.closing = False
        #: What every agent's turns use, built once and passed to each agent.
        self.services = TurnServices(
            store=store,
            sessions=sessions,
            hub=hub,
            bus=bus,
            sections=sections,
            request_hooks=request_hooks,
            slots=slots,
            provider=provider,
            call_config=call_config,
            parameter_fallback=parameter_fallback,
            tools=tools,
            policy=tools.policy,
            max_steps=max_steps,
            new_id=new_id,
            closing=lambda: self.closing,
        )
        self._agents: dict[str, Agent] = {}
        self._creating: dict[str, asyncio.Lock] = {}

    @property
    def provider(self) -> Provider:
        """The provider turns stream from."""
        return self.services.provider

    @provider.setter
    def provider(self, provider: Provider) -> None:
        """Replace the provider (tests and benchmarks wrap it to record or time requests):
        every agent, live or created later, gets a bundle holding the new one."""
        self.services = dataclasses.replace(self.services, provider=provider)
        for agent in self._agents.values():
            agent.services = self.services

    async def agent(self, session_id: str) -> Agent:
        """The session's agent, created (and initialized) on first use."""
        agent = self._agents.get(session_id)
        if agent is not None:
            return agent
        lock = self._creating.setdefault(session_id, asyncio.Lock())
        async with lock:
            agent = self._agents.get(session_id)
            if agent is not None:
                return agent
            inspection = await self.store.inspect(session_id)
            header = inspection.header
            agent = Agent(self.services, header)
            events = await self.store.read_all(session_id)
            # A fork's turn numbers continue after its parent's last turn (store invariant).
            agent.restore(events, inspection.last_turn)
            self.policy.prime(session_id, events)
            if inspection.open_turn is not None:  # left open by a crash or a restart
                await agent.close_dangling_turn(inspection.open_turn, events)
            parent = header.parent
            try:
                await self.bus.emit(
                    AGENT_CREATED,
                    AgentCreated(
                        session_id=session_id,
                        delegation_depth=header.delegation_depth,
                        parent_session_id=parent.session_id if parent else None,
                        resumed=bool(events),
                    ),
                )
            except Exception as exc:
                raise AgentInitError(f"agent initialization failed: {exc}") from exc
            self._agents[session_id] = agent
            self._creating.pop(session_id, None)
            agent.resume()  # queued input that survived a restart is served, not lost
            return agent

    async def recover(self) -> int:
        """Start-up recovery: close every turn a crash left open, then serve queued input.

        Each such session gets its agent now, not on its next prompt: the dangling turn ends
        ``interrupted`` with code ``HOST_RESTARTED`` (so fork and cancel work at once and the
        claimed prompt is visibly interrupted), and input acknowledged but not yet claimed is
        answered. Returns how many turns were closed.
        """
        closed = 0
        for session_id in await self.store.open_turn_sessions():
            try:
                await self.agent(session_id)
            except AgentInitError:
                # The turn was closed before agent/created ran; only serving waits.
                log.warning("session %s: agent initialization failed after restart", session_id)
            closed += 1
        if closed:
            log.info("closed %d turn(s) left open by the previous process", closed)
        return closed

    # -- AgentService ------------------------------------------------------------------------
    async def prompt(self, session_id: str, text: str, mode: PromptMode = "queue") -> PromptReceipt:
        if mode not in ("queue", "steer"):
            raise InvalidSessionArgument("mode must be 'queue' or 'steer'")
        if not text.strip():
            raise InvalidSessionArgument("prompt text must not be empty")
        if len(text) > MAX_PROMPT_CHARS:
            raise InvalidSessionArgument(f"prompt text is longer than {MAX_PROMPT_CHARS} chars")
        agent = await self.agent(session_id)
        command = parse_command(text)
        entry = self.commands.get(command[0]) if command is not None else None
        if command is not None and entry is not None:
            # Handled before the inbox: no user message, no event
            # (docs/contract/mvu-cards.md#empty-session keeps an empty session empty).
            invocation = CommandInvocation(session_id, entry.name, command[1], agent.running)
            answer = await self.commands.run(entry, invocation)
            self.hub.publish(
                session_id,
                Partial(
                    "command/result",
                    {"name": answer.name, "kind": answer.kind, "text": answer.text},
                ),
            )
            return PromptReceipt(
                session_id=session_id,
                item_id=None,
                splice_seq=None,
                mode=mode,
                started_turn=False,
                command=answer,
            )
        return await agent.prompt(text, mode)

    async def cancel(
        self, session_id: str, reason: str | None = None, *, keep_inbox: bool = True
    ) -> bool:
        agent = self._agents.get(session_id)
        if agent is None:
            return False
        if not keep_inbox:
            await agent.drop_queued()
        return agent.interrupt(reason)

    async def retry(self, session_id: str) -> int:
        """Re-run the session's failed last turn without a new user message (see
        :meth:`Agent.retry`); returns the new turn's number.

        A session with no live agent is checked from its log first, so a refused retry starts
        no agent (whose creation listeners may write, e.g. a plugin's default selection)."""
        if session_id not in self._agents:
            read = await self.sessions.conversations.messages(session_id, roles=())
            if read.failed_turn is None:
                raise NoFailedTurn("the last turn did not fail; there is nothing to retry")
        agent = await self.agent(session_id)
        return await agent.retry()

    async def reply(self, session_id: str) -> int:
        """Start a turn that answers without new input (see :meth:`Agent.reply`)."""
        agent = await self.agent(session_id)
        return await agent.reply()

    async def continue_reply(self, session_id: str) -> int:
        """Start a ``continue`` turn (see :meth:`Agent.continue_reply`). Like :meth:`retry`, a
        session with no live agent is checked from its log first."""
        if session_id not in self._agents:
            await continue_target(self.sessions.conversations, session_id)
        agent = await self.agent(session_id)
        return await agent.continue_reply()

    async def impersonate(self, session_id: str) -> Impersonation:
        """Run an ``impersonate`` turn and return its text (see :meth:`Agent.impersonate`)."""
        agent = await self.agent(session_id)
        return await agent.impersonate()

    async def cancel_queued(self, session_id: str, item_id: str) -> bool:
        agent = await self.agent(session_id)
        return await agent.cancel_queued(item_id)

    async def resolve_agent(self, session_id: str) -> None:
        await self.agent(session_id)

    def is_running(self, session_id: str) -> bool:
        agent = self._agents.get(session_id)
        return agent is not None and agent.running

    async def wait_idle(self, session_id: str) -> None:
        agent = self._agents.get(session_id)
        if agent is not None:
            await agent.wait_idle()

    async def wait_all_idle(self) -> None:
        """Wait until no live agent is running a turn (tests and benchmarks settle with it)."""
        while running := [a for a in self._agents.values() if a.running]:
            await asyncio.gather(*(agent.wait_idle() for agent in running))

    async def shutdown(self) -> None:
        """Interrupt running turns and let each record its ``turn/end``."""
        self.closing = True
        await asyncio.gather(*(agent.stop() for agent in self._agents.values()))
        self._agents.clear()
