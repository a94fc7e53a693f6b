"""The v2 play workspace (`docs/contract/play.md#v2-surface`): a bound root with its
files and managed documents, play sessions over the host's sessions, playthroughs, import
context, operation logs and the chrome mode.

:func:`~innkeeper_tavern.face.routes.play_install.install_play` wires it into the plugin
through ``ctx`` (everything it registers is disposed with the plugin).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from innkeeper_hostapi import ServiceKey

from .errors import PlayError
from .leases import MANAGED_KEY
from .oplog import OperationLog
from .playthroughs import Playthroughs
from .sessions import PlaySessions
from .workspace import PlayWorkspace

#: How many sessions :attr:`Play.seen` remembers before it starts over.
MAX_SEEN_SESSIONS = 10_000


__all__ = ["TAVERN_PLAY", "Play", "utc_now_ms"]


def utc_now_ms() -> str:
    """An ISO-8601 UTC timestamp with milliseconds (``YYYY-MM-DDTHH:mm:ss.sssZ``)."""
    now = datetime.now(UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


@dataclass(slots=True)
class Play:
    """The play services, for other Tavern parts (MVU leases, v1 selection checks)."""

    workspace: PlayWorkspace
    sessions: PlaySessions
    playthroughs: Playthroughs
    oplog: OperationLog
    #: Session id → the host workspace it belongs to, as seen by :meth:`context_lease`
    #: (a session never moves; bounded by :data:`MAX_SEEN_SESSIONS`).
    seen: dict[str, str | None] = field(default_factory=dict)

    async def context_lease(self, session_id: str) -> Callable[[], bool] | None:
        """For a play session (one in the bound workspace): a synchronous check that turns
        false on any catalog or timeline write and on a workspace identity change
        (docs/contract/mvu.md#prompt-reads); ``None`` for any other session."""
        binding = self.workspace.binding
        leases = self.workspace.leases
        lease = leases.capture_read_lease([MANAGED_KEY])
        if binding is None:
            return None
        try:
            inspection = await self.sessions.inspect(session_id)
        except PlayError:
            return None
        if len(self.seen) >= MAX_SEEN_SESSIONS:
            self.seen.clear()
        self.seen[session_id] = inspection.header.workspace_id
        if inspection.header.workspace_id != binding.workspace_id:
            return None
        return lambda: leases.valid(lease)

    def context_lease_now(self, session_id: str) -> Callable[[], bool] | None:
        """The synchronous form (``getManagementDefaults``): ``None`` without a bound workspace
        or for a session already seen outside it; otherwise — a play session, or one not seen
        yet, conservatively — the same catalog/timeline/workspace check."""
        binding = self.workspace.binding
        known = self.seen.get(session_id, binding.workspace_id if binding else None)
        if binding is None or known != binding.workspace_id:
            return None
        leases = self.workspace.leases
        lease = leases.capture_read_lease([MANAGED_KEY])
        return lambda: leases.valid(lease)


#: The play services (resolve at call time).
TAVERN_PLAY: ServiceKey[Play] = ServiceKey("tavern.play", Play)
