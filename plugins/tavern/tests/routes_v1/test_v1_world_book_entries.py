"""One world-book entry at a time under the book's revision, and the read-only test activation
(docs/resources.md "World-book entries and test activation"; issue 30, item 2)."""

from __future__ import annotations

from typing import Any


def _files(root: Any) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}


async def test_put_and_delete_one_entry_with_the_books_revision(tavern: Any) -> None:
    created = await tavern.call("POST", "/world-books", json={"name": "Lore"}, status=201)
    book_id, revision = created["worldBook"]["id"], created["worldBook"]["updatedAt"]
    entry = {"keys": ["dragon"], "content": "Dragons sleep under the hill.", "comment": "Dragons"}
    saved = await tavern.call(
        "PUT",
        f"/world-books/{book_id}/entries/7",
        json={"entry": entry, "expectedRevision": revision},
    )
    assert saved["entryCount"] == 1 and saved["revision"] != revision
    book = (await tavern.call("GET", f"/world-books/{book_id}"))["worldBook"]
    assert book["updatedAt"] == saved["revision"]
    (stored,) = book["book"]["entries"]
    assert (stored["uid"], stored["keys"], stored["comment"]) == (7, ["dragon"], "Dragons")

    # A stale revision is 409 and nothing is written.
    before = _files(tavern.root)
    stale = await tavern.call(
        "PUT",
        f"/world-books/{book_id}/entries/7",
        json={"entry": {**entry, "content": "lost?"}, "expectedRevision": revision},
        status=409,
    )
    assert stale["code"] == "WORLD_BOOK_REVISION_CONFLICT"
    # Bad input: a clear 400, nothing written.
    bad = await tavern.call(
        "PUT",
        f"/world-books/{book_id}/entries/7",
        json={"entry": {"keys": "dragon", "bogus": 1}, "expectedRevision": saved["revision"]},
        status=400,
    )
    assert bad["code"] == "WORLD_BOOK_INVALID"
    mismatch = await tavern.call(
        "PUT",
        f"/world-books/{book_id}/entries/7",
        json={"entry": {"uid": 8}, "expectedRevision": saved["revision"]},
        status=400,
    )
    assert mismatch["code"] == "WORLD_BOOK_ENTRY_INVALID"
    no_revision = await tavern.call(
        "PUT", f"/world-books/{book_id}/entries/7", json={"entry": entry}, status=400
    )
    assert no_revision["code"] == "WORLD_BOOK_ENTRY_INVALID"
    assert _files(tavern.root) == before

    # Edit in place, then delete under the new revision.
    edited = await tavern.call(
        "PUT",
        f"/world-books/{book_id}/entries/7",
        json={"entry": {**entry, "order": 5}, "expectedRevision": saved["revision"]},
    )
    book = (await tavern.call("GET", f"/world-books/{book_id}"))["worldBook"]
    assert [e["order"] for e in book["book"]["entries"]] == [5]
    missing = await tavern.call(
        "DELETE",
        f"/world-books/{book_id}/entries/99?expectedRevision={edited['revision']}",
        status=404,
    )
    assert missing["code"] == "WORLD_BOOK_ENTRY_NOT_FOUND"
    gone = await tavern.call(
        "DELETE", f"/world-books/{book_id}/entries/7?expectedRevision={edited['revision']}"
    )
    assert gone["entryCount"] == 0
    unknown = await tavern.call(
        "PUT",
        "/world-books/world-book-nope/entries/1",
        json={"entry": entry, "expectedRevision": "x"},
        status=404,
    )
    assert unknown["code"] == "WORLD_BOOK_NOT_FOUND"


async def test_test_activation_explains_and_writes_nothing(tavern: Any) -> None:
    created = await tavern.call("POST", "/world-books", json={"name": "Lore"}, status=201)
    book_id = created["worldBook"]["id"]
    revision = created["worldBook"]["updatedAt"]
    for uid, keys in ((1, ["dragon"]), (2, ["castle"])):
        revision = (
            await tavern.call(
                "PUT",
                f"/world-books/{book_id}/entries/{uid}",
                json={
                    "entry": {"keys": keys, "content": f"about {keys[0]}"},
                    "expectedRevision": revision,
                },
            )
        )["revision"]
    before = _files(tavern.root)
    answer = await tavern.call(
        "POST", f"/world-books/{book_id}/test-activation", json={"text": "A dragon flies."}
    )
    assert answer["activated"] == ["1"]
    by_entry = {d["entryId"]: d for d in answer["decisions"]}
    assert by_entry["1"]["decision"] == "included" and by_entry["1"]["reason"] == "key-match"
    assert by_entry["1"]["primaryMatches"] == ["dragon"]
    assert by_entry["2"]["decision"] == "rejected" and by_entry["2"]["reason"] == "no-key-match"
    assert _files(tavern.root) == before
    bad = await tavern.call(
        "POST", f"/world-books/{book_id}/test-activation", json={"text": 3}, status=400
    )
    assert bad["code"] == "INVALID_BODY"
