"""Issue 19 item 4: integers no double can hold (10**309) in world-book numeric fields.

World-book import and ``PATCH /world-books/:id`` refuse them with a stable 400; a card whose
embedded book carries one still imports (201) with warning ``embedded-world-book-invalid``.
Before, each of these was a 500 (``OverflowError``).
"""

from __future__ import annotations

from typing import Any

HUGE = "1" + "0" * 309


def _files(root: Any) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}


async def test_world_book_import_refuses_a_huge_integer(tavern: Any) -> None:
    before = _files(tavern.root)
    for field in ("order", "depth", "probability", "uid"):
        body = (
            f'{{"entries": {{"0": {{"uid": 0, "key": ["a"], "content": "x", "{field}": {HUGE}}}}}}}'
        )
        answer = await tavern.call(
            "POST",
            "/world-books/import",
            data=body.encode(),
            content_type="application/json",
            status=400,
        )
        assert answer["code"] == "NUMBER_OUT_OF_RANGE", field
    assert _files(tavern.root) == before


async def test_world_book_patch_refuses_a_huge_integer(tavern: Any) -> None:
    created = await tavern.call("POST", "/world-books", json={"name": "book"}, status=201)
    book_id = created["worldBook"]["id"]
    before = _files(tavern.root)
    body = f'{{"book": {{"entries": [{{"uid": 1, "order": {HUGE}}}]}}}}'
    answer = await tavern.call(
        "PATCH",
        f"/world-books/{book_id}",
        data=body.encode(),
        content_type="application/json",
        status=400,
    )
    assert answer["code"] == "NUMBER_OUT_OF_RANGE"
    assert _files(tavern.root) == before


async def test_card_with_a_huge_integer_in_its_book_imports_with_a_warning(tavern: Any) -> None:
    card = (
        '{"spec": "chara_card_v2", "spec_version": "2.0", "data": {"name": "Big", '
        '"first_mes": "hi", "character_book": {"entries": [{"keys": ["a"], "content": "x", '
        f'"insertion_order": {HUGE}, "id": {HUGE}}}]}}}}}}'
    )
    answer = await tavern.call(
        "POST",
        "/characters/import",
        data=card.encode(),
        content_type="application/json",
        status=201,
    )
    assert answer["character"]["name"] == "Big"
    assert "embedded-world-book-invalid" in answer["character"]["warnings"]
