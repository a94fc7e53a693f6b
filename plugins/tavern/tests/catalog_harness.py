"""Stores seeded in bulk for the catalog tests and the catalog benchmark's shape."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from innkeeper_hostapi.sessions import (
    SessionHeader,
    SessionInspection,
    SessionMeta,
    SessionNotFound,
)
from innkeeper_tavern.pure.formats.card import parse_card
from innkeeper_tavern.state.resources import TavernResources
from innkeeper_tavern.state.resources.library import Record
from innkeeper_tavern.state.session_bindings.store import SessionSelectionStore

LOG = logging.getLogger("test.tavern.catalogs")


def seed_characters(root: Path, count: int) -> list[str]:
    """Write ``count`` card documents straight into ``root/characters`` (one index build at
    open instead of ``count`` index rewrites); ids ``character-00000`` … in id order."""
    resources = TavernResources(root, logger=LOG)
    library = resources.characters
    library.folder.mkdir(parents=True, exist_ok=True)
    ids = []
    for n in range(count):
        card = parse_card({"name": f"Hero {n:05d}", "description": "x"})
        record: Record[Any] = Record(
            f"character-{n:05d}", "2026-01-01T00:00:00.000Z", "2026-01-01T00:00:00.000Z", card
        )
        library.path(record.id).write_bytes(library.encode(record))
        ids.append(record.id)
    return ids


@dataclass
class FakeSessions:
    """``inspect`` of the sessions that exist (their creation time is the instance)."""

    created: dict[str, str]

    async def inspect(self, session_id: str) -> SessionInspection:
        if session_id not in self.created:
            raise SessionNotFound(f"no session {session_id}")
        header = SessionHeader(
            id=session_id,
            created_at=self.created[session_id],
            title=None,
            workspace_id=None,
            parent=None,
            delegation_depth=0,
            format_version=1,
        )
        return SessionInspection(
            header=header, meta=SessionMeta(version=1), turn_open=False, open_turn=None, last_seq=0
        )


async def open_stores(root: Path) -> tuple[TavernResources, SessionSelectionStore]:
    resources = TavernResources(root, logger=LOG)
    await resources.open()
    selections = SessionSelectionStore(root)
    await selections.open()
    return resources, selections
