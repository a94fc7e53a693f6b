"""Proposals: at most 64 live (the 65th is refused, nothing is evicted), 10 minutes, revoked by a
selection change (A→B→A included), a card change, the session's end and unload."""

from __future__ import annotations

import pytest
from book_harness import Books

from innkeeper_hostapi import HttpProblem
from innkeeper_tavern.features.opening_books.service import MAX_PROPOSALS, PROPOSAL_TTL_SECONDS


async def test_the_65th_live_proposal_is_refused_and_none_is_evicted(books: Books) -> None:
    session, card = await books.bound()
    body = books.prepare_body(session, card)
    proposals = [await books.prepare(session, body) for _ in range(MAX_PROPOSALS)]
    refused = await books.prepare(session, body, 409)
    assert refused["code"] == "OPENING_WORLDBOOK_PROPOSALS_FULL"
    assert books.service.live_proposals == MAX_PROPOSALS
    # The oldest is still live: nothing was evicted to make room.
    receipt = await books.commit(session, books.commit_body(proposals[0]))
    assert receipt["inserted"] == 3
    # Committing freed one slot.
    assert (await books.prepare(session, body))["ok"] is True


async def test_an_expired_proposal_is_refused_and_frees_its_slot(books: Books) -> None:
    session, card = await books.bound()
    proposal = await books.prepare(session, books.prepare_body(session, card))
    start = books.service.clock()
    books.service.clock = lambda: start + PROPOSAL_TTL_SECONDS + 1
    refused = await books.commit(session, books.commit_body(proposal), 409)
    assert refused["code"] == "OPENING_WORLDBOOK_PROPOSAL_EXPIRED"
    assert books.service.books_of(session) == []
    again = await books.commit(session, books.commit_body(proposal), 404)
    assert again["code"] == "OPENING_WORLDBOOK_PROPOSAL_NOT_FOUND"
    assert books.service.live_proposals == 0


async def test_a_selection_change_and_back_revokes(books: Books) -> None:
    session, card = await books.bound()
    proposal = await books.prepare(session, books.prepare_body(session, card))
    await books.select(session, card, 2)
    await books.select(session, card, 1)  # A → B → A: the same values, a new generation
    refused = await books.commit(session, books.commit_body(proposal), 409)
    assert refused["code"] == "OPENING_WORLDBOOK_PROPOSAL_REVOKED"
    assert books.service.books_of(session) == []
    # A fresh prepare for the same selection works.
    assert (await books.committed(session, card))["inserted"] == 3


async def test_a_card_edit_revokes(books: Books) -> None:
    session, card = await books.bound()
    proposal = await books.prepare(session, books.prepare_body(session, card))
    await books.v1("PATCH", f"/characters/{card}", {"description": "edited"})
    refused = await books.commit(session, books.commit_body(proposal), 409)
    assert refused["code"] == "OPENING_WORLDBOOK_PROPOSAL_REVOKED"


async def test_revoked_proposals_do_not_count_toward_the_limit(books: Books) -> None:
    session, card = await books.bound()
    for _ in range(MAX_PROPOSALS):
        await books.prepare(session, books.prepare_body(session, card))
    await books.select(session, card, 1)  # a new generation revokes all 64
    assert (await books.prepare(session, books.prepare_body(session, card)))["ok"] is True
    assert books.service.live_proposals == 1


async def test_unload_revokes_every_proposal(books: Books) -> None:
    session, card = await books.bound()
    await books.prepare(session, books.prepare_body(session, card))
    service = books.service
    await books.host.unload("tavern")
    assert service.live_proposals == 0
    with pytest.raises(HttpProblem) as refused:
        await service.prepare(books.prepare_body(session, card))
    assert refused.value.code == "OPENING_WORLDBOOK_UNAVAILABLE"
