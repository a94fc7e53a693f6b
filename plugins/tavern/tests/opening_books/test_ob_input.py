"""Bad input on both routes answers a stable code and changes nothing: no proposal is made, no
book or receipt is written."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from book_harness import Books, snapshot

from innkeeper_tavern.face.routes.opening_books import COMMIT_BODY_LIMIT, PREPARE_BODY_LIMIT

INVALID = "OPENING_WORLDBOOK_INVALID"
MISMATCH = "OPENING_WORLDBOOK_IDENTITY_MISMATCH"
UNREGISTERED = "OPENING_WORLDBOOK_SOURCE_UNREGISTERED"


def absent(path: Path) -> bool:
    return not path.exists()


PREPARE_CASES: list[tuple[str, Any, int, str]] = [
    ("not an object", [], 400, INVALID),
    ("unknown field", {"extra": 1}, 400, INVALID),
    ("missing field", {"drop": "openingId"}, 400, INVALID),
    ("openingId type", {"openingId": 7}, 400, INVALID),
    ("identity type", {"sourceIdentity": "x"}, 400, INVALID),
    ("identity extra", {"identity": {"extra": 1}}, 400, INVALID),
    ("version", {"identity": {"version": 2}}, 400, INVALID),
    ("owner", {"identity": {"owner": "x"}}, 400, INVALID),
    ("index type", {"identity": {"greetingIndex": "1"}}, 400, INVALID),
    ("index bool", {"identity": {"greetingIndex": True}}, 400, INVALID),
    ("sha", {"identity": {"greetingSha256": "AB"}}, 400, INVALID),
    ("wrong greeting", {"identity": {"greetingIndex": 2}}, 409, MISMATCH),
    ("greeting text", {"identity": {"greetingSha256": "0" * 64}}, 409, MISMATCH),
    ("other card", {"identity": {"characterId": "character-x"}}, 409, MISMATCH),
    ("identity sha", {"identity": {"identitySha256": "0" * 64}}, 409, MISMATCH),
    ("other session", {"identity": {"sessionId": "other-session"}}, 409, MISMATCH),
    ("snapshot shape", {"identitySource": {"url": "u"}}, 400, INVALID),
    ("content type", {"snap": {"content": 3}}, 400, INVALID),
    ("hash mismatch", {"snap": {"content": "tampered"}}, 400, "OPENING_WORLDBOOK_HASH_MISMATCH"),
    ("unregistered url", {"snap": {"url": "https://x.invalid/a.js"}}, 400, UNREGISTERED),
    ("not a sibling", {"source": "rendering"}, 400, UNREGISTERED),
    ("unknown opening", {"openingId": "attic"}, 400, "OPENING_WORLDBOOK_OPENING_UNKNOWN"),
]  # fmt: skip


def prepare_case(books: Books, session: str, card: str, change: Any) -> Any:
    body: Any = books.prepare_body(session, card)
    if not isinstance(change, dict):
        return change
    change = dict(change)
    if "drop" in change:
        del body[change.pop("drop")]
    if "identity" in change:
        body["sourceIdentity"] = {**body["sourceIdentity"], **change.pop("identity")}
    if "snap" in change:
        body["identitySource"] = {**body["identitySource"], **change.pop("snap")}
    if change.get("source") == "rendering":
        text = "// Innkeeper rendering-cache test opening snapshot (inert text; never evaluated).\n"
        text += "export const opening = 'test';\n"
        url = "https://innkeeper.invalid/rendering-cache/opening-test.js"
        sha = hashlib.sha256(text.encode()).hexdigest()
        change["source"] = {"url": url, "sha256": sha, "content": text}
    return {**body, **change}


@pytest.mark.parametrize(("name", "change", "status", "code"), PREPARE_CASES)
async def test_bad_prepare_input(
    books: Books, state_file: Path, name: str, change: Any, status: int, code: str
) -> None:
    session, card = await books.bound()
    body = prepare_case(books, session, card, change)
    refused = await books.prepare(session, body, status)
    assert refused["ok"] is False and refused["code"] == code, name
    assert books.service.live_proposals == 0
    assert absent(state_file)


async def test_an_unknown_session_is_404(books: Books) -> None:
    _, card = await books.bound()
    body = books.prepare_body("missing-session", card)
    refused = await books.prepare("missing-session", body, 404)
    assert refused["code"] == "OPENING_WORLDBOOK_SESSION_NOT_FOUND"


COMMIT_CASES: list[tuple[str, Any, str]] = [
    ("not an object", "x", INVALID),
    ("unknown field", {"extra": True}, INVALID),
    ("missing field", {"drop": "operationId"}, INVALID),
    ("revision type", {"expectedRevision": "0"}, INVALID),
    ("revision negative", {"expectedRevision": -1}, INVALID),
    ("revision bool", {"expectedRevision": False}, INVALID),
    ("operation type", {"operationId": 5}, INVALID),
    ("operation empty", {"operationId": ""}, INVALID),
    ("proposal type", {"proposalId": None}, INVALID),
    ("identity type", {"sourceIdentity": []}, INVALID),
    ("reviewed string", {"reviewed": "true"}, "OPENING_WORLDBOOK_CONFIRMATION_REQUIRED"),
]


@pytest.mark.parametrize(("name", "change", "code"), COMMIT_CASES)
async def test_bad_commit_input(
    books: Books, state_file: Path, name: str, change: Any, code: str
) -> None:
    session, card = await books.bound()
    proposal = await books.prepare(session, books.prepare_body(session, card))
    body: Any = books.commit_body(proposal)
    if isinstance(change, dict):
        change = dict(change)
        if "drop" in change:
            del body[change.pop("drop")]
        body = {**body, **change}
    else:
        body = change
    refused = await books.commit(session, body, 400)
    assert refused["ok"] is False and refused["code"] == code, name
    assert absent(state_file)
    # The proposal is untouched: the proper commit still works.
    assert (await books.commit(session, books.commit_body(proposal)))["inserted"] == 3


async def test_oversized_bodies_are_413_and_change_nothing(books: Books, state_file: Path) -> None:
    session, card = await books.bound()
    base = f"/sessions/{session}/opening-worldbook"
    big = json.dumps({"openingId": "x" * PREPARE_BODY_LIMIT}).encode()
    status, answer = await books.raw("POST", base + "/prepare", big)
    assert status == 413 and answer["code"] == "BODY_TOO_LARGE"
    big = json.dumps({"operationId": "x" * COMMIT_BODY_LIMIT}).encode()
    status, answer = await books.raw("POST", base + "/commit", big)
    assert status == 413 and answer["code"] == "BODY_TOO_LARGE"
    # A snapshot over the 4 MiB content cap (the body itself fits).
    body = books.prepare_body(session, card)
    content = "x" * ((4 << 20) + 1)
    body["identitySource"] = {
        "url": snapshot()["url"],
        "sha256": hashlib.sha256(content.encode()).hexdigest(),
        "content": content,
    }
    status, answer = await books.raw("POST", base + "/prepare", json.dumps(body).encode())
    assert status == 413 and answer["code"] == "OPENING_WORLDBOOK_SNAPSHOT_TOO_LARGE"
    assert books.service.live_proposals == 0
    assert absent(state_file)


async def test_malformed_json_changes_nothing(books: Books, state_file: Path) -> None:
    session, _ = await books.bound()
    status, answer = await books.raw(
        "POST", f"/sessions/{session}/opening-worldbook/prepare", b"{nope"
    )
    assert status == 400 and answer["ok"] is False
    assert books.service.live_proposals == 0 and absent(state_file)
