"""The inbox as a projection of durable ``agent/inbox/spliced`` events (pure, no I/O).

An agent's inbox has two queues: ``next-turn`` (queued prompts) and ``next-step`` (steering for
the running turn). Every change is first planned as an :class:`InboxSpliced` event, appended to
the log, and only then applied here, so replaying a session's splices always rebuilds the live
inbox (docs/contract/sessions.md#inbox; ``docs/contract/loader.md#activation-input``).

A fork starts with an empty inbox: build its projection with ``after_seq=header.seed_length`` so
inherited splices are ignored (forks copy no queued input).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

from innkeeper_hostapi.sessions import (
    InboxItem,
    InboxSpliced,
    InboxTarget,
    InvalidSessionArgument,
    SessionEvent,
)

__all__ = ["MAX_QUEUED_ITEMS", "InboxProjection", "InvalidSplice"]

#: Most items one queue may hold (``spec``: queued-message hard cap 1,024).
MAX_QUEUED_ITEMS: Final = 1024

_TARGETS: Final[tuple[InboxTarget, ...]] = ("next-turn", "next-step")


class InvalidSplice(InvalidSessionArgument):
    """A splice does not fit the queue it edits (or its ``op`` does not match its shape)."""

    code = "invalid-splice"


class InboxProjection:
    """Both queues of one session's inbox, plus the seq that inserted each queued item."""

    def __init__(self) -> None:
        self._items: dict[InboxTarget, list[InboxItem]] = {t: [] for t in _TARGETS}
        self._origins: dict[InboxTarget, list[int]] = {t: [] for t in _TARGETS}
        self.invalid_events = 0
        self.last_claim_seq: int | None = None

    @classmethod
    def from_events(cls, events: Iterable[SessionEvent], *, after_seq: int = 0) -> InboxProjection:
        """Replay the splices with ``seq > after_seq``; invalid ones are counted and skipped."""
        projection = cls()
        for event in events:
            if event.seq > after_seq and isinstance(event.data, InboxSpliced):
                try:
                    projection.apply(event.seq, event.data)
                except InvalidSplice:
                    projection.invalid_events += 1
        return projection

    def queue(self, target: InboxTarget) -> tuple[InboxItem, ...]:
        """The items waiting in ``target``, oldest first."""
        return tuple(self._items[target])

    def __len__(self) -> int:
        return sum(len(items) for items in self._items.values())

    # ------------------------------------------------------------------ applying

    def apply(self, seq: int, splice: InboxSpliced) -> None:
        """Apply a durable splice (``seq`` is its event seq). Raises :class:`InvalidSplice`."""
        self._check(splice)
        items, origins = self._items[splice.target], self._origins[splice.target]
        end = splice.start + splice.removed_count
        items[splice.start : end] = splice.inserted
        origins[splice.start : end] = [seq] * len(splice.inserted)
        if splice.op == "claim":
            self.last_claim_seq = seq

    # ------------------------------------------------------------------ planning

    def plan_insert(
        self, target: InboxTarget, items: Sequence[InboxItem], *, turn: int | None = None
    ) -> InboxSpliced:
        """Append ``items`` to ``target`` (``prompt`` with mode queue → next-turn, steer →
        next-step)."""
        splice = InboxSpliced(
            op="insert",
            target=target,
            start=len(self._items[target]),
            inserted=tuple(items),
            turn=turn,
        )
        self._check(splice)
        return splice

    def plan_replace(
        self, target: InboxTarget, start: int, count: int, items: Sequence[InboxItem]
    ) -> InboxSpliced:
        """Replace ``count`` queued items from ``start`` with ``items``."""
        splice = InboxSpliced(
            op="replace", target=target, start=start, removed_count=count, inserted=tuple(items)
        )
        self._check(splice)
        return splice

    def plan_cancel(
        self, target: InboxTarget, start: int = 0, count: int | None = None
    ) -> InboxSpliced | None:
        """Drop ``count`` items from ``start`` (all by default); ``None`` if nothing to drop."""
        available = len(self._items[target]) - start
        removed = available if count is None else count
        if removed <= 0:
            return None
        splice = InboxSpliced(op="cancel", target=target, start=start, removed_count=removed)
        self._check(splice)
        return splice

    def plan_claim(
        self, target: InboxTarget, *, count: int | None = None, turn: int | None = None
    ) -> InboxSpliced | None:
        """Take the oldest ``count`` items (all by default) for the running turn. The splice's
        ``claim_event_seqs`` are the seqs that inserted them. ``None`` if the queue is empty."""
        queued = len(self._items[target])
        removed = queued if count is None else min(count, queued)
        if removed <= 0:
            return None
        seqs = tuple(sorted(set(self._origins[target][:removed])))
        return InboxSpliced(
            op="claim",
            target=target,
            start=0,
            removed_count=removed,
            turn=turn,
            claim_event_seqs=seqs,
        )

    def plan_clear(self) -> list[InboxSpliced]:
        """Cancel everything queued in both queues (e.g. a child right after a fork)."""
        return [s for t in _TARGETS if (s := self.plan_cancel(t)) is not None]

    def _check(self, splice: InboxSpliced) -> None:
        """Validate against the current queues without changing them."""
        _check_shape(splice)
        items = self._items[splice.target]
        if splice.start + splice.removed_count > len(items) or splice.start > len(items):
            raise InvalidSplice(
                f"splice {splice.start}+{splice.removed_count} outside a queue of {len(items)}"
            )
        if len(items) - splice.removed_count + len(splice.inserted) > MAX_QUEUED_ITEMS:
            raise InvalidSplice(f"queue {splice.target} would exceed {MAX_QUEUED_ITEMS} items")


def _check_shape(splice: InboxSpliced) -> None:
    removes, inserts = splice.removed_count > 0, bool(splice.inserted)
    expected = {
        "insert": (False, True),
        "replace": (True, True),
        "cancel": (True, False),
        "claim": (True, False),
    }[splice.op]
    if (removes, inserts) != expected:
        raise InvalidSplice(f"an {splice.op} splice cannot remove={removes} insert={inserts}")
