"""prepare → commit → the session's next request: the opening book's entries fire through the
ordinary matcher, show in the audit and the bound listing, and stay invisible elsewhere."""

from __future__ import annotations

import pytest
from book_harness import GREETINGS, Books, fired, sha, snapshot

from innkeeper_hostapi import HttpProblem
from innkeeper_hostapi.catalogs import TAVERN_MEMORY_SOURCES
from innkeeper_tavern.features.opening_books.model import RESOURCE_PREFIX


async def test_prepare_commit_and_the_next_request_activates_the_book(books: Books) -> None:
    session, card = await books.bound()
    proposal = await books.prepare(session, books.prepare_body(session, card))
    assert proposal["ok"] is True and proposal["openingId"] == "cellar"
    assert proposal["entryCount"] == 3 and len(proposal["entries"]) == 3
    assert proposal["expectedRevision"] == 0 and len(proposal["entriesHash"]) == 64
    assert proposal["resourceId"].startswith(RESOURCE_PREFIX)
    assert proposal["sourceIdentity"] == books.identity(session, card)
    assert proposal["expiresAt"].endswith("Z")
    rid = proposal["resourceId"]

    receipt = await books.commit(session, books.commit_body(proposal))
    assert receipt == {
        "ok": True,
        "inserted": 3,
        "existing": 0,
        "updated": 0,
        "targetWorldbook": "Lantern Inn: the cellar",
        "method": "session-local",
        "receiptId": receipt["receiptId"],
        "resourceId": rid,
        "revision": 1,
    }
    # Only plugin-owned session storage changed: no global world book appeared.
    assert books.resources.world_books.entries() == []

    await books.prompt_and_wait(session, "I pull at the cellar trapdoor.")
    record = books.audit(session)
    assert fired(record, rid) == [f"{rid}:0"]
    system = books.provider.requests[-1].messages[0].content
    assert "bolted from below every night" in system
    assert "salt-stained ledger" not in system  # its key did not match

    # The bound listing names it (metadata only) for this session alone.
    items = await books.list_bound(session)
    [item] = [i for i in items if i["id"] == rid]
    assert item["type"] == "session-opening-world-book" and item["managementMode"] == "native"
    assert item["binding"]["sessionId"] == session and "content" not in item

    # The audit's resources name it like any other book.
    [summary] = [r for r in record["resources"]["worldBooks"] if r["id"] == rid]
    assert summary["kind"] == "session-opening-world-book" and summary["activatedCount"] == 1

    # Another session with the same card and greeting sees nothing of it.
    other, _ = await books.bound(card)
    await books.prompt_and_wait(other, "I pull at the cellar trapdoor.")
    assert fired(books.audit(other), rid) == []
    assert "bolted from below" not in books.provider.requests[-1].messages[0].content
    assert all(i["id"] != rid for i in await books.list_bound(other))


async def test_the_book_follows_the_current_card_and_greeting(books: Books) -> None:
    session, card = await books.bound()
    receipt = await books.committed(session, card)
    rid = receipt["resourceId"]
    await books.select(session, card, 2)  # another greeting: the opening no longer matches
    assert all(i["id"] != rid for i in await books.list_bound(session))
    await books.select(session, card, 1)
    assert any(i["id"] == rid for i in await books.list_bound(session))
    # An edit of the selected greeting's text breaks greetingSha256: the book stops applying.
    await books.v1("PATCH", f"/characters/{card}", {"alternateGreetings": ["changed", "x"]})
    assert all(i["id"] != rid for i in await books.list_bound(session))


async def test_the_book_is_readable_only_in_its_session_scope(books: Books) -> None:
    session, card = await books.bound()
    rid = (await books.committed(session, card))["resourceId"]
    other, _ = await books.bound(card)
    sources = books.host.get(TAVERN_MEMORY_SOURCES)
    scope = {"sessionId": session, "authority": "local"}
    item = await sources.read(adapter_id="world-book", id=rid, scope=scope)
    assert item["type"] == "session-opening-world-book"
    assert [e["uid"] for e in item["content"]["entries"]] == [0, 1, 2]
    for kwargs in ({}, {"scope": {"sessionId": other, "authority": "local"}}):
        with pytest.raises(HttpProblem) as refused:
            await sources.read(adapter_id="world-book", id=rid, **kwargs)
        assert refused.value.code == "MEMORY_SOURCE_NOT_FOUND"
    assert all(i["id"] != rid for i in await sources.list(adapter_id="world-book"))


async def test_a_commit_revokes_the_bound_listing_lease(books: Books) -> None:
    session, card = await books.bound()
    bound = await books.host.get(TAVERN_MEMORY_SOURCES).list_bound(
        scope={"sessionId": session, "authority": "local"}
    )
    assert bound["checkCurrent"]() is True
    await books.committed(session, card)
    assert bound["checkCurrent"]() is False


async def test_a_sibling_snapshot_and_a_skip(books: Books) -> None:
    session, card = await books.bound()
    body = books.prepare_body(
        session, card, "rooftop", source=snapshot("lantern-inn-openings.alt.js")
    )
    proposal = await books.prepare(session, body)
    assert proposal["entryCount"] == 2
    skip = await books.prepare(session, books.prepare_body(session, card, "default"))
    assert skip["entries"] == [] and skip["resourceId"] is None and skip["entryCount"] == 0
    receipt = await books.commit(session, books.commit_body(skip, "skip-op"))
    assert receipt["skipped"] is True and receipt["resourceId"] is None
    assert receipt["inserted"] == receipt["existing"] == receipt["updated"] == 0
    assert await books.commit(session, books.commit_body(skip, "skip-op")) == receipt
    assert books.service.books_of(session) == []  # a skip creates no resource


async def test_recommitting_counts_existing_entries(books: Books) -> None:
    session, card = await books.bound()
    first = await books.committed(session, card)
    again = await books.prepare(session, books.prepare_body(session, card))
    assert again["expectedRevision"] == 1 and again["resourceId"] == first["resourceId"]
    receipt = await books.commit(session, books.commit_body(again, "op-2"))
    assert (receipt["inserted"], receipt["existing"], receipt["updated"]) == (0, 3, 0)
    assert receipt["revision"] == 1  # nothing changed, the revision stays


def test_identity_hashes_are_the_documented_ones() -> None:
    assert sha(GREETINGS[1]) == sha("The cellar door creaks open.")
    assert snapshot()["sha256"] == sha(snapshot()["content"])
