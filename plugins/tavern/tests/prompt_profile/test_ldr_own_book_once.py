"""A standalone book that is the card's own book is scanned once (issue 10, item 2)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

ST = (
    Path(__file__).resolve().parents[5]
    / "shared/sillytavern-corpus/sillytavern-repo/staging-1ac6780"
)


async def bind_both(tavern: Any, file_name: str) -> tuple[str, str, str]:
    """Seraphina and Eldoria.json imported as ``file_name``, both bound: (card, book, session)."""
    card = await tavern.import_card(ST / "default_Seraphina.png")  # extensions.world: Eldoria
    book = (
        await tavern.call(
            "POST",
            f"/pmp-dsh-tavern/api/v1/world-books/import?filename={file_name}",
            data=(ST / "Eldoria.json").read_bytes(),
            content_type="application/json",
            status=201,
        )
    )["worldBook"]["id"]
    session = await tavern.new_session()
    await tavern.v1("POST", "/character-selection", {"sessionId": session, "characterCardId": card})
    await tavern.v1("POST", "/world-book-selection", {"sessionId": session, "worldBookIds": [book]})
    return card, book, session


@pytest.mark.parametrize(
    ("file_name", "reason"),
    [("Eldoria.json", "extensions-world"), ("renamed-lore.json", "same-entries")],
)
async def test_the_cards_own_book_is_scanned_once(tavern: Any, file_name: str, reason: str) -> None:
    card, book, session = await bind_both(tavern, file_name)
    await tavern.prompt(session, "Tell me about the forest of Eldoria and the glade.")

    [record] = (await tavern.v1("GET", f"/traces?sessionId={session}"))["records"][:1]
    active = await tavern.active(session)
    scanned = [b["resource"]["id"] for b in active["audit"]["lore"]["books"]]
    assert scanned == [book]  # the embedded copy is not scanned a second time
    rendered = active["audit"]["lore"]["renderedLoreIds"]
    assert rendered and all(r.startswith(f"{book}:") for r in rendered)
    [note] = [d for d in active["diagnostics"] if d["code"] == "EMBEDDED_WORLD_BOOK_DUPLICATE"]
    assert note["details"] == {
        "embeddedId": f"character:{card}:embedded-world-book",
        "usedId": book,
        "reason": reason,
    }
    embedded = next(
        b for b in active["resources"]["worldBooks"] if b["kind"] == "embedded-world-book"
    )
    assert embedded["scanned"] is False and embedded["sameBookAs"] == book
    assert "EMBEDDED_WORLD_BOOK_DUPLICATE" in [d["code"] for d in record["diagnostics"]]


async def test_the_embedded_book_alone_is_still_scanned(tavern: Any) -> None:
    card = await tavern.import_card(ST / "default_Seraphina.png")
    session = await tavern.new_session()
    await tavern.v1("POST", "/character-selection", {"sessionId": session, "characterCardId": card})
    active = await tavern.active(session)
    assert [b["resource"]["id"] for b in active["audit"]["lore"]["books"]] == [
        f"character:{card}:embedded-world-book"
    ]


async def test_an_edit_that_makes_the_copy_differ_is_seen_on_the_next_turn(tavern: Any) -> None:
    card, book, session = await bind_both(tavern, "renamed-lore.json")

    async def scanned() -> list[str]:
        active = await tavern.active(session)
        return [b["resource"]["id"] for b in active["audit"]["lore"]["books"]]

    assert await scanned() == [book]
    await tavern.prompt(session, "Tell me about the forest of Eldoria.")
    assert await scanned() == [book]  # fingerprints are cached per revision: same answer
    doc = (await tavern.v1("GET", f"/world-books/{book}"))["worldBook"]["book"]
    doc["entries"][0]["content"] += " (edited)"
    await tavern.v1("PATCH", f"/world-books/{book}", {"book": doc})
    assert await scanned() == [book, f"character:{card}:embedded-world-book"]
