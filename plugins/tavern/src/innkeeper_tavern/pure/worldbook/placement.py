"""After the scan loops: host caps on the activated list, positions, new timed effects, and the
per-book decisions (built when read, :mod:`.decisions`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial

from innkeeper_tavern.pure.formats.worldbook import Position, Role, WorldBookEntry
from innkeeper_tavern.pure.worldbook.cache import RefusedBook
from innkeeper_tavern.pure.worldbook.candidates import Item, Verdict
from innkeeper_tavern.pure.worldbook.decisions import (
    BookDecisions,
    DecisionList,
    LazyDecisions,
    refused_decisions,
    static_decision,
)
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
    activated_order: Sequence[Item],
    verdicts: Mapping[tuple[int, int], Verdict],
    contents: Mapping[tuple[int, int], str],
    limits: HostLimits,
    postprocess: Callable[[str, WorldBookEntry], str] | None,
) -> list[tuple[Item, str]]:
    """The host caps (candidates, lore bytes) over the activated entries in rank order, then
    post-processing; returns what is placed, each with its final content."""
    ranked = sorted(activated_order, key=lambda item: -item.entry.entry.order)
    placed: list[tuple[Item, str]] = []
    kept = 0
    lore_bytes = 0
    bytes_full = False
    for item in ranked:
        verdict = verdicts[item.key]
        content = contents[item.key]
        if kept >= limits.max_lore_candidates:
            verdict.activated = False
            verdict.reason = Reason.HOST_CANDIDATE_CAP
            verdict.detail = f"more than {limits.max_lore_candidates} activated entries"
            continue
        size = len(content.encode("utf-8"))
        if bytes_full or lore_bytes + size > limits.max_lore_bytes:
            bytes_full = True
            verdict.activated = False
            verdict.reason = Reason.HOST_BYTES_CAP
            verdict.detail = f"lore bodies exceed {limits.max_lore_bytes} bytes"
            continue
        kept += 1
        lore_bytes += size
        entry = item.entry.entry
        if postprocess is not None:
            content = postprocess(content, entry)
        if not content.strip():
            verdict.activated = False
            verdict.reason = Reason.EMPTY_CONTENT
            continue
        if entry.position == Position.OUTLET and not entry.outlet_name:
            verdict.activated = False
            verdict.reason = Reason.OUTLET_UNNAMED
            continue
        placed.append((item, content))
    return placed


def new_timed_state(
    placed: Sequence[tuple[Item, str]], state: TimedEffectsState, clock: int, dry_run: bool
) -> TimedEffectsState:
    """``state`` plus the sticky / cooldown effects the placed entries start (none on a dry
    run)."""
    sticky = dict(state.sticky)
    cooldown = dict(state.cooldown)
    if not dry_run:
        for item, _ in placed:
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


def activated_entries(
    placed: Sequence[tuple[Item, str]], verdicts: Mapping[tuple[int, int], Verdict]
) -> tuple[ActivatedEntry, ...]:
    """The placed entries as results, in rank order."""
    return tuple(
        ActivatedEntry(
            lore_id=item.entry.lore_id,
            resource_id=item.compiled.resource_id,
            uid=item.entry.entry.uid,
            comment=item.entry.entry.comment,
            content=content,
            position=item.entry.entry.position,
            order=item.entry.entry.order,
            depth=item.entry.entry.depth,
            role=item.entry.entry.role,
            outlet_name=item.entry.entry.outlet_name,
            tokens=verdicts[item.key].tokens or 0,
            loop=verdicts[item.key].loop,
        )
        for item, content in placed
    )


def buckets(placed: Sequence[tuple[Item, str]]) -> Positions:
    """§1.11: prepend in rank order, i.e. ascending ``order``, later activation first on ties."""
    lists: dict[Position, list[PositionedText]] = {p: [] for p in Position}
    depth_groups: dict[tuple[int, Role], list[PositionedText]] = {}
    outlets: dict[str, list[PositionedText]] = {}
    for item, content in reversed(placed):
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
    verdicts: Mapping[tuple[int, int], Verdict],
    placed: Sequence[tuple[Item, str]],
    cooldown_now: set[str],
    clock: int,
) -> DecisionList:
    """One decision per entry of every book: recorded verdicts, request-dependent rejections,
    and the shared decision of everything else."""
    placed_keys = {item.key for item, _ in placed}
    parts: list[BookDecisions] = []
    for book_index, book in enumerate(compiled):
        if book is None:
            parts.append(refused_decisions(refused[book_index]))
            continue
        # Entries (by slot) whose decision depends on this request; the rest share a cached one.
        explicit_keys = {i for b, i in verdicts if b == book_index}
        explicit_keys.update(book.dynamic)
        for lore_id in cooldown_now:
            explicit_keys.update(book.lore_index.get(lore_id, ()))
        pending: dict[int, tuple[CompiledBook, CompiledEntry, Verdict, bool]] = {}
        activated_positions: set[int] = set()
        for slot in explicit_keys:
            key = (book_index, slot)
            compiled_entry = book.entry_at(slot)
            found = verdicts.get(key)
            if found is None:
                item = Item(book_index, compiled_entry, book)
                pre = pre_checks(item, request, cooldown_now, False, clock)
                if pre is None:
                    pre = Reason.NO_KEYS if not compiled_entry.primary else Reason.NO_KEY_MATCH
                found = Verdict(reason=pre)
            position = book.position[slot]
            placed_here = key in placed_keys
            pending[position] = (book, compiled_entry, found, placed_here)
            if placed_here:
                activated_positions.add(position)
        parts.append(
            BookDecisions(
                resource_id=book.resource_id,
                book=book.book,
                explicit=LazyDecisions(pending, _decision, activated_positions),
                implicit=partial(static_decision, book),
                entries_by_uid=partial(getattr, book, "uid_entries"),
            )
        )
    return DecisionList(parts)


def _decision(
    book: CompiledBook, compiled_entry: CompiledEntry, verdict: Verdict, placed: bool
) -> EntryDecision:
    entry = compiled_entry.entry
    return EntryDecision(
        lore_id=compiled_entry.lore_id,
        resource_id=book.resource_id,
        uid=entry.uid,
        comment=entry.comment,
        activated=placed,
        reason=verdict.reason,
        detail=verdict.detail,
        matched_primary=verdict.matched_primary,
        matched_secondary=verdict.matched_secondary,
        group=entry.group,
        group_winner=verdict.group_winner,
        roll=verdict.roll,
        probability=(
            entry.probability if entry.use_probability and entry.probability < 100 else None
        ),
        tokens=verdict.tokens,
        requested_position=entry.position,
        applied_position=entry.position if placed else None,
        loop=verdict.loop,
    )
