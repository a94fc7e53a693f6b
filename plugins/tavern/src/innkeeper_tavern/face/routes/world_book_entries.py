"""One world-book entry at a time, and a read-only activation test (docs/resources.md
"World-book entries and test activation").

A book of 10,000 entries is tens of megabytes as JSON: an editor that changed one entry should
not send the whole book back. ``PUT``/``DELETE …/entries/{uid}`` change one entry under the
book's revision (its ``updatedAt``: a stale one is 409 and nothing is written): the entry is
validated as a whole-book ``PATCH`` validates each entry, and the whole book's limits are kept
as running totals (:mod:`innkeeper_tavern.state.resources.book_entry_edit`), so a save costs one
entry's checks and the write. ``POST …/test-activation`` runs the activation engine over pasted text
with this book alone and answers its decisions (the same records "Why" shows); it is a dry run
and writes nothing.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

import msgspec
from aiohttp import web

from innkeeper_hostapi import HttpProblem, path_params
from innkeeper_tavern.pure.formats.worldbook import WorldBook
from innkeeper_tavern.pure.worldbook import (
    ActivationContext,
    ActivationMessage,
    ActivationRequest,
    BookInput,
    activate,
    decision_record,
)
from innkeeper_tavern.state.resources import TavernResources
from innkeeper_tavern.state.resources.book_entry_edit import BookTotals, TotalsMemo, edit_one_entry
from innkeeper_tavern.state.resources.errors import WORLD_BOOK_NOT_FOUND
from innkeeper_tavern.state.resources.kinds import WorldBookDocument

from .common import Route, handler, json_object, ok, resource_id

#: One entry with its revision: far below a whole book.
ENTRY_BODY_LIMIT: Final = 1 << 20
#: Pasted text for a test activation (characters); the body limit bounds it too.
MAX_TEST_TEXT_CHARS: Final = 100_000
TEST_BODY_LIMIT: Final = 512 << 10
#: An entry uid in a path: an integer (standalone books) or a short string.
MAX_UID_CHARS: Final = 64
WORLD_BOOK_REVISION_CONFLICT: Final = "WORLD_BOOK_REVISION_CONFLICT"
WORLD_BOOK_ENTRY_NOT_FOUND: Final = "WORLD_BOOK_ENTRY_NOT_FOUND"
WORLD_BOOK_ENTRY_INVALID: Final = "WORLD_BOOK_ENTRY_INVALID"


def _uid(request: web.Request) -> str:
    value = path_params(request)["uid"]
    if not value or len(value) > MAX_UID_CHARS:
        raise HttpProblem(404, WORLD_BOOK_ENTRY_NOT_FOUND, "no entry has this uid")
    return value


def _revision(value: object) -> str:
    if not isinstance(value, str) or not value:
        raise HttpProblem(
            400, WORLD_BOOK_ENTRY_INVALID, "expectedRevision (the book's updatedAt) is required"
        )
    return value


def _same_uid(entry_uid: int | str, uid: str) -> bool:
    return str(entry_uid) == uid


def _edit_entry(
    doc: WorldBookDocument,
    uid: str,
    entry: dict[str, Any] | None,
    totals: BookTotals,
) -> tuple[WorldBookDocument, BookTotals]:
    """The document with entry ``uid`` replaced, added (``entry`` for a new uid) or removed
    (``entry`` ``None``): the entry validated as a whole-book ``PATCH`` validates each of its
    entries, the book's entry cap and node budget kept as running ``totals``."""
    entries = doc.book.entries
    index = next((i for i, e in enumerate(entries) if _same_uid(e.uid, uid)), None)
    if entry is None and index is None:
        raise HttpProblem(404, WORLD_BOOK_ENTRY_NOT_FOUND, "no entry has this uid")
    book, new_totals = edit_one_entry(doc.book, index, entry, totals)
    return msgspec.structs.replace(doc, book=book), new_totals


def _entry_body(body: dict[str, Any], uid: str) -> dict[str, Any]:
    unknown = sorted(set(body) - {"entry", "expectedRevision"})
    if unknown:
        raise HttpProblem(400, WORLD_BOOK_ENTRY_INVALID, f"unknown field {unknown[0]!r}")
    entry = body.get("entry")
    if not isinstance(entry, dict):
        raise HttpProblem(400, WORLD_BOOK_ENTRY_INVALID, "entry must be an object")
    if "uid" in entry and not _same_uid(entry["uid"], uid):
        raise HttpProblem(400, WORLD_BOOK_ENTRY_INVALID, "entry.uid differs from the path's uid")
    return {**entry, "uid": int(uid) if uid.isdigit() else uid}


def test_activation(book: WorldBook, resource: str, name: str, text: str) -> dict[str, Any]:
    """Activate ``book`` alone over ``text`` (one user message) as a dry run: which entries
    fire, and every decision with its reason."""
    request = ActivationRequest(
        books=(BookInput(resource_id=resource, book=book, name=name),),
        context=ActivationContext(messages=(ActivationMessage(id="0", role="user", text=text),)),
        dry_run=True,
    )
    result = activate(request)
    entries = {str(e.uid): e for e in book.entries}
    decisions = [decision_record(d, entries.get(str(d.uid))) for d in result.decisions]
    decisions.sort(key=lambda d: d["decision"] != "included")
    return {
        "activated": [str(a.uid) for a in result.activated],
        "decisions": decisions,
    }


def routes(res: TavernResources) -> list[Route]:
    """The entry and test-activation rows of the v1 table."""

    #: The node totals of the revisions this process edited (one entry's save counts one entry).
    totals_memo = TotalsMemo()

    def bid(request: web.Request) -> str:
        return resource_id(request, WORLD_BOOK_NOT_FOUND, "world book")

    async def change(
        request: web.Request, entry: dict[str, Any] | None, expected: str
    ) -> web.StreamResponse:
        book_id, uid = bid(request), _uid(request)
        store = res.world_books
        async with store.lock:
            current = await store.get(book_id)
            if current.updated_at != expected:
                raise HttpProblem(
                    409,
                    WORLD_BOOK_REVISION_CONFLICT,
                    "the book changed since it was read; read it again and reapply the edit",
                )
            revision = store.revision_of(book_id) or ""
            new_totals: list[BookTotals] = []

            def edit(doc: WorldBookDocument) -> WorldBookDocument:
                # Off the loop (update_locked runs it in a thread); raising writes nothing.
                totals = totals_memo.get(book_id, revision, doc.book)
                edited, after = _edit_entry(doc, uid, entry, totals)
                new_totals.append(after)
                return edited

            record = await store.update_locked(book_id, edit)
            written = store.revision_of(book_id)
            if written is not None:
                totals_memo.put(book_id, written, new_totals[0])
        return ok(
            revision=record.updated_at,
            updatedAt=record.updated_at,
            entryCount=len(record.body.book.entries),
        )

    @handler
    async def put_entry(request: web.Request) -> web.StreamResponse:
        body = await json_object(request)
        entry = _entry_body(body, _uid(request))
        return await change(request, entry, _revision(body.get("expectedRevision")))

    @handler
    async def delete_entry(request: web.Request) -> web.StreamResponse:
        return await change(request, None, _revision(request.query.get("expectedRevision")))

    @handler
    async def post_test(request: web.Request) -> web.StreamResponse:
        body = await json_object(request)
        unknown = sorted(set(body) - {"text"})
        if unknown:
            raise HttpProblem(400, "INVALID_BODY", f"unknown field {unknown[0]!r}")
        text = body.get("text")
        if not isinstance(text, str) or len(text) > MAX_TEST_TEXT_CHARS:
            raise HttpProblem(
                400, "INVALID_BODY", f"text must be a string of at most {MAX_TEST_TEXT_CHARS}"
            )
        record = await res.world_books.get(bid(request))
        answer = await asyncio.to_thread(
            test_activation, record.body.book, record.id, record.body.name, text
        )
        return ok(**answer)

    base = "/world-books/{id}"
    return [
        Route(
            "PUT",
            f"{base}/entries/{{uid}}",
            put_entry,
            "tavern.v1.world_books.entry.put",
            ENTRY_BODY_LIMIT,
        ),
        Route("DELETE", f"{base}/entries/{{uid}}", delete_entry, "tavern.v1.world_books.entry.del"),
        Route(
            "POST",
            f"{base}/test-activation",
            post_test,
            "tavern.v1.world_books.test_activation",
            TEST_BODY_LIMIT,
        ),
    ]
