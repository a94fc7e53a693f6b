"""Usage decisions: with no handler the source default (use) applies; while a manager is
registered its missing decision or a deny suppresses the book; removal restores the default."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from book_harness import Books, fired

from innkeeper_tavern.features.opening_books.service import MANAGER_PROVIDER_ID

TEXT = "I try the cellar trapdoor."


def suppressed(record: dict[str, Any], rid: str) -> str | None:
    for item in record["diagnostics"]:
        details = item.get("details", {})
        if item["code"] == "OPENING_WORLDBOOK_SUPPRESSED" and details["resourceId"] == rid:
            return str(details["reason"])
    return None


async def test_a_manager_decides_and_removal_restores_the_default(books: Books) -> None:
    session, card = await books.bound()
    rid = (await books.committed(session, card))["resourceId"]
    seen: list[Mapping[str, Any]] = []
    answer: dict[str, Any] | None = None

    async def manager(request: Mapping[str, Any]) -> Mapping[str, Any] | None:
        seen.append(request)
        return answer

    dispose = books.service.register_usage(manager, provider_id=MANAGER_PROVIDER_ID)
    assert [i["managementMode"] for i in await books.list_bound(session) if i["id"] == rid] == [
        "managed"
    ]
    # No decision: suppressed.
    await books.prompt_and_wait(session, TEXT)
    record = books.audit(session)
    assert fired(record, rid) == [] and suppressed(record, rid) == "missing-decision"
    [summary] = [r for r in record["resources"]["worldBooks"] if r["id"] == rid]
    assert summary["kind"] == "session-opening-world-book"
    assert summary["suppressed"] == "missing-decision"
    assert "bolted from below" not in books.provider.requests[-1].messages[0].content
    assert seen[-1]["id"] == rid and seen[-1]["scope"]["sessionId"] == session
    # A deny: suppressed.
    answer = {"enabled": False, "reason": "not for this run"}
    await books.prompt_and_wait(session, TEXT)
    assert suppressed(books.audit(session), rid) == "denied"
    # An allow: used.
    answer = {"enabled": True}
    await books.prompt_and_wait(session, TEXT)
    assert fired(books.audit(session), rid) == [f"{rid}:0"]
    # Removal restores the source default.
    answer = {"enabled": False}
    dispose()
    await books.prompt_and_wait(session, TEXT)
    record = books.audit(session)
    assert fired(record, rid) == [f"{rid}:0"] and suppressed(record, rid) is None
    assert [i["managementMode"] for i in await books.list_bound(session) if i["id"] == rid] == [
        "native"
    ]


async def test_a_generic_handler_may_abstain_but_its_deny_counts(books: Books) -> None:
    session, card = await books.bound()
    rid = (await books.committed(session, card))["resourceId"]
    answer: dict[str, Any] | None = None

    async def policy(request: Mapping[str, Any]) -> Mapping[str, Any] | None:
        return answer

    dispose = books.service.register_usage(policy)
    await books.prompt_and_wait(session, TEXT)
    assert fired(books.audit(session), rid) == [f"{rid}:0"]  # abstention: the default
    answer = {"enabled": False}
    await books.prompt_and_wait(session, TEXT)
    assert suppressed(books.audit(session), rid) == "denied"
    dispose()


async def test_a_failing_manager_suppresses(books: Books) -> None:
    session, card = await books.bound()
    rid = (await books.committed(session, card))["resourceId"]

    async def broken(request: Mapping[str, Any]) -> Mapping[str, Any] | None:
        raise RuntimeError("manager down")

    dispose = books.service.register_usage(broken, provider_id=MANAGER_PROVIDER_ID)
    await books.prompt_and_wait(session, TEXT)
    assert suppressed(books.audit(session), rid) == "handler-failed"
    dispose()
