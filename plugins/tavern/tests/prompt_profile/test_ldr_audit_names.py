"""The audit names a standalone book by its library name (issue 10, item 12)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

ST = (
    Path(__file__).resolve().parents[5]
    / "shared/sillytavern-corpus/sillytavern-repo/staging-1ac6780"
)


async def test_a_standalone_book_is_named_in_the_audit(tavern: Any) -> None:
    book = await tavern.import_world_book(ST / "Eldoria.json")  # the file has no "name"
    session = await tavern.new_session()
    await tavern.v1("POST", "/world-book-selection", {"sessionId": session, "worldBookIds": [book]})
    active = await tavern.active(session)
    [audited] = active["audit"]["lore"]["books"]
    assert audited["resource"]["id"] == book and audited["resource"]["name"] == "Eldoria"
