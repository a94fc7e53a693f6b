"""Entries past the token budget are decided when read: the explanation is the one the eager
path gives.

A dense book walks its own order and leaves the entries met after the overflow to a deferred
tail (docs/worldbook.md#wi-selection). Every decision and every audit record read afterwards must
equal what the eager path (each entry's verdict written as the loop meets it) records.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from innkeeper_tavern.pure.formats.worldbook import SelectiveLogic, WorldBook, WorldBookEntry
from innkeeper_tavern.pure.worldbook import (
    ActivationContext,
    ActivationMessage,
    ActivationSettings,
    BookInput,
    BookSource,
    MatcherCache,
    Reason,
    activate,
    audit_books,
)
from innkeeper_tavern.pure.worldbook.engine import ActivationRequest, _Scan
from innkeeper_tavern.pure.worldbook.model import ActivationResult

from .conftest import parse_corpus

_WORDS = [f"w{i}" for i in range(60)]


def _dense_book(rng: random.Random, size: int = 400) -> WorldBook:
    """Entries keyed from a small vocabulary: most match, the budget keeps a few."""
    entries = [_entry(uid, uid % 11, rng) for uid in range(size)]
    return WorldBook(entries=tuple(entries))


def _entry(uid: int, kind: int, rng: random.Random) -> WorldBookEntry:
    return WorldBookEntry(
        uid=uid,
        keys=tuple(rng.choice(_WORDS) for _ in range(2)),
        secondary_keys=(rng.choice(_WORDS), "nowhere") if kind in (1, 2) else (),
        selective_logic=SelectiveLogic.AND_ALL if kind == 2 else SelectiveLogic.AND_ANY,
        content=f"Entry {uid}: " + "lore " * rng.randint(5, 40) + ("{{char}}" if kind == 8 else ""),
        order=rng.randint(0, 50),
        ignore_budget=kind == 3,
        probability=50 if kind == 4 else 100,
        case_sensitive=True if kind == 5 else None,
        match_whole_words=False if kind == 6 else None,
        scan_depth=1 if kind == 7 else None,
        delay_until_recursion=1 if uid % 97 == 5 else 0,
    )


def _chat(rng: random.Random) -> ActivationContext:
    texts = [" ".join(rng.choice(_WORDS[:40]) for _ in range(30)) for _ in range(6)]
    return ActivationContext(
        messages=tuple(
            ActivationMessage(id=str(i), role="user" if i % 2 else "assistant", text=t)
            for i, t in enumerate(texts)
        )
    )


def _both(request: ActivationRequest, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    """(lazy, eager) results of ``request``; the lazy one from a warm cache (what the book
    keeps per revision, its order and the entries not known to be deferrable, made by the
    earlier turns), checked against a cold one's."""
    warm = MatcherCache()
    cold = activate(request, warm)
    for _ in range(2):
        lazy = activate(request, warm)
        assert list(lazy.decisions) == list(cold.decisions)
    with monkeypatch.context() as patch:
        patch.setattr(_Scan, "lazy", False)
        eager = activate(request, MatcherCache())
    return lazy, eager


def _same(
    lazy: ActivationResult, eager: ActivationResult, books: list[BookInput], name: str
) -> None:
    assert list(lazy.decisions) == list(eager.decisions), name
    assert audit_books(books, lazy) == audit_books(books, eager), name
    assert lazy.activated == eager.activated, name
    assert lazy.positions == eager.positions, name
    assert lazy.budget == eager.budget, name


@pytest.mark.parametrize("seed", range(6))
def test_dense_book_past_the_budget_explains_each_entry_as_the_eager_path(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(seed)
    book = _dense_book(rng)
    books = [BookInput(resource_id="dense", book=book, revision=1)]
    request = ActivationRequest(
        books=books,
        context=_chat(rng),
        settings=ActivationSettings(
            scan_depth=6, budget_cap=150 + 50 * seed, recursive=seed % 2 == 0
        ),
        seed=seed,
        forced=frozenset({"dense:7", "dense:30"}) if seed % 3 == 0 else frozenset(),
        substitute=lambda text: text.replace("{{char}}", "Seraphina"),
    )
    lazy, eager = _both(request, monkeypatch)
    _same(lazy, eager, books, f"seed {seed}")
    assert lazy.budget.overflowed
    reasons = {d.reason for d in lazy.decisions}
    assert Reason.BUDGET in reasons
    budget = [d for d in lazy.decisions if d.reason == Reason.BUDGET]
    assert all(d.tokens is not None and "reach the budget" in d.detail for d in budget)
    # every entry read through the decision list, one by one, reads the same again
    assert [lazy.decisions[i] for i in range(len(book.entries))] == list(eager.decisions)


def test_two_books_past_the_budget_explain_each_entry_as_the_eager_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = random.Random(42)
    books = [
        BookInput(resource_id="a", book=_dense_book(rng, 150), revision=1),
        BookInput(
            resource_id="b", book=_dense_book(rng, 150), revision=1, source=BookSource.CHARACTER
        ),
    ]
    request = ActivationRequest(
        books=books,
        context=_chat(rng),
        settings=ActivationSettings(scan_depth=6, budget_cap=200),
        seed=3,
    )
    lazy, eager = _both(request, monkeypatch)
    _same(lazy, eager, books, "two books")
    assert lazy.budget.overflowed


def test_corpus_books_past_a_small_budget_explain_each_entry_as_the_eager_path(
    corpus: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, raw, shape in corpus:
        book = parse_corpus(raw, shape)
        keys = [k for e in book.entries for k in e.keys if k.strip()]
        rng = random.Random(name)
        texts = [" ".join(rng.sample(keys, min(len(keys), 40))) for _ in range(4)] or ["hello"]
        books = [BookInput(resource_id=name, book=book, revision=1)]
        for cap in (1, 40, 400):
            request = ActivationRequest(
                books=books,
                context=ActivationContext(
                    messages=tuple(
                        ActivationMessage(id=str(i), role="user", text=t)
                        for i, t in enumerate(texts)
                    )
                ),
                settings=ActivationSettings(scan_depth=4, budget_cap=cap),
                seed=cap,
            )
            lazy, eager = _both(request, monkeypatch)
            _same(lazy, eager, books, f"{name} cap {cap}")
