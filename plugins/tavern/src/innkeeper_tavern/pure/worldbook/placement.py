"""After the scan loops: host caps on the activated list, positions, new timed effects, and the
per-book decisions (built when read, :mod:`.decisions`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import cast

from innkeeper_tavern.pure.formats.worldbook import Position, Role, WorldBookEntry
from innkeeper_tavern.pure.worldbook.cache import RefusedBook
from innkeeper_tavern.pure.worldbook.candidates import Deferred, Item, Verdict
from innkeeper_tavern.pure.worldbook.decisions import (
    BookDecisions,
    DecisionList,
    LazyDecisions,
    refused_decisions,
    static_decision,
)
from innkeeper_tavern.pure.worldbook.deferral import DeferredTail, latest_deferral
from innkeeper_tavern.pure.worldbook.matcher import CompiledBook, CompiledEntry
from innkeeper_tavern.pure.worldbook.model import (
    ActivatedEntry,
    DepthGroup,
    EntryDecision,
    HostLimits,
    PositionedText,
    Positions,
    Reason,
    TimedEffect,
    TimedEffectsState,
)
from innkeeper_tavern.pure.worldbook.request import ActivationRequest
from innkeeper_tavern.pure.worldbook.selection import pre_checks

__all__ = ["activated_entries", "book_decisions", "buckets", "cap_and_place", "new_timed_state"]


def cap_and_place(
    activated: Sequence[tuple[Item, Verdict, str]],
    limits: HostLimits,
    postprocess: Callable[[str, WorldBookEntry], str] | None,
    ranked: bool = False,
) -> list[tuple[Item, Verdict, str]]:
    """The host caps (candidates, lore bytes) over the activated entries in rank order, then
    post-processing; returns what is placed, each with its final content.

    ``ranked``: ``activated`` is already in that order (one book, one loop activated entries,
    no sticky entry first), so the stable sort by ``order`` would not move anything.
    """
    if not ranked:
        activated = sorted(activated, key=lambda found: -found[0].entry.entry.order)
    placed: list[tuple[Item, Verdict, str]] = []
    kept = 0
    lore_bytes = 0
    bytes_full = False
    max_candidates, max_bytes = limits.max_lore_candidates, limits.max_lore_bytes
    for item, verdict, content in activated:
        if kept >= max_candidates:
            verdict.activated = False
            verdict.reason = Reason.HOST_CANDIDATE_CAP
            verdict.detail = f"more than {max_candidates} activated entries"
            continue
        # An ASCII text has as many UTF-8 bytes as characters (no encoding needed to count).
        size = len(content) if content.isascii() else len(content.encode("utf-8"))
        if bytes_full or lore_bytes + size > max_bytes:
            bytes_full = True
            verdict.activated = False
            verdict.reason = Reason.HOST_BYTES_CAP
            verdict.detail = f"lore bodies exceed {max_bytes} bytes"
            continue
        kept += 1
        lore_bytes += size
        entry = item.entry.entry
        if postprocess is not None:
            content = postprocess(content, entry)
        if not content or content.isspace():  # nothing once stripped
            verdict.activated = False
            verdict.reason = Reason.EMPTY_CONTENT
            continue
        if entry.position == Position.OUTLET and not entry.outlet_name:
            verdict.activated = False
            verdict.reason = Reason.OUTLET_UNNAMED
            continue
        placed.append((item, verdict, content))
    return placed


def new_timed_state(
    placed: Sequence[tuple[Item, Verdict, str]], state: TimedEffectsState, clock: int, dry_run: bool
) -> TimedEffectsState:
    """``state`` plus the sticky / cooldown effects the placed entries start (none on a dry
    run)."""
    sticky = dict(state.sticky)
    cooldown = dict(state.cooldown)
    if not dry_run:
        for item, _, _ in placed:
            entry = item.entry.entry
            lore_id = item.entry.lore_id
            if entry.sticky and lore_id not in sticky:
                sticky[lore_id] = TimedEffect(
                    hash=item.entry.fingerprint, start=clock, end=clock + entry.sticky
                )
            if entry.cooldown and lore_id not in cooldown:
                cooldown[lore_id] = TimedEffect(
                    hash=item.entry.fingerprint, start=clock, end=clock + entry.cooldown
                )
    return TimedEffectsState(sticky=sticky, cooldown=cooldown)


def activated_entries(placed: Sequence[tuple[Item, Verdict, str]]) -> tuple[ActivatedEntry, ...]:
    """The placed entries as results, in rank order.

    An entry placed with the same content, token count and loop as in an earlier activation
    of its book revision gets the same (immutable) result object again.
    """
    out: list[ActivatedEntry] = []
    book: CompiledBook | None = None
    kept: dict[int, object] = {}
    for item, verdict, content in placed:
        if item.compiled is not book:
            book = item.compiled
            kept = _kept(book, "activated")
        slot = item.entry.index
        tokens = verdict.tokens or 0
        found = kept.get(slot)
        if not (
            isinstance(found, ActivatedEntry)
            and found.tokens == tokens
            and found.loop == verdict.loop
            and found.content == content
        ):
            entry = item.entry.entry
            found = kept[slot] = ActivatedEntry(
                lore_id=item.entry.lore_id,
                resource_id=item.compiled.resource_id,
                uid=entry.uid,
                comment=entry.comment,
                content=content,
                position=entry.position,
                order=entry.order,
                depth=entry.depth,
                role=entry.role,
                outlet_name=entry.outlet_name,
                tokens=tokens,
                loop=verdict.loop,
            )
        out.append(found)
    return tuple(out)


def _kept(book: CompiledBook, name: str) -> dict[int, object]:
    """Slot → a result object of the book revision kept for the next activation."""
    found = book.engine_cache.get(name)
    if not isinstance(found, dict):
        found = book.engine_cache.setdefault(name, {})
    return found  # type: ignore[return-value]


def buckets(placed: Sequence[tuple[Item, Verdict, str]]) -> Positions:
    """Prepend in rank order: ascending ``order``, later activation first on ties.

    docs/worldbook.md#wi-positions.
    """
    lists: dict[Position, list[PositionedText]] = {p: [] for p in Position}
    depth_groups: dict[tuple[int, Role], list[PositionedText]] = {}
    outlets: dict[str, list[PositionedText]] = {}
    for item, _, content in reversed(placed):
        entry = item.entry.entry
        text = PositionedText(lore_id=item.entry.lore_id, content=content)
        if entry.position == Position.AT_DEPTH:
            depth_groups.setdefault((max(0, entry.depth), entry.role), []).append(text)
        elif entry.position == Position.OUTLET:
            outlets.setdefault(entry.outlet_name, []).append(text)
        else:
            lists[entry.position].append(text)
    return Positions(
        before=tuple(lists[Position.BEFORE_CHAR]),
        after=tuple(lists[Position.AFTER_CHAR]),
        an_top=tuple(lists[Position.AN_TOP]),
        an_bottom=tuple(lists[Position.AN_BOTTOM]),
        em_top=tuple(lists[Position.EM_TOP]),
        em_bottom=tuple(lists[Position.EM_BOTTOM]),
        at_depth=tuple(
            DepthGroup(depth=depth, role=role, entries=tuple(entries))
            for (depth, role), entries in sorted(depth_groups.items())
        ),
        outlets={name: tuple(entries) for name, entries in sorted(outlets.items())},
    )


def book_decisions(
    request: ActivationRequest,
    compiled: Sequence[CompiledBook | None],
    refused: Mapping[int, RefusedBook],
    verdicts: Sequence[Mapping[int, Verdict | Deferred]],
    placed: Sequence[tuple[Item, Verdict, str]],
    cooldown_now: set[str],
    clock: int,
    tokens_of: Callable[[str], int],
    tails: list[DeferredTail] | None = None,
) -> DecisionList:
    """One decision per entry of every book: the recorded verdicts, the request-dependent
    rejections and the shared decision of everything else, each built when first read."""
    placed_slots: list[set[int]] = [set() for _ in compiled]
    for item, _, _ in placed:
        placed_slots[item.book].add(item.entry.index)
    parts: list[BookDecisions] = []
    for book_index, book in enumerate(compiled):
        if book is None:
            parts.append(refused_decisions(refused[book_index]))
            continue
        recorded = _Recorded(
            request,
            book,
            book_index,
            verdicts[book_index],
            placed_slots[book_index],
            cooldown_now,
            clock,
            tokens_of,
            tails or [],
        )
        parts.append(
            BookDecisions(
                resource_id=book.resource_id,
                book=book.book,
                explicit=LazyDecisions(
                    recorded.decision,
                    recorded.positions,
                    {book.position[slot] for slot in placed_slots[book_index]},
                ),
                implicit=partial(static_decision, book),
                entries_by_uid=partial(getattr, book, "uid_entries"),
                records=_records(book),
                uid_texts=partial(_uid_texts, book),
            )
        )
    return DecisionList(parts)


def _uid_texts(book: CompiledBook) -> list[str]:
    """Entry position → ``str(uid)`` of the book revision (kept with it)."""
    found = book.engine_cache.get("uid texts")
    if not isinstance(found, list):
        found = book.engine_cache["uid texts"] = [str(entry.uid) for entry in book.book.entries]
    return found


def _records(book: CompiledBook) -> dict[int, tuple[object, object, object]]:
    """The audit records kept with the book revision (``BookDecisions.records``)."""
    return cast(dict[int, tuple[object, object, object]], _kept(book, "records"))


class _Recorded:
    """The decisions of one book that depend on this request, made on demand: an entry the
    loops evaluated, or one whose rejection depends on the request (triggers, character filter,
    delay) or is in cooldown."""

    def __init__(
        self,
        request: ActivationRequest,
        book: CompiledBook,
        book_index: int,
        verdicts: Mapping[int, Verdict | Deferred],
        placed: set[int],
        cooldown_now: set[str],
        clock: int,
        tokens_of: Callable[[str], int],
        tails: list[DeferredTail],
    ) -> None:
        self.request = request
        self.tails = tails
        self.book = book
        self.book_index = book_index
        self.verdicts = verdicts
        self.placed = placed
        self.cooldown_now = cooldown_now
        self.clock = clock
        self.tokens_of = tokens_of
        cooling = {s for lore_id in cooldown_now for s in book.lore_index.get(lore_id, ())}
        self.checked = _dynamic_slots(book) | cooling if cooling else _dynamic_slots(book)

    def positions(self) -> list[int]:
        """Positions of the entries with a decision of their own, in entry order."""
        slots = set(self.verdicts) | self.checked
        for tail in self.tails:
            of_book = tail.slots.get(self.book_index, ())
            slots.update(s for s in of_book if tail.deferred(self.book_index, s) is not None)
        return sorted(self.book.position[slot] for slot in slots)

    def decision(self, position: int) -> EntryDecision | None:
        """The decision of the entry at ``position`` if it has one of its own."""
        book = self.book
        slot = book.slot_at[position]
        found = self.verdicts.get(slot)
        if self.tails:
            later = latest_deferral(
                self.tails, self.book_index, slot, found.loop if found is not None else -1
            )
            if later is not None:
                found = later
        if isinstance(found, Deferred):
            found = found.resolve(self._item(slot))
        verdict = found
        if verdict is None:
            if slot not in self.checked:
                return None
            compiled_entry = book.entry_at(slot)
            pre = pre_checks(self._item(slot), self.request, self.cooldown_now, False, self.clock)
            if pre is None:
                pre = Reason.NO_KEYS if not compiled_entry.primary else Reason.NO_KEY_MATCH
            verdict = Verdict(reason=pre)
        return _decision(book, book.entry_at(slot), verdict, slot in self.placed, self.tokens_of)

    def _item(self, slot: int) -> Item:
        """An item for reading one entry (not ranked: nothing sorts it)."""
        return Item(
            book=self.book_index,
            entry=self.book.entry_at(slot),
            compiled=self.book,
            key=(self.book_index, slot),
            rank=(0, 0, 0, 0, 0),
            order_key=0,
        )


def _dynamic_slots(book: CompiledBook) -> frozenset[int]:
    """:attr:`CompiledBook.dynamic` as a set (kept with the book)."""
    found = book.engine_cache.get("dynamic")
    if not isinstance(found, frozenset):
        found = frozenset(book.dynamic)
        book.engine_cache["dynamic"] = found
    return found


def _decision(
    book: CompiledBook,
    compiled_entry: CompiledEntry,
    verdict: Verdict,
    placed: bool,
    tokens_of: Callable[[str], int],
) -> EntryDecision:
    entry = compiled_entry.entry
    tokens, detail = verdict.tokens, verdict.detail
    if verdict.pending_budget is not None:
        # Rejected after the budget overflowed: what it would have cost is counted now.
        used, budget = verdict.pending_budget
        tokens = tokens_of(compiled_entry.content)
        detail = f"{used} + {tokens} tokens reach the budget {budget}"
    return EntryDecision(
        lore_id=compiled_entry.lore_id,
        resource_id=book.resource_id,
        uid=entry.uid,
        comment=entry.comment,
        activated=placed,
        reason=verdict.reason,
        detail=detail,
        matched_primary=verdict.primary(compiled_entry),
        matched_secondary=verdict.matched_secondary,
        group=entry.group,
        group_winner=verdict.group_winner,
        roll=verdict.roll,
        probability=(
            entry.probability if entry.use_probability and entry.probability < 100 else None
        ),
        tokens=tokens,
        requested_position=entry.position,
        applied_position=entry.position if placed else None,
        loop=verdict.loop,
    )
