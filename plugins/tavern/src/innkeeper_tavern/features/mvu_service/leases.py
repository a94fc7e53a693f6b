"""``captureSessionLease(sessionId)``: the session a write or a seed operation is about, held
still until its atomic commit (docs/mvu.md "Session leases").

A lease is a synchronous validity closure. :class:`HostSessionLeases` is the official one: it
restores the session through the host's public ``resolve_agent``, reads its header and last
event once, then binds

- the session service and the agent service it used (the live objects: a reloaded host or a
  replaced service expires it),
- the session's header (its immutable identity, ``created_at`` among it) and a digest of it,
- the session's event generation: the highest committed seq, followed through
  ``session/events-committed`` (any event committed after the capture — a turn, a title, a
  splice — expires it), and whether a turn is running.

The service captures a lease before it enters its transaction queue (capturing awaits host
work, which may itself call into the service) and checks it synchronously after its last await,
right before the atomic commit. Without a lease source, writes and seed operations are denied.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final, Protocol

import msgspec

from innkeeper_hostapi.agents import AgentService, SessionEventsCommitted
from innkeeper_hostapi.sessions import SessionController, SessionHeader, SessionNotFound

__all__ = [
    "LEASE_EXPIRED",
    "LEASE_UNAVAILABLE",
    "HostSessionLeases",
    "LeaseSource",
    "SessionLease",
]

#: The write or seed operation had no lease (no lease source, or the session is unknown).
LEASE_UNAVAILABLE: Final = "MVU_SESSION_LEASE_UNAVAILABLE"
#: The session changed between the capture and the commit; nothing was written.
LEASE_EXPIRED: Final = "MVU_SESSION_LEASE_EXPIRED"


@dataclass(frozen=True, slots=True)
class SessionLease:
    """A captured session: ``valid()`` is the synchronous validity closure."""

    session_id: str
    header: SessionHeader
    #: SHA-256 of the header's canonical JSON.
    digest: str
    #: The session's last committed seq at capture.
    generation: int
    valid: Callable[[], bool]


def header_digest(header: SessionHeader) -> str:
    """The digest a lease binds (the header's canonical JSON)."""
    return hashlib.sha256(msgspec.json.encode(header)).hexdigest()


class HostSessionLeases:
    """Leases over the host's public session and agent services (resolved at call time)."""

    def __init__(
        self,
        sessions: Callable[[], SessionController | None],
        agents: Callable[[], AgentService | None],
    ) -> None:
        self._sessions = sessions
        self._agents = agents
        #: Highest committed seq seen per session (captures and ``session/events-committed``).
        self._seen: dict[str, int] = {}
        self._closed = False

    def close(self) -> None:
        """Expire every lease (the plugin is unloading)."""
        self._closed = True

    async def on_events(self, event: SessionEventsCommitted) -> None:
        """``session/events-committed`` listener: advance the session's event generation."""
        last = max(e.seq for e in event.events)
        if last > self._seen.get(event.session_id, 0):
            self._seen[event.session_id] = last

    async def capture(self, session_id: str, *, restore: bool = True) -> SessionLease | None:
        """``captureSessionLease(sessionId)``; ``None`` when the host services are absent or
        the session does not exist.

        ``restore=False`` leaves a cold session cold: a session being set up (a seed's target,
        an opening being installed) must not get its agent — whose creation initializes its
        state — before the operation the lease guards."""
        controller, agents = self._sessions(), self._agents()
        if controller is None or agents is None or self._closed:
            return None
        try:
            if restore:
                await agents.resolve_agent(session_id)
            info = await controller.inspect(session_id)
        except (SessionNotFound, LookupError):
            return None
        generation = max(info.last_seq, self._seen.get(session_id, 0))
        self._seen[session_id] = generation
        header = info.header
        digest = header_digest(header)

        def valid() -> bool:
            return (
                not self._closed
                and self._sessions() is controller
                and self._agents() is agents
                and self._seen.get(session_id, 0) == generation
                and not agents.is_running(session_id)
            )

        if info.turn_open:
            return SessionLease(session_id, header, digest, generation, lambda: False)
        return SessionLease(session_id, header, digest, generation, valid)


class LeaseSource(Protocol):
    """What the service calls: ``await capture(session_id, restore=)`` (``None``: no lease)."""

    def __call__(
        self, session_id: str, *, restore: bool = True
    ) -> Awaitable[SessionLease | None]: ...
