"""Committed books and their receipts survive a restart; proposals and skip receipts do not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from book_harness import Books, fired


async def test_a_restart_keeps_committed_books(start_books: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    host, books = await start_books(data)
    session, card = await books.bound()
    proposal = await books.prepare(session, books.prepare_body(session, card))
    body = books.commit_body(proposal, "op-durable")
    receipt = await books.commit(session, body)
    pending = await books.prepare(session, books.prepare_body(session, card, "rooftop"))
    await host.close()

    host, books = await start_books(data)
    assert isinstance(books, Books)
    rid = receipt["resourceId"]
    [book] = books.service.books_of(session)
    assert book.resource_id == rid and book.revision == 1 and len(book.entries) == 3
    # The receipt survived: the replay answers it unchanged.
    assert await books.commit(session, body) == receipt
    # Proposals did not: they belong to one host lifetime.
    gone = await books.commit(session, books.commit_body(pending, "op-late"), 404)
    assert gone["code"] == "OPENING_WORLDBOOK_PROPOSAL_NOT_FOUND"
    # And the book still takes part in the session's requests.
    await books.prompt_and_wait(session, "Someone lit the cold lantern.")
    assert fired(books.audit(session), rid) == [f"{rid}:2"]
