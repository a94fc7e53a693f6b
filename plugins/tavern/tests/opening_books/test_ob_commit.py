"""Commit: an identical replay answers the first receipt, a conflicting reuse of the operation id
is refused, and a CAS conflict changes nothing (memory and disk)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from book_harness import Books

from innkeeper_tavern.state.resources import statefile


def read(path: Path) -> bytes | None:
    return path.read_bytes() if path.exists() else None


async def test_a_replay_returns_the_first_receipt(books: Books, state_file: Path) -> None:
    session, card = await books.bound()
    proposal = await books.prepare(session, books.prepare_body(session, card))
    body = books.commit_body(proposal, "op-replay")
    first = await books.commit(session, body)
    on_disk = read(state_file)
    again = await books.commit(session, body)
    assert again == first  # the same receiptId, counts and revision
    assert read(state_file) == on_disk  # nothing written twice
    [book] = books.service.books_of(session)
    assert book.revision == 1


async def test_concurrent_identical_commits_write_once(books: Books, state_file: Path) -> None:
    session, card = await books.bound()
    proposal = await books.prepare(session, books.prepare_body(session, card))
    body = books.commit_body(proposal, "op-race")
    receipts = await asyncio.gather(*(books.commit(session, body) for _ in range(8)))
    assert len({r["receiptId"] for r in receipts}) == 1
    assert [b.revision for b in books.service.books_of(session)] == [1]


async def test_a_conflicting_reuse_of_the_operation_id_is_refused(
    books: Books, state_file: Path
) -> None:
    session, card = await books.bound()
    first = await books.prepare(session, books.prepare_body(session, card))
    await books.commit(session, books.commit_body(first, "op-shared"))
    on_disk = read(state_file)
    other = await books.prepare(session, books.prepare_body(session, card, "rooftop"))
    refused = await books.commit(session, books.commit_body(other, "op-shared"), 409)
    assert refused["code"] == "OPENING_WORLDBOOK_OPERATION_CONFLICT"
    assert read(state_file) == on_disk
    assert [b.opening_id for b in books.service.books_of(session)] == ["cellar"]
    # The refused proposal is still usable under its own operation id.
    assert (await books.commit(session, books.commit_body(other, "op-own")))["inserted"] == 2


async def test_a_cas_conflict_changes_nothing(books: Books, state_file: Path) -> None:
    session, card = await books.bound()
    one = await books.prepare(session, books.prepare_body(session, card))
    two = await books.prepare(session, books.prepare_body(session, card))
    assert one["expectedRevision"] == two["expectedRevision"] == 0
    await books.commit(session, books.commit_body(one, "op-one"))
    on_disk = read(state_file)
    refused = await books.commit(session, books.commit_body(two, "op-two"), 409)
    assert refused["code"] == "OPENING_WORLDBOOK_REVISION_CONFLICT"
    assert read(state_file) == on_disk
    [book] = books.service.books_of(session)
    assert book.revision == 1
    # No receipt was kept for the refused operation: it can still be used after a new prepare.
    fresh = await books.prepare(session, books.prepare_body(session, card))
    assert fresh["expectedRevision"] == 1
    receipt = await books.commit(session, books.commit_body(fresh, "op-two"))
    assert receipt["existing"] == 3


async def test_a_commit_must_match_its_proposal(books: Books, state_file: Path) -> None:
    session, card = await books.bound()
    proposal = await books.prepare(session, books.prepare_body(session, card))
    body = books.commit_body(proposal)
    stale = {**body, "expectedRevision": 5}
    refused = await books.commit(session, stale, 409)
    assert refused["code"] == "OPENING_WORLDBOOK_REVISION_CONFLICT"
    wrong = {**body, "sourceIdentity": {**body["sourceIdentity"], "greetingIndex": 2}}
    refused = await books.commit(session, wrong, 409)
    assert refused["code"] == "OPENING_WORLDBOOK_IDENTITY_MISMATCH"
    for flags in ({"reviewed": False}, {"write": False}):
        refused = await books.commit(session, {**body, **flags}, 400)
        assert refused["code"] == "OPENING_WORLDBOOK_CONFIRMATION_REQUIRED"
    assert books.service.books_of(session) == []
    assert (await books.commit(session, body))["inserted"] == 3


async def test_a_failed_write_changes_nothing_and_can_be_retried(
    books: Books, state_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session, card = await books.bound()
    proposal = await books.prepare(session, books.prepare_body(session, card))
    body = books.commit_body(proposal, "op-disk")

    def refuse(path: Path, data: bytes) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(statefile, "atomic_write", refuse)
    refused = await books.commit(session, body, 500)
    assert refused["code"] == "RESOURCE_WRITE_FAILED"
    assert read(state_file) is None and books.service.books_of(session) == []
    monkeypatch.undo()
    # The proposal and the operation id are still free: the retry commits once.
    receipt = await books.commit(session, body)
    assert receipt["inserted"] == 3 and read(state_file) is not None
