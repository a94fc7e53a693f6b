#!/usr/bin/env python3
"""Benchmark world-book activation against SillyTavern's own loop and an Aho-Corasick floor.

Three workloads of 10,000 entries × 3 keys over a 128-message, ~64 KiB chat are written to one
JSON workload file per run:

- ``no-match`` — a realistic book (names and lore terms as keys) and a chat that mentions none of
  them: what every turn of a long story costs when nothing fires;
- ``sparse`` — the same book, the chat mentions a few dozen keys (a typical turn);
- ``dense`` — a lore-heavy book whose keys come from a 1,500-word lore vocabulary the chat uses
  all the time (thousands of entries match; the host caps what is activated).

Contenders, each on the same file:

- ``engine`` — :func:`innkeeper_tavern.pure.worldbook.activate` (full pipeline: matching, groups,
  probability, budget, host caps, positions, one decision per entry) with a warm
  :class:`~innkeeper_tavern.pure.worldbook.MatcherCache`, plus the audit summary the loader builds
  (:func:`~innkeeper_tavern.pure.worldbook.audit_books`, 128 decisions);
- ``st-node`` — SillyTavern's scan loop (``checkWorldInfo`` in ``public/scripts/world-info.js``)
  reproduced in a small Node harness written at run time to a temporary folder (our own code, no
  SillyTavern source in this repository): entries in ``order`` order, for each entry the scan
  text joined from the depth buffer, each key tested as ST does (delimited-regex check, both
  strings lower-cased, whole-word ``(?:^|\\W)key(?:$|\\W)`` RegExp built per test), secondary-key
  logic, then sorting and the token budget over what matched. Macro substitution of keys is
  skipped (that flatters ST). Requires ``node`` on ``PATH`` (skipped with a note otherwise);
- ``aho-floor`` — pyahocorasick: one automaton over every lower-cased key (built outside the
  timing), one pass over the lower-cased buffer collecting the entries whose keys occur; no
  whole-word check, no decision, no budget: the floor of "which entries could match".

Prints medians in ms and the ratios ``st-node / engine`` and ``engine / aho-floor``. It also
times a one-entry edit (the compiled form derived from the previous revision, with the entry
diff, vs a full compile) and a book over the 10,000-entry request cap (refused once, then per
turn), and a stored book edited on disk: the re-read and the compiled-form update against the
previous path (read, hash, one typed decode of the whole document, unchanged entries shared by
comparison) and the floor of reading and hashing the file. No assertions about timings: read
the numbers.

    uv run --no-sync python tools/bench_worldbook.py [--repeat 15] [--no-node]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import hashlib
import json
import random
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ahocorasick
import msgspec

from innkeeper_tavern.pure.formats.worldbook import CharacterFilter, WorldBook, WorldBookEntry
from innkeeper_tavern.pure.worldbook import (
    ActivationContext,
    ActivationMessage,
    ActivationRequest,
    ActivationSettings,
    BookInput,
    HostLimits,
    MatcherCache,
    ScanLimits,
    activate,
    audit_books,
    compile_book,
)
from innkeeper_tavern.pure.worldbook.incremental import common_prefix, share_unchanged_entries
from innkeeper_tavern.state.resources import TavernResources

ENTRIES = 10_000
KEYS_PER_ENTRY = 3
MESSAGES = 128
CHAT_CHARS = 64 * 1024
PROSE = [
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
    "road",
    "rain",
    "lantern",
    "door",
    "quiet",
    "long",
    "old",
    "cold",
    "bright",
    "inn",
    "table",
    "hand",
    "voice",
    "light",
    "wind",
    "sea",
    "stone",
    "wall",
    "fire",
]
SYLLABLES = [
    "ka",
    "ri",
    "to",
    "mu",
    "se",
    "la",
    "vo",
    "en",
    "dra",
    "th",
    "or",
    "il",
    "ae",
    "us",
    "ven",
    "mor",
    "cal",
    "ith",
]


def _name(rng: random.Random) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))).capitalize()


def make_workload(kind: str, seed: int = 7) -> dict[str, Any]:
    """``{entries, messages}`` for one workload (messages oldest first)."""
    rng = random.Random(seed)
    if kind == "dense":
        lore = sorted({_name(rng).lower() for _ in range(4_000)})[:1_500]
        keys_of = [[rng.choice(lore) for _ in range(KEYS_PER_ENTRY)] for _ in range(ENTRIES)]
    else:
        keys_of = [
            [f"{_name(rng)} {_name(rng)}", _name(rng) + str(i), f"{_name(rng)}-{i}"]
            for i in range(ENTRIES)
        ]
    entries = [
        {
            "uid": i,
            "keys": keys_of[i],
            "secondary": [],
            "content": f"Entry {i}: " + "lore " * 30,
            "order": rng.randint(0, 200),
        }
        for i in range(ENTRIES)
    ]
    words_needed = CHAT_CHARS // 6
    words: list[str] = []
    for _ in range(words_needed):
        if (kind == "dense" and rng.random() < 0.3) or (kind == "sparse" and rng.random() < 0.004):
            words.append(rng.choice(keys_of[rng.randrange(ENTRIES)]))
        else:
            words.append(rng.choice(PROSE))
    per = len(words) // MESSAGES
    messages = [" ".join(words[i * per : (i + 1) * per]) + "." for i in range(MESSAGES)]
    return {"entries": entries, "messages": messages}


# ---------------------------------------------------------------------------------- engine


def _entry(raw: dict[str, Any]) -> WorldBookEntry:
    """An entry as SillyTavern exports it: with the empty ``characterFilter`` ST writes."""
    return WorldBookEntry(
        uid=raw["uid"],
        keys=tuple(raw["keys"]),
        content=raw["content"],
        order=raw["order"],
        character_filter=CharacterFilter(),
    )


def engine_run(workload: dict[str, Any], repeat: int) -> tuple[float, int]:
    book = WorldBook(entries=tuple(_entry(e) for e in workload["entries"]))
    context = ActivationContext(
        messages=tuple(
            ActivationMessage(id=str(i), role="user" if i % 2 else "assistant", text=t)
            for i, t in enumerate(workload["messages"])
        )
    )
    books = [BookInput(resource_id="bench", book=book, revision=1)]
    request = ActivationRequest(
        books=books,
        context=context,
        settings=ActivationSettings(
            scan_depth=MESSAGES,
            include_names=False,
            recursive=False,
            match_whole_words=True,
            max_context_tokens=200_000,
        ),
        seed=7,
        scan_limits=ScanLimits(max_messages=1024, max_chars=CHAT_CHARS * 2),
        host_limits=HostLimits(max_profile_bytes=2 << 20),
    )
    cache = MatcherCache()

    def once() -> object:
        result = activate(request, cache)
        return audit_books(books, result, max_books=16, max_decisions=128)

    once()  # compile and warm the cache (a book is compiled once per revision)
    result = activate(request, cache)
    matched = sum(1 for d in result.decisions if d.matched_primary)
    return median_ms(once, repeat), matched


# ---------------------------------------------------------------------------------- floor


def aho_floor(workload: dict[str, Any], repeat: int) -> tuple[float, int]:
    automaton = ahocorasick.Automaton()
    owners: dict[str, list[int]] = {}
    for entry in workload["entries"]:
        for key in entry["keys"]:
            owners.setdefault(key.lower(), []).append(entry["uid"])
    for index, key in enumerate(owners):
        automaton.add_word(key, index)
    automaton.make_automaton()
    postings = list(owners.values())
    buffer = "\x01" + "\n\x01".join(reversed(workload["messages"]))

    def once() -> set[int]:
        found: set[int] = set()
        for _, index in automaton.iter(buffer.lower()):
            found.update(postings[index])
        return found

    return median_ms(once, repeat), len(once())


# ---------------------------------------------------------------------------------- ST in Node

#: Our reproduction of the cost structure of SillyTavern's checkWorldInfo scan loop (one
#: initial loop, recursion off, no timed effects) for this benchmark only.
NODE_HARNESS = r"""
const fs = require('fs');
const work = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const repeat = Number(process.argv[3]);
const budgetTokens = 200000 * 25 / 100;
const chat = work.messages.slice().reverse();               // newest first, as ST passes it
const depthBuffer = chat.map(m => m.trim());
const entries = work.entries.map(e => ({ ...e, key: e.keys, keysecondary: e.secondary,
  selective: true, selectiveLogic: 0, constant: false, disable: false, decorators: [] }))
  .sort((a, b) => b.order - a.order);
const escape = s => s.replace(/[/\-\\^$*+?.()|[\]{}]/g, '\\$&');
function delimitedRegex(key) {                                 // "/pattern/flags" keys
  const m = key.match(/^\/([\w\W]+?)\/([gimsuy]*)$/);
  if (!m || m[1].match(/(^|[^\\])\//)) return null;
  try { return new RegExp(m[1].replace('\\/', '/'), m[2]); } catch { return null; }
}
function scanText(depth) {
  return '\x01' + depthBuffer.slice(0, depth).join('\n\x01');
}
function matchKey(haystack, key) {
  const regex = delimitedRegex(key);
  if (regex) return regex.test(haystack);
  haystack = haystack.toLowerCase();
  const needle = key.toLowerCase();
  if (needle.split(/\s+/).length > 1) return haystack.includes(needle);
  return new RegExp(`(?:^|\\W)(${escape(needle)})(?:$|\\W)`).test(haystack);
}
function scan() {
  const activated = new Set();
  for (const entry of entries) {
    if (entry.disable) continue;
    if (entry.constant) { activated.add(entry); continue; }
    if (!entry.key.length) continue;
    const text = scanText(depthBuffer.length);
    const primary = entry.key.find(k => k && matchKey(text, k.trim()));
    if (!primary) continue;
    if (!(entry.selective && entry.keysecondary.length)) { activated.add(entry); continue; }
    if (entry.keysecondary.some(k => k && matchKey(text, k.trim()))) activated.add(entry);
  }
  const ordered = [...activated].sort((a, b) => entries.indexOf(a) - entries.indexOf(b));
  let used = 0; const kept = [];
  for (const entry of ordered) {
    const tokens = Math.ceil(entry.content.length / 3.5);
    if (used + tokens >= budgetTokens) break;
    used += tokens; kept.push(entry);
  }
  return activated.size;
}
const times = [];
let matched = 0;
for (let i = 0; i < repeat; i++) {
  const start = process.hrtime.bigint();
  matched = scan();
  times.push(Number(process.hrtime.bigint() - start) / 1e6);
}
times.sort((a, b) => a - b);
console.log(JSON.stringify({ median: times[Math.floor(times.length / 2)], matched }));
"""


def st_node(path: Path, folder: Path, repeat: int) -> tuple[float, int] | None:
    node = shutil.which("node")
    if node is None:
        return None
    harness = folder / "st_loop.js"
    harness.write_text(NODE_HARNESS)
    out = subprocess.run(
        [node, str(harness), str(path), str(repeat)], check=True, capture_output=True, text=True
    )
    data = json.loads(out.stdout)
    return float(data["median"]), int(data["matched"])


# ---------------------------------------------------------------------------------- edits, cap


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def edit_and_cap(repeat: int) -> None:
    workload = make_workload("sparse")
    entries = [_entry(e) for e in workload["entries"]]
    data = msgspec.json.encode(WorldBook(entries=tuple(entries)))
    decode = msgspec.json.Decoder(WorldBook)
    context = ActivationContext(messages=(ActivationMessage(id="1", role="user", text="quiet"),))

    def request(book: WorldBook, revision: int) -> ActivationRequest:
        return ActivationRequest(
            books=[BookInput(resource_id="b", book=book, revision=revision)], context=context
        )

    cache = MatcherCache()
    activate(request(decode.decode(data), 0), cache)
    updates, diffs, firsts, full = [], [], [], []
    previous = decode.decode(data)
    for revision in range(1, repeat + 1):
        edited = list(decode.decode(data).entries)  # fresh objects, as a re-read document
        index = (revision * 613) % len(edited)
        edited[index] = msgspec.structs.replace(
            edited[index], keys=(f"renamed{revision}",), content="edited"
        )
        book = WorldBook(entries=tuple(edited))
        gc.collect()  # the decode above leaves garbage: do not bill its collection to the update
        started = time.perf_counter()
        common_prefix(previous.entries, book.entries)  # the entry diff on its own
        diffs.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        cache.get("b", book, revision)  # the compiled form of the new revision
        updates.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        activate(request(book, revision), cache)
        firsts.append((time.perf_counter() - started) * 1000)
        gc.collect()
        started = time.perf_counter()
        compiled = compile_book("b", book)
        compiled.mode(False)
        full.append((time.perf_counter() - started) * 1000)
        data = msgspec.json.encode(book)
        previous = book
    shared_updates = []
    for revision in range(repeat + 1, 2 * repeat + 1):
        # What PATCH /world-books/:id stores now: unchanged entries keep the previous objects
        # (innkeeper_tavern.pure.worldbook.incremental.share_unchanged_entries), and the library
        # hands that record to the next reader.
        edited = list(decode.decode(data).entries)
        index = (revision * 613) % len(edited)
        edited[index] = msgspec.structs.replace(
            edited[index], keys=(f"renamed{revision}",), content="edited"
        )
        book = share_unchanged_entries(previous, WorldBook(entries=tuple(edited)))
        gc.collect()
        started = time.perf_counter()
        cache.get("b", book, revision)
        shared_updates.append((time.perf_counter() - started) * 1000)
        data = msgspec.json.encode(book)
        previous = book
    shared = statistics.median(shared_updates)
    u, df, a1, f = (statistics.median(x) for x in (updates, diffs, firsts, full))
    print("\none-entry edit of a 10,000-entry book (medians):")
    print(f"  compiled-form update (derived): {u:8.2f} ms, of which the entry diff {df:6.2f} ms")
    print(
        f"  full compile (what an edit cost before): {f:8.2f} ms   "
        f"ratio full / derived: {f / u:6.1f}x"
    )
    print(f"  first activation of the new revision after the update: {a1:8.3f} ms")
    print(
        f"  update when unchanged entries are shared (as PATCH stores them): {shared:8.2f} ms"
        f"   ratio full / shared: {f / shared:6.1f}x"
    )
    print(f"  (derived={cache.derived}, compiled from scratch={cache.compiled})")

    over = WorldBook(entries=tuple([*entries, entries[0]]))  # 10,001 entries
    cache = MatcherCache()
    req = request(over, 1)
    started = time.perf_counter()
    first = activate(req, cache)
    audit_books(req.books, first, max_decisions=128)
    first_ms = (time.perf_counter() - started) * 1000

    def turn() -> object:
        return audit_books(req.books, activate(req, cache), max_decisions=128)

    per_turn = median_ms(turn, repeat)
    print("book over the 10,000-entry request cap (refused, audited):")
    print(f"  first turn: {first_ms:8.3f} ms   every later turn: {per_turn:8.3f} ms")


def _st_export(workload: dict[str, Any]) -> bytes:
    """The workload's book as a SillyTavern world-info export (``{entries: {uid: entry}}``)."""
    entries = {
        str(e["uid"]): {"uid": e["uid"], "key": e["keys"], "content": e["content"], **e}
        for e in workload["entries"]
    }
    for entry in entries.values():
        del entry["keys"]
    return json.dumps({"entries": entries}).encode()


def _hand_edit(path: Path, revision: int) -> None:
    """Change one entry of a stored book file, as a person with an editor does (untimed)."""
    doc = json.loads(path.read_bytes())
    entries = doc["book"]["entries"]
    entry = entries[(revision * 613) % len(entries)]
    entry["keys"] = [f"renamed{revision}"]
    entry["content"] = f"edited by hand {revision}"
    path.write_text(json.dumps(doc, ensure_ascii=False, separators=(",", ":")))


def disk_edit(repeat: int) -> None:
    """A stored 10,000-entry book edited on disk, re-read and brought current.

    New path: ``DocumentLibrary.reload`` (read, SHA-256, the document split into raw entry
    spans, only spans whose hash the previous revision lacks decoded, the others and an unchanged
    ``source`` kept by identity), the next reader's ``get`` (served from the reload) and the
    compiled form derived by entry identity. Previous path, same run, same file: read, SHA-256,
    one typed decode of the whole document, unchanged entries shared with the previous record by
    comparison (``share_unchanged_entries``), then the compiled form derived from them. Floor:
    reading and hashing the file.
    """
    book_json = _st_export(make_workload("sparse"))
    with tempfile.TemporaryDirectory() as tmp:
        resources = TavernResources(Path(tmp))
        asyncio.run(resources.open())
        record = asyncio.run(resources.import_world_book(book_json, file_name="big.json"))
        library = resources.world_books
        path = library.path(record.id)
        new_cache, old_cache = MatcherCache(), MatcherCache()
        old_book = asyncio.run(library.get(record.id)).body.book

        def revision() -> str:
            entry = library.entry(record.id)
            assert entry is not None
            return entry.sha256

        async def warm() -> None:
            current = await library.get(record.id)
            new_cache.get(record.id, current.body.book, revision())
            old_cache.get(record.id, current.body.book, revision())

        asyncio.run(warm())
        stages: dict[str, list[float]] = {
            k: [] for k in ("reload", "get", "compiled", "old-decode", "old-compiled", "floor")
        }
        for number in range(1, repeat + 1):
            _hand_edit(path, number)
            gc.collect()

            async def new_path() -> None:
                started = time.perf_counter()
                await library.reload()
                stages["reload"].append(time.perf_counter() - started)
                started = time.perf_counter()
                current = await library.get(record.id)
                stages["get"].append(time.perf_counter() - started)
                started = time.perf_counter()
                new_cache.get(record.id, current.body.book, revision())
                stages["compiled"].append(time.perf_counter() - started)

            asyncio.run(new_path())
            gc.collect()
            started = time.perf_counter()
            data = path.read_bytes()
            hashlib.sha256(data).hexdigest()
            stages["floor"].append(time.perf_counter() - started)
            gc.collect()
            started = time.perf_counter()
            data = path.read_bytes()
            hashlib.sha256(data).hexdigest()
            old = library.decode(data)  # the whole document, typed
            book = share_unchanged_entries(old_book, old.body.book)
            stages["old-decode"].append(time.perf_counter() - started)
            started = time.perf_counter()
            old_cache.get(record.id, book, revision())
            stages["old-compiled"].append(time.perf_counter() - started)
            old_book = book
    ms = {k: statistics.median(v) * 1000 for k, v in stages.items()}
    new_total = ms["reload"] + ms["get"] + ms["compiled"]
    old_total = ms["old-decode"] + ms["old-compiled"]
    size = len(data) / 1e6
    print(f"\na 10,000-entry book ({size:.1f} MB stored) edited on disk, medians of {repeat}:")
    print(
        f"  now: reload {ms['reload']:7.2f} ms + next read {ms['get']:6.2f} ms"
        f" + compiled-form update {ms['compiled']:6.2f} ms = {new_total:7.2f} ms"
    )
    print(
        f"  before: read+hash+whole typed decode+share by comparison {ms['old-decode']:7.2f} ms"
        f" + compiled-form update {ms['old-compiled']:6.2f} ms = {old_total:7.2f} ms"
        f"   ratio before/now: {old_total / new_total:5.1f}x"
    )
    print(f"  floor (read the file and hash it): {ms['floor']:6.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--no-node", action="store_true", help="skip the SillyTavern loop")
    args = parser.parse_args()
    print(
        f"{ENTRIES:,} entries x {KEYS_PER_ENTRY} keys, {MESSAGES} messages, "
        f"~{CHAT_CHARS // 1024} KiB"
    )
    print(
        f"{'workload':<9} {'engine ms':>10} {'st-node ms':>11} {'aho-floor ms':>13} "
        f"{'st/engine':>10} {'engine/floor':>13}  matched (engine/st/floor)"
    )
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for kind in ("no-match", "sparse", "dense"):
            workload = make_workload(kind)
            path = folder / f"{kind}.json"
            path.write_text(json.dumps(workload))
            engine_ms, engine_matched = engine_run(workload, args.repeat)
            floor_ms, floor_matched = aho_floor(workload, args.repeat)
            node = None if args.no_node else st_node(path, folder, max(3, args.repeat // 3))
            st_ms, st_matched = node if node is not None else (float("nan"), -1)
            print(
                f"{kind:<9} {engine_ms:>10.3f} {st_ms:>11.1f} {floor_ms:>13.3f} "
                f"{st_ms / engine_ms:>9.0f}x {engine_ms / floor_ms:>12.1f}x  "
                f"{engine_matched}/{st_matched}/{floor_matched}"
            )
    if not args.no_node and shutil.which("node") is None:
        print("(node not found: the SillyTavern loop was skipped)")
    edit_and_cap(args.repeat)
    disk_edit(args.repeat)


if __name__ == "__main__":
    main()
