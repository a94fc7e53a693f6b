"""JSON-ready audit records of an activation, in the shape the world-book audit publishes.

`docs/contract/audit.md#world-book-audit`: each book has ``resource``, ``budget`` and
``decisions[]``; a decision carries the entry identity and name, included/rejected status, reason,
primary/secondary keys and matches, group, probability, token cost and requested/applied position.
The summary limits (16 books, 128 decisions, clipped ids) belong to the trace writer, which passes
them here.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any, Final, cast

from innkeeper_tavern.pure.formats.worldbook import Position, Role, SelectiveLogic, WorldBookEntry
from innkeeper_tavern.pure.worldbook.decisions import BookDecisions, DecisionList
from innkeeper_tavern.pure.worldbook.matcher import uid_entries
from innkeeper_tavern.pure.worldbook.model import ActivationResult, BookInput, EntryDecision

__all__ = ["POSITION_NAMES", "audit_books", "decision_record"]

#: Stable position names used in audit records (index = ST's ``world_info_position``).
POSITION_NAMES: Final[dict[Position, str]] = {
    Position.BEFORE_CHAR: "before_character_definition",
    Position.AFTER_CHAR: "after_character_definition",
    Position.AN_TOP: "before_author_note",
    Position.AN_BOTTOM: "after_author_note",
    Position.AT_DEPTH: "at_depth",
    Position.EM_TOP: "before_example_messages",
    Position.EM_BOTTOM: "after_example_messages",
    Position.OUTLET: "outlet",
}
_ROLE_NAMES: Final = {Role.SYSTEM: "system", Role.USER: "user", Role.ASSISTANT: "assistant"}


def _clip(text: str, limit: int | None) -> str:
    if limit is None or len(text) <= limit:
        return text
    return text[: max(0, limit - 1)] + "…"


def decision_record(
    decision: EntryDecision, entry: WorldBookEntry | None, *, max_id_chars: int | None = None
) -> dict[str, Any]:
    """One decision as a camelCase JSON object (``entry`` adds the keys and group settings)."""
    record: dict[str, Any] = {
        "resourceId": decision.resource_id,
        "entryId": _clip(str(decision.uid), max_id_chars),
        "loreId": decision.lore_id,
        "entryName": decision.comment,
        "decision": "included" if decision.activated else "rejected",
        "reason": decision.reason.value,
        "detail": decision.detail,
        "primaryMatches": list(decision.matched_primary),
        "secondaryMatches": list(decision.matched_secondary),
        "groupName": decision.group or None,
        "groupWinner": decision.group_winner,
        "probability": decision.probability,
        "probabilityRoll": decision.roll,
        "tokenCost": decision.tokens,
        "requestedPosition": POSITION_NAMES[decision.requested_position],
        "appliedPosition": (
            POSITION_NAMES[decision.applied_position]
            if decision.applied_position is not None
            else None
        ),
        "loop": decision.loop,
    }
    if entry is not None:
        record["primaryKeys"] = list(entry.keys)
        record["secondaryKeys"] = list(entry.secondary_keys)
        if entry.selective and entry.secondary_keys:
            record["secondaryLogic"] = SelectiveLogic(entry.selective_logic).name.lower()
        record["groupWeight"] = entry.group_weight
        record["groupOverride"] = entry.group_override
        if entry.position == Position.AT_DEPTH:
            record["depth"] = entry.depth
            record["role"] = _ROLE_NAMES[entry.role]
    return record


def audit_books(
    books: Sequence[BookInput],
    result: ActivationResult,
    *,
    max_books: int | None = None,
    max_decisions: int | None = None,
    max_id_chars: int | None = None,
    max_resource_id_chars: int | None = None,
) -> list[dict[str, Any]]:
    """Per-book audit (`docs/contract/audit.md#world-book-audit`), books in composition order.

    Activated decisions come first inside a book so a ``max_decisions`` cut keeps what fired.
    """
    decisions_of = result.decisions
    if not isinstance(decisions_of, DecisionList):
        raise TypeError("audit_books needs the decisions of activate()")
    by_resource: dict[str, list[BookDecisions]] = {}
    for part in decisions_of.books:
        by_resource.setdefault(part.resource_id, []).append(part)
    out: list[dict[str, Any]] = []
    remaining = max_decisions
    for book_input in books[:max_books] if max_books is not None else books:
        parts = by_resource.get(book_input.resource_id, [])
        fired = [(part, i) for part in parts for i in part.activated()]
        limit = len(fired) + sum(len(p) for p in parts)
        if remaining is not None:
            limit = max(0, remaining)
        # Only the decisions kept are built; the ids of the others come from the book.
        decisions: list[tuple[BookDecisions, int, EntryDecision, bool]] = [
            (part, i, part.decision(i), False) for part, i in fired[:limit]
        ]
        if len(decisions) < limit:
            decisions.extend(
                itertools.islice(
                    (
                        (part, index, decision, shared)
                        for part in parts
                        for index, decision, shared in part.rejected_indexed()
                    ),
                    limit - len(decisions),
                )
            )
        if remaining is not None:
            remaining -= len(decisions)
        active = [_uid_text(part, i) for part, i in fired] if len(parts) > 1 else []
        if len(parts) == 1:
            (part,) = parts
            if part.uid_texts is not None:
                texts = part.uid_texts()
                active = [texts[i] for _, i in fired]
            else:
                active = [str(part.book.entries[i].uid) for _, i in fired]
        same = next((p for p in parts if p.book is book_input.book), None)
        entries = same.entries_by_uid() if same is not None else uid_entries(book_input.book)
        out.append(
            {
                "resource": {
                    "id": _clip(book_input.resource_id, max_resource_id_chars),
                    "name": book_input.name or book_input.book.name,
                    "source": book_input.source.value,
                    "format": book_input.book.source_format,
                    "entryCount": len(book_input.book.entries),
                    "matchedEntryCount": len(active),
                    "activeEntryIds": active,
                },
                "budget": {
                    "limit": result.budget.limit,
                    "used": result.budget.used,
                    "overflowed": result.budget.overflowed,
                    "bookLimit": book_input.book.token_budget,
                },
                "decisions": [
                    _record(part, index, d, shared, entries, max_id_chars)
                    for part, index, d, shared in decisions
                ],
            }
        )
    return out


def _uid_text(part: BookDecisions, index: int) -> str:
    """``str(uid)`` of entry ``index`` of ``part``."""
    return part.uid_texts()[index] if part.uid_texts else str(part.book.entries[index].uid)


def _record(
    part: BookDecisions,
    index: int,
    decision: EntryDecision,
    shared: bool,
    entries: dict[str, WorldBookEntry],
    max_id_chars: int | None,
) -> dict[str, Any]:
    """:func:`decision_record`, kept with the book revision (each turn gets its own copy): a
    shared decision is the same object every turn, and an entry's own decision is often equal to
    the one of its last turn (a dense book keeps the same entries turn after turn)."""
    cache = part.records
    entry = entries.get(str(decision.uid))
    if cache is not None:
        hit = cache.get(index)
        if (
            hit is not None
            and (hit[0] is decision or (not shared and hit[0] == decision))
            and hit[1] == (max_id_chars, entry)
        ):
            return _copy(cast(dict[str, Any], hit[2]))
    record = decision_record(decision, entry, max_id_chars=max_id_chars)
    if cache is not None:
        cache[index] = (decision, (max_id_chars, entry), _copy(record))
    return record


#: The list-valued fields of :func:`decision_record` (the others are scalars).
_LIST_FIELDS: Final = ("primaryMatches", "secondaryMatches", "primaryKeys", "secondaryKeys")


def _copy(record: dict[str, Any]) -> dict[str, Any]:
    """A record no later change of the other can reach: a copy of the object (in C) with its
    lists copied (its other values are scalars)."""
    out = record.copy()
    for key in _LIST_FIELDS:
        value = out.get(key)
        if value is not None:
            out[key] = list(value)
    return out
