#!/usr/bin/env python3
"""Benchmark world-book activation against a naive per-key-regex baseline, in one process.

The baseline does what SillyTavern's scan loop does for each entry: test every key with its own
(pre-compiled) whole-word regex over the lower-cased scan buffer. The engine run is a full
:func:`innkeeper_tavern.worldbook.activate` (matching, groups, probability, budget, positions and
decisions) with the compiled matcher cached per book revision. Prints medians and ratios; no
assertion is made about timings.

Usage: uv run --no-sync python tools/bench_worldbook.py [--repeat N] [--quick]
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import time
from collections.abc import Callable

from innkeeper_tavern.formats.worldbook import WorldBook, WorldBookEntry
from innkeeper_tavern.worldbook import (
    ActivationContext,
    ActivationMessage,
    ActivationRequest,
    ActivationSettings,
    BookInput,
    MatcherCache,
    ScanLimits,
    activate,
    compile_book,
)

KEYS_PER_ENTRY = 3
#: Messages in the scan buffer (the contract's default message cap); their size scales with it.
MESSAGES = 128
#: Fraction of vocabulary words that are also keys; keeps activations realistic (tens, not all).
KEY_HIT_RATE = 0.002


def make_book(entries: int, rng: random.Random) -> WorldBook:
    """``entries`` entries × 3 distinct keys, some grouped, mixed order and probability."""
    out = []
    for i in range(entries):
        keys = tuple(f"lorekey{i}x{k}" for k in range(KEYS_PER_ENTRY))
        out.append(
            WorldBookEntry(
                uid=i,
                keys=keys,
                content=f"Entry {i}: " + "lore " * 20,
                order=rng.randint(0, 200),
                group=f"g{i % 50}" if i % 7 == 0 else "",
                probability=100 if i % 5 else 60,
            )
        )
    return WorldBook(entries=tuple(out))


def make_messages(total_chars: int, entries: int, rng: random.Random) -> list[str]:
    """Prose-like messages: common words plus, rarely, an entry key."""
    vocabulary = [
        "the",
        "a",
        "of",
        "and",
        "to",
        "in",
        "is",
        "was",
        "he",
        "she",
        "it",
        "they",
        "ship",
        "harbor",
        "night",
        "storm",
    ]
    messages: list[str] = []
    message_chars = total_chars // MESSAGES
    for _ in range(MESSAGES):
        words: list[str] = []
        size = 0
        while size < message_chars:
            if rng.random() < KEY_HIT_RATE:
                word = f"LoreKey{rng.randrange(entries)}x{rng.randrange(KEYS_PER_ENTRY)}"
            else:
                word = rng.choice(vocabulary)
            words.append(word)
            size += len(word) + 1
        messages.append(" ".join(words)[:message_chars])
    return messages


#: Entries the baseline actually runs; its time is scaled linearly to the whole book (each
#: entry's regex tests are independent, so the cost is linear in entries). Running all 10,000
#: entries over 1 MiB would take hours.
BASELINE_SAMPLE = 200
#: Smaller sample for buffers above 64 KiB.
BASELINE_SAMPLE_LARGE = 25


def baseline(book: WorldBook, buffer: str, style: str, sample_size: int) -> Callable[[], int]:
    r"""ST's loop: one compiled whole-word regex per key, tested entry by entry.

    ``style`` ``"st"`` is ST's own pattern ``(?:^|\W)key(?:$|\W)``; ``"lookaround"`` uses
    ``(?<![A-Za-z0-9_])key(?![A-Za-z0-9_])``; ``"substring"`` is a bare ``key in buffer`` loop.
    """
    sample = book.entries[:sample_size]

    def make(key: str) -> str:
        escaped = re.escape(key.lower())
        if style == "st":
            return rf"(?:^|\W){escaped}(?:$|\W)"
        return rf"(?<![A-Za-z0-9_]){escaped}(?![A-Za-z0-9_])"

    lowered = buffer.lower()
    if style == "substring":
        # The cheapest naive loop: `key in buffer`, no whole-word check at all.
        needles = [[k.lower() for k in entry.keys] for entry in sample]

        def run_substring() -> int:
            return sum(1 for keys in needles if any(k in lowered for k in keys))

        return run_substring
    compiled = [[re.compile(make(k), re.ASCII) for k in entry.keys] for entry in sample]

    def run() -> int:
        hits = 0
        for patterns in compiled:
            for pattern in patterns:
                if pattern.search(lowered):
                    hits += 1
                    break
        return hits

    return run


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def measure(entries: int, chars: int, repeat: int, with_baseline: bool) -> dict[str, float]:
    rng = random.Random(entries * 31 + chars)
    book = make_book(entries, rng)
    messages = make_messages(chars, entries, rng)
    context = ActivationContext(
        messages=tuple(
            ActivationMessage(id=str(i), role="user" if i % 2 else "assistant", text=t)
            for i, t in enumerate(messages)
        )
    )
    settings = ActivationSettings(
        scan_depth=len(messages), include_names=False, recursive=False, max_context_tokens=200_000
    )
    limits = ScanLimits(max_messages=1024, max_chars=chars + 4096)
    started = time.perf_counter()
    compile_book("bench", book).mode(False)
    cold_ms = (time.perf_counter() - started) * 1000
    cache = MatcherCache()
    books = [BookInput(resource_id="bench", book=book, revision=1)]

    def engine() -> int:
        request = ActivationRequest(
            books=books, context=context, settings=settings, seed=7, scan_limits=limits
        )
        return len(activate(request, cache).activated)

    engine()  # warm the cache: the compiled matcher is reused per book revision
    result = {"engine": median_ms(engine, repeat), "cold": cold_ms, "activated": engine()}
    if with_baseline:
        buffer = "\x01" + "\n\x01".join(reversed(messages))
        size = BASELINE_SAMPLE if chars <= 64 * 1024 else BASELINE_SAMPLE_LARGE
        scale = len(book.entries) / min(len(book.entries), size)
        for style in ("st", "lookaround", "substring"):
            run = baseline(book, buffer, style, size)
            result[f"baseline_{style}"] = median_ms(run, 3) * scale
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="skip the growth table")
    args = parser.parse_args()

    head = measure(10_000, 64 * 1024, args.repeat, with_baseline=True)
    st, look, engine = head["baseline_st"], head["baseline_lookaround"], head["engine"]
    print("10,000 entries x 3 keys, 64 KiB scan buffer")
    print(f"  baseline, ST pattern (?:^|\\W)k(?:$|\\W) (median): {st:11.2f} ms")
    print(f"  baseline, lookaround pattern          (median): {look:11.2f} ms")
    print(
        f"  naive substring (no whole-word) loop  (median): {head['baseline_substring']:11.2f} ms"
    )
    print(f"  engine, full activation               (median): {engine:11.2f} ms")
    print(f"  ratio ST-pattern baseline / engine           : {st / engine:11.1f} x")
    print(f"  ratio lookaround baseline / engine           : {look / engine:11.1f} x")
    sub = head["baseline_substring"]
    print(f"  ratio substring loop / engine                : {sub / engine:11.1f} x")
    print(f"  cold build (compile + automaton)             : {head['cold']:11.2f} ms")
    print(f"  activated entries                            : {head['activated']:11.0f}")
    print(
        f"  (baselines run the first {BASELINE_SAMPLE} entries, {BASELINE_SAMPLE_LARGE} above"
        " 64 KiB, and scale linearly)"
    )
    if args.quick:
        return
    print("\ngrowth: engine median / lookaround baseline / ratio / cold build (ms)")
    for entries in (1_000, 10_000):
        for chars in (8 * 1024, 64 * 1024, 1024 * 1024):
            row = measure(entries, chars, max(5, args.repeat // 2), with_baseline=True)
            print(
                f"  {entries:>6,} entries, {chars // 1024:>5} KiB: engine {row['engine']:8.2f}"
                f"  baseline {row['baseline_lookaround']:10.2f}"
                f"  ratio {row['baseline_lookaround'] / row['engine']:8.1f}x"
                f"  (ST pattern {row['baseline_st'] / row['engine']:9.1f}x,"
                f" substring {row['baseline_substring'] / row['engine']:6.1f}x)"
                f"  cold {row['cold']:7.2f}"
            )


if __name__ == "__main__":
    main()
