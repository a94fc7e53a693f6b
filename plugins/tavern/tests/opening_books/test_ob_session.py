"""The session instance binds a proposal: a session the host no longer knows, or one recreated
under the same id, revokes it (service level, with a scripted session service)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from book_harness import GREETINGS, sha, snapshot
from catalog_harness import FakeSessions, open_stores

from innkeeper_hostapi import HttpProblem
from innkeeper_tavern.features.opening_books.manifest import load_manifest
from innkeeper_tavern.features.opening_books.service import OpeningWorldBooks
from innkeeper_tavern.features.opening_books.store import OpeningBookStore
from innkeeper_tavern.state.session_bindings.model import CharacterOptions, Selection

SESSION = "session-1"


async def service(tmp_path: Path) -> tuple[OpeningWorldBooks, FakeSessions, dict[str, Any]]:
    resources, selections = await open_stores(tmp_path)
    body = {"name": "Mara", "firstMessage": GREETINGS[0], "alternateGreetings": list(GREETINGS[1:])}
    card = (await resources.create_character(body)).record.id
    sessions = FakeSessions({SESSION: "2026-12-01T00:00:00.000Z"})
    options = CharacterOptions(greeting_index=1)
    await selections.set(SESSION, Selection(character_card_id=card, character=options))
    store = OpeningBookStore(tmp_path, logger=logging.getLogger("test"))
    await store.open()
    books = OpeningWorldBooks(
        resources,
        selections,
        lambda: sessions,
        load_manifest(),
        store,  # type: ignore[arg-type,return-value]
    )
    identity = {
        "version": 1,
        "owner": "pmp-dsh-tavern",
        "sessionId": SESSION,
        "characterId": card,
        "greetingIndex": 1,
        "greetingSha256": sha(GREETINGS[1]),
        "identitySha256": snapshot()["sha256"],
    }
    prepare = {"sourceIdentity": identity, "openingId": "cellar", "identitySource": snapshot()}
    return books, sessions, prepare


def commit_body(proposal: dict[str, Any]) -> dict[str, Any]:
    return {
        "proposalId": proposal["proposalId"],
        "expectedRevision": proposal["expectedRevision"],
        "operationId": "op",
        "sourceIdentity": proposal["sourceIdentity"],
        "reviewed": True,
        "write": True,
    }


@pytest.mark.parametrize("change", ["ended", "recreated"])
async def test_the_session_instance_revokes(tmp_path: Path, change: str) -> None:
    books, sessions, prepare = await service(tmp_path)
    proposal = await books.prepare(prepare)
    if change == "ended":
        del sessions.created[SESSION]
    else:
        sessions.created[SESSION] = "2026-12-02T00:00:00.000Z"
    with pytest.raises(HttpProblem) as refused:
        await books.commit(commit_body(proposal))
    assert refused.value.code == "OPENING_WORLDBOOK_PROPOSAL_REVOKED"
    assert books.books_of(SESSION) == []
    assert books.live_proposals == 0


async def test_an_ended_session_cannot_prepare(tmp_path: Path) -> None:
    books, sessions, prepare = await service(tmp_path)
    del sessions.created[SESSION]
    with pytest.raises(HttpProblem) as refused:
        await books.prepare(prepare)
    assert refused.value.code == "OPENING_WORLDBOOK_SESSION_NOT_FOUND"
    assert books.live_proposals == 0
