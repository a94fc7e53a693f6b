"""RP mode of a session: the ``selection.rp`` overlay, lineage, pending intents, the read-only
pin and the risk alert.

`docs/contract/loader.md#rp-overlay` and `docs/prompt-assembly.md#rp-mode`:

- RP state lives in ``selection.rp`` (``active``, ``source``, ``followSuppressed``,
  ``sandboxBefore``). A session is *in RP* when its own ``rp.active`` is set, when an "on"
  intent is pending, or when any ancestor (``header.parent``, forks and delegated agents) is.
- A change requested while the session's turn is open is a *pending intent*, committed at the
  next ``agent/pre-step``; asking for the committed state again cancels it.
- Follow character (``ui-settings.rpFollowCharacter``, on by default): binding a card enters RP
  (source ``character-follow``), a top-level session with a card enters it when its agent is
  created unless ``followSuppressed`` (RP was turned off by hand); unbinding always leaves RP.
- Entering RP remembers the session's sandbox mode in ``sandboxBefore`` and appends
  ``sandbox/mode {mode: "read-only"}`` through the host's tool policy (for a session without
  events, when its agent is created); every pre-step of a session in RP pins ``read-only``
  again (so a loosened mode never reaches a tool call); leaving restores ``sandboxBefore``.
- A blocked tool call records one alert on the topmost RP session of the lineage (kept until
  ``DELETE /rp-alert`` consumes it) and cancels the turn with the reason
  ``rp-high-risk-block``, keeping queued input.

- A ``sandbox/mode`` event that loosens a session in RP (any writer; the host's
  ``session/events-committed``) is followed at once by ``read-only`` again.

Pending intents and alerts are kept in ``rp-state.json`` (:mod:`.durable`), so a restart keeps
them: an intent queued in a turn the restart interrupted is committed when the session's agent
is created again (the first boundary after the restart).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any, Final, Literal

import msgspec

from innkeeper_hostapi import PluginContext
from innkeeper_hostapi.agents import AGENTS, SESSIONS, AgentCreated, PreStep, SessionEventsCommitted
from innkeeper_hostapi.sessions import SandboxMode, SessionNotFound
from innkeeper_hostapi.tools import TOOL_POLICY, TOOLS, ToolInvocation
from innkeeper_tavern.state.session_bindings.lifecycle import MAX_ANCESTOR_WALK, inherited_selection
from innkeeper_tavern.state.session_bindings.model import (
    RpSource,
    RpState,
    Selection,
    valid_session_id,
)
from innkeeper_tavern.state.session_bindings.store import SessionSelectionStore

from .durable import RpAlert, RpDurableState, RpStateFull, RpStateWriteFailed
from .guard import RP_BLOCK_CANCEL_REASON, blocked_reason

__all__ = ["RpAlert", "RpController", "RpInherited", "RpOutcome", "RpStateFull"]

RpOutcome = Literal["committed", "queued", "cancelled", "noop"]
READ_ONLY: Final = "read-only"


class RpInherited(Exception):
    """RP cannot be left here: an ancestor session is in RP (leave it there)."""

    def __init__(self, ancestor: str) -> None:
        super().__init__(f"RP is inherited from session {ancestor}; leave RP there")
        self.ancestor = ancestor


class RpController:
    """RP state of every session, over the session-selection store."""

    def __init__(
        self,
        ctx: PluginContext,
        selections: SessionSelectionStore,
        follow_character: Callable[[], bool],
        state: RpDurableState,
        *,
        clock: Callable[[], float] = time.time,
        new_id: Callable[[], str] = lambda: uuid.uuid4().hex,
    ) -> None:
        self._ctx = ctx
        self._selections = selections
        self._follow = follow_character
        self._clock = clock
        self._new_id = new_id
        #: Pending intents and unconsumed alerts (``rp-state.json``: they survive a restart).
        self._state = state

    # ------------------------------------------------------------------ reads

    async def _parent(self, session_id: str) -> str | None:
        sessions = self._ctx.get_optional(SESSIONS)
        if sessions is None:
            return None
        try:
            parent = (await sessions.inspect(session_id)).header.parent
        except SessionNotFound:
            return None
        return parent.session_id if parent is not None else None

    async def _selection(self, session_id: str) -> Selection:
        stored = self._selections.stored(session_id)
        if stored is not None:
            return stored
        return await inherited_selection(
            self._selections, await self._parent(session_id), self._ctx.get_optional(SESSIONS)
        )

    async def own(self, session_id: str) -> RpState:
        """The session's own committed ``selection.rp`` (what it has or would freeze)."""
        return (await self._selection(session_id)).rp

    def _own_on(self, session_id: str, rp: RpState) -> bool:
        return rp.active or self._state.pending(session_id) is True

    async def lineage_root(self, session_id: str) -> str | None:
        """The topmost session of the lineage (itself included) that is in RP, if any."""
        found: str | None = None
        current: str | None = session_id
        for _ in range(MAX_ANCESTOR_WALK):
            if current is None or not valid_session_id(current):
                break
            if self._own_on(current, await self.own(current)):
                found = current
            current = await self._parent(current)
        return found

    async def active(self, session_id: str) -> bool:
        """Whether the session is in RP (its own state, a pending "on", or an ancestor)."""
        return await self.lineage_root(session_id) is not None

    async def view(self, session_id: str) -> dict[str, Any]:
        """The ``GET /rp-mode`` document (docs/prompt-assembly.md "RP mode")."""
        rp = await self.own(session_id)
        root = await self.lineage_root(session_id)
        inherited = root is not None and root != session_id
        return {
            "sessionId": session_id,
            "active": root is not None,
            "pending": self._state.pending(session_id),
            "followCharacter": self._follow(),
            "source": rp.source,
            "followSuppressed": rp.follow_suppressed,
            "inheritedFrom": root if inherited else None,
        }

    # ---------------------------------------------------------------- changes

    async def request(self, session_id: str, active: bool, source: RpSource) -> RpOutcome:
        """Ask for RP on or off: committed now when no turn runs, else queued for the next
        pre-step (asking for the committed state cancels a queued change)."""
        rp = await self.own(session_id)
        if not active:
            parent = await self._parent(session_id)
            root = await self.lineage_root(parent) if parent is not None else None
            if root is not None:
                raise RpInherited(root)
        agents = self._ctx.get_optional(AGENTS)
        if agents is not None and agents.is_running(session_id):
            if rp.active == active:
                if not self._state.has_pending(session_id):
                    return "noop"
                await self._state.set_pending(session_id, None)
                return "cancelled"
            if self._state.pending(session_id) == active:
                return "noop"
            await self._state.set_pending(session_id, active)
            return "queued"
        return "committed" if await self.commit(session_id, active, source) else "noop"

    async def _has_history(self, session_id: str) -> bool:
        """Whether the session has events: a brand-new one gets its read-only event when its
        agent is created (so the session still starts empty, as new-session rules expect)."""
        sessions = self._ctx.get_optional(SESSIONS)
        if sessions is None:
            return False
        try:
            return (await sessions.inspect(session_id)).last_seq > 0
        except SessionNotFound:
            return False

    async def _pin(self, session_id: str) -> None:
        """Append ``sandbox/mode read-only`` unless the session's mode already is."""
        policy = self._ctx.get(TOOL_POLICY)
        if (await policy.effective(session_id)).sandbox_mode != READ_ONLY:
            await policy.set(session_id, sandbox_mode=READ_ONLY)

    async def commit(self, session_id: str, active: bool, source: RpSource) -> bool:
        """Write the change now (``False`` when it already held). Entering remembers the mode
        and pins read-only (for a session without events, at its agent's creation); leaving
        restores the remembered mode."""
        rp = await self.own(session_id)
        if rp.active == active:
            await self._state.set_pending(session_id, None)
            return False
        policy = self._ctx.get(TOOL_POLICY)
        current = (await policy.effective(session_id)).sandbox_mode
        if active:
            new = RpState(active=True, source=source, sandbox_before=current)
        else:
            # Leaving by command keeps the bound card from re-entering RP by following it;
            # leaving because the card was unbound (source ``character-follow``) clears that.
            new = RpState(follow_suppressed=source == "command")
        base = await self._selection(session_id)
        await self._selections.update(
            session_id, lambda s: msgspec.structs.replace(s, rp=new), base=base, rp_only=True
        )
        if active:
            if await self._has_history(session_id):
                await self._pin(session_id)
        elif rp.sandbox_before is not None and rp.sandbox_before != current:
            await policy.set(session_id, sandbox_mode=rp.sandbox_before)
        await self._state.set_pending(session_id, None)
        self._ctx.logger.info("session %s: RP %s", session_id, "on" if active else "off")
        return True

    async def follow_binding(self, session_id: str, previous: str | None, card: str | None) -> None:
        """Follow an explicit card binding (``POST /character-selection``, never while a turn
        runs): unbinding always leaves RP (and clears ``followSuppressed``); binding another
        card enters RP with source ``character-follow`` when ``rpFollowCharacter`` is on."""
        if previous == card or not valid_session_id(session_id):
            return
        rp = await self.own(session_id)
        if card is None:
            if rp.active or self._state.has_pending(session_id):
                await self.commit(session_id, False, "character-follow")
            elif rp.follow_suppressed:
                base = await self._selection(session_id)
                await self._selections.update(
                    session_id,
                    lambda s: msgspec.structs.replace(s, rp=RpState()),
                    base=base,
                    rp_only=True,
                )
            return
        if not rp.active and self._follow():
            await self.commit(session_id, True, "character-follow")

    async def _follows_character(self, event: AgentCreated) -> bool:
        """Whether a new agent's session enters RP by following its bound card: a top-level
        session with a card, ``rpFollowCharacter`` on and RP not turned off for it by hand."""
        if event.delegation_depth > 0 or not self._follow():
            return False
        selection = await self._selection(event.session_id)
        return selection.character_card_id is not None and not selection.rp.follow_suppressed

    # --------------------------------------------------------------- the host

    async def on_agent_created(self, event: AgentCreated) -> None:
        """Initialize RP before the agent serves a request: a session of an RP lineage commits
        RP itself (delegated agents, forks), a session bound to a card follows it, and the
        read-only mode is in place. Failures propagate (the host then refuses the agent)."""
        if not valid_session_id(event.session_id):
            return
        intent = self._state.pending(event.session_id)
        if intent is not None:
            # Queued during a turn the previous process did not finish: no turn runs now,
            # so this is the next boundary.
            await self.commit(event.session_id, intent, "command")
        root = await self.lineage_root(event.session_id)
        if root is None:
            if await self._follows_character(event):
                await self.commit(event.session_id, True, "character-follow")
                await self._pin(event.session_id)
            return
        rp = await self.own(event.session_id)
        if not rp.active:
            source = (await self.own(root)).source or "command"
            await self.commit(event.session_id, True, source)
        await self._pin(event.session_id)

    async def on_pre_step(self, notice: PreStep) -> None:
        """Commit a pending intent, then pin read-only while the session is in RP."""
        session_id = notice.session_id
        if not valid_session_id(session_id):
            return
        intent = self._state.pending(session_id)
        if intent is not None:
            await self.commit(session_id, intent, "command")
        if await self.active(session_id):
            notice.pin_sandbox(READ_ONLY)

    async def on_events(self, commit: SessionEventsCommitted) -> None:
        """``session/events-committed``: a ``sandbox/mode`` event that loosens a session in RP
        is followed at once by ``read-only`` again (whoever wrote it: a client, a plugin)."""
        if not valid_session_id(commit.session_id):
            return
        loosened = any(
            isinstance(e.data, SandboxMode) and e.data.mode != READ_ONLY for e in commit.events
        )
        if loosened and await self.active(commit.session_id):
            await self._pin(commit.session_id)

    async def guard(self, call: ToolInvocation) -> str | None:
        """The high-risk tool guard: block, alert once on the lineage's top, cancel the turn."""
        if not valid_session_id(call.session_id):
            return None
        root = await self.lineage_root(call.session_id)
        if root is None:
            return None
        risk = next((t.risk for t in self._ctx.get(TOOLS).list() if t.name == call.name), None)
        reason = blocked_reason(call.name, call.arguments, risk)
        if reason is None:
            return None
        alert = RpAlert(
            id=self._new_id(),
            session_id=root,
            origin_session_id=call.session_id,
            turn=call.turn,
            tool=call.name,
            reason=reason,
            created_at=int(self._clock() * 1000),
        )
        try:
            await self._state.add_alert(alert)
        except (RpStateWriteFailed, RpStateFull) as exc:  # the call stays blocked either way
            self._ctx.logger.error("session %s: RP alert not saved: %s", root, exc)
        self._ctx.logger.info("session %s: RP blocked tool %s", call.session_id, call.name)
        await self._ctx.get(AGENTS).cancel(call.session_id, RP_BLOCK_CANCEL_REASON, keep_inbox=True)
        return reason

    # ----------------------------------------------------------------- alerts

    def alert(self, session_id: str) -> RpAlert | None:
        """The session's unconsumed alert (reading never consumes it)."""
        return self._state.alert(session_id)

    async def consume(self, session_id: str, alert_id: str | None) -> bool:
        """Consume the alert (only the one named, when ``alert_id`` is given)."""
        return await self._state.consume(session_id, alert_id)
