"""The session and workspace controllers: argument checks and policy over :class:`EventStore`.

They implement :class:`innkeeper_hostapi.sessions.SessionController` and
:class:`innkeeper_hostapi.sessions.WorkspaceController`. ``prompt``, ``cancel`` and
``resolve_agent`` belong to the agent layer and are added there.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Collection
from typing import Final

from innkeeper_hostapi.sessions import (
    DEFAULT_PAGE_LIMIT,
    SESSION_TITLE_MAX_CHARS,
    EventData,
    HistoryPage,
    InvalidSessionArgument,
    RecentMessages,
    Role,
    SessionEvent,
    SessionHeader,
    SessionInspection,
    SessionList,
    SessionMessages,
    Workspace,
    WorkspaceInvalidPath,
)

from .projection import ConversationCache
from .store import EventStore

__all__ = [
    "MAX_WORKSPACE_PATH_CHARS",
    "StoreSessionController",
    "StoreWorkspaceController",
    "check_title",
]

log = logging.getLogger("innkeeper.sessions")

#: Longest workspace root path accepted.
MAX_WORKSPACE_PATH_CHARS: Final = 4096


def check_title(title: str) -> str:
    """Validate a session title: a non-blank string of at most
    :data:`SESSION_TITLE_MAX_CHARS` characters without control characters."""
    if not title.strip():
        raise InvalidSessionArgument("title must be a non-empty string")
    if len(title) > SESSION_TITLE_MAX_CHARS:
        raise InvalidSessionArgument(f"title is longer than {SESSION_TITLE_MAX_CHARS} characters")
    if any(ch < " " or ch == "\x7f" for ch in title):
        raise InvalidSessionArgument("title must not contain control characters")
    return title


class StoreSessionController:
    """Session controller backed by the SQLite :class:`EventStore`."""

    def __init__(self, store: EventStore, conversations: ConversationCache | None = None) -> None:
        self._store = store
        #: The live sessions' derived messages, kept current by the store's append listener.
        self.conversations = conversations or ConversationCache(store)

    @property
    def store(self) -> EventStore:
        """The event store behind this controller."""
        return self._store

    async def create(
        self,
        *,
        title: str | None = None,
        workspace_id: str | None = None,
        delegated_from: str | None = None,
    ) -> SessionHeader:
        """Create an empty session, optionally in a workspace or delegated from a session."""
        if title is not None:
            check_title(title)
        return await self._store.create_session(
            title=title, workspace_id=workspace_id, delegated_from=delegated_from
        )

    async def rename(self, session_id: str, title: str) -> SessionHeader:
        """Set the title; records a ``session/title`` event in the same transaction."""
        header, _ = await self._store.rename(session_id, check_title(title))
        return header

    async def fork(self, session_id: str, at_event_id: int) -> SessionHeader:
        """Fork at ``at_event_id``; :class:`TurnConflict` while the source has an open turn."""
        return await self._store.fork(session_id, at_event_id)

    async def inspect(self, session_id: str) -> SessionInspection:
        """Header, ``meta.version`` and whether a turn is open."""
        return await self._store.inspect(session_id)

    async def page(
        self,
        session_id: str,
        *,
        before_seq: int | None = None,
        limit: int = DEFAULT_PAGE_LIMIT,
        through_seq: int | None = None,
    ) -> HistoryPage:
        """Events newest first; see :meth:`EventStore.page`."""
        return await self._store.page(
            session_id, before_seq=before_seq, limit=limit, through_seq=through_seq
        )

    async def list(
        self,
        *,
        workspace_id: str | None = None,
        limit: int = DEFAULT_PAGE_LIMIT,
        cursor: str | None = None,
    ) -> SessionList:
        """Sessions newest first."""
        return await self._store.list_sessions(
            workspace_id=workspace_id, limit=limit, cursor=cursor
        )

    async def append(self, session_id: str, data: EventData) -> SessionEvent:
        """Append one event (turn invariants enforced by the store)."""
        return await self._store.append(session_id, data)

    async def messages(
        self, session_id: str, *, roles: Collection[Role] | None = None
    ) -> SessionMessages:
        """Every derived message (or those of ``roles``) as of the last committed event.

        Served from the incrementally maintained conversation (:class:`ConversationCache`):
        the log is read once per live session, not on every call.
        """
        inspection = await self._store.inspect(session_id)
        read = await self.conversations.messages(session_id, roles=roles)
        return SessionMessages(
            messages=read.messages,
            incomplete_turn=read.incomplete_turn,
            through_seq=read.through_seq,
            session_format_version=inspection.meta.version,
            stopped_request=read.stopped_request,
            failed_turn=read.failed_turn,
        )

    async def recent_messages(
        self, session_id: str, *, roles: Collection[Role], limit: int
    ) -> RecentMessages:
        """The newest ``limit`` messages of ``roles`` with text, from the conversation cache
        (it walks back from the newest message only as far as it needs)."""
        if limit < 0:
            raise InvalidSessionArgument("limit must not be negative")
        await self._store.inspect(session_id)  # SessionNotFound, as messages() raises it
        read = await self.conversations.recent(session_id, roles=roles, limit=limit)
        return RecentMessages(
            messages=read.messages,
            text_counts=read.text_counts,
            incomplete_turn=read.incomplete_turn,
            through_seq=read.through_seq,
        )


class StoreWorkspaceController:
    """Workspace controller: a workspace is a named, existing root folder. Never creates it
    (``docs/contract/sessions.md#workspaces``)."""

    def __init__(self, store: EventStore) -> None:
        self._store = store

    async def create(self, root_path: str) -> Workspace:
        """Register an existing absolute directory (symlinks resolved); idempotent per root."""
        root = await asyncio.to_thread(_resolve_root, root_path)
        workspace = await self._store.create_workspace(root, os.path.basename(root) or root)
        log.info("workspace registered id=%s", workspace.id)
        return workspace

    async def list(self) -> tuple[Workspace, ...]:
        """Every workspace, oldest first."""
        return await self._store.list_workspaces()


def _resolve_root(root_path: str) -> str:
    if not root_path:
        raise WorkspaceInvalidPath("rootPath must be a non-empty string")
    if len(root_path) > MAX_WORKSPACE_PATH_CHARS or "\x00" in root_path:
        raise WorkspaceInvalidPath("rootPath is too long or contains NUL")
    if not os.path.isabs(root_path):
        raise WorkspaceInvalidPath("rootPath must be absolute")
    resolved = os.path.realpath(root_path)
    if not os.path.isdir(resolved):
        raise WorkspaceInvalidPath("rootPath is not an existing directory")
    return resolved
