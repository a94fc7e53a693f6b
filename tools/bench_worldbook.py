#!/usr/bin/env python3
"""Benchmark world-book activation, the matcher build and an edit followed by a turn.

Workloads of 10,000 entries x 3 keys over a 128-message, ~64 KiB chat (one JSON file per run):

- ``no-match`` -- a realistic book (names and lore terms as keys) and a chat that mentions none of
  them: what every turn of a long story costs when nothing fires;
- ``sparse`` -- the same book, the chat mentions a few dozen keys (about 40 entries match);
- ``dense`` -- a lore-heavy book whose keys come from a 1,500-word lore vocabulary, a third of
  which the chat uses all the time: about 7,000 entries match, the budget keeps about 1,000.

**Activation.** Contenders, in interleaved rounds in this process, then Node:

- ``full`` -- :func:`innkeeper_tavern.pure.worldbook.activate` (matching, groups, probability,
  budget, host caps, positions, one decision per entry) with a warm
  :class:`~innkeeper_tavern.pure.worldbook.MatcherCache`, plus the audit summary the loader builds
  every turn (:func:`~innkeeper_tavern.pure.worldbook.audit_books`, 128 decisions);
- ``matcher`` -- our matcher alone: the buffer lower-cased and scanned by the book's compiled
  automaton with its whole-word check (which keys occur where, nothing decided);
- ``pyahocorasick`` -- one pyahocorasick automaton over every lower-cased key (built outside the
  timing), one pass over the lower-cased buffer collecting the entries whose keys occur: no
  whole-word check, no decision;
- ``st-node`` -- SillyTavern's scan loop (``checkWorldInfo`` in ``public/scripts/world-info.js``)
  reproduced in a small Node harness written at run time to a temporary folder (our own code, no
  SillyTavern source in this repository): entries in ``order`` order, for each entry the scan
  text joined from the depth buffer, each key tested as ST does (delimited-regex check, both
  strings lower-cased, whole-word ``(?:^|\\W)key(?:$|\\W)`` RegExp built per test),
  secondary-key logic, then sorting and the token budget over what matched. Macro substitution
  of keys is skipped (that flatters ST). Requires ``node`` on ``PATH`` (skipped otherwise).

**Build.** The compiled form a cold turn needs before it can match (:func:`compile_book` and the
case-insensitive automaton) against pyahocorasick's build for the same keys (``add_word`` per
distinct lower-cased key, ``make_automaton``), interleaved rounds; and the first activation after
a cold build.

**Edit then activate.** In this process: one entry of a 10,000-entry book edited as ``PATCH``
stores it (unchanged entries keep their objects), then the compiled form brought to the new
revision and the next activation -- against the full rebuild (compile and activate) an edit
would otherwise cost; and a stored book edited on disk: the library's re-read, the compiled-form
update and the next activation. Over HTTP (unless ``--no-http``): a real server (``innkeeper
serve``, every built-in plugin) with a temporary data directory; a session with a preset, a
card, a user and the 10,000-entry book bound, played with the synthetic provider; a player's
save of one entry (``PATCH /world-books/{id}``, the book as ``GET`` returns it with one entry
changed) then the next turn, against a turn with no edit before it; and the editor's save
(``PUT /world-books/{id}/entries/{uid}``, one entry) then the next turn: its server CPU plus the
turn's, beyond a plain turn's, is what a save costs the host.

Medians in ms and ratios: CPU time of this process and of Node (on a
shared machine the wait for a core is not the code's), wall time and the server's CPU time over
HTTP. No assertions about timings: read the numbers. Run it on the tree you
want to measure (``PYTHONPATH`` pointed at another checkout's sources measures that one with the
same workloads).

    uv run --no-sync python tools/bench_worldbook.py [--repeat 15] [--no-node] [--no-http]
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
from innkeeper_tavern.pure.worldbook.incremental import share_unchanged_entries
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
    said: list[str] = []
    if kind == "dense":
        lore = sorted({_name(rng).lower() for _ in range(4_000)})[:1_500]
        keys_of = [[rng.choice(lore) for _ in range(KEYS_PER_ENTRY)] for _ in range(ENTRIES)]
        said = lore[:500]  # a third of the vocabulary: about 7 entries in 10 match
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
        if kind == "dense" and rng.random() < 0.3:
            words.append(rng.choice(said))
        elif kind == "sparse" and rng.random() < 0.004:
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


def _context(workload: dict[str, Any]) -> ActivationContext:
    return ActivationContext(
        messages=tuple(
            ActivationMessage(id=str(i), role="user" if i % 2 else "assistant", text=t)
            for i, t in enumerate(workload["messages"])
        )
    )


def _request(books: list[BookInput], context: ActivationContext) -> ActivationRequest:
    return ActivationRequest(
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


def activation_rounds(workload: dict[str, Any], repeat: int) -> dict[str, Any]:
    """Medians (ms) of the full activation, our matcher alone and the pyahocorasick pass, in
    interleaved rounds, plus what each found."""
    book = WorldBook(entries=tuple(_entry(e) for e in workload["entries"]))
    books = [BookInput(resource_id="bench", book=book, revision=1)]
    request = _request(books, _context(workload))
    cache = MatcherCache()
    result = activate(request, cache)  # compile and warm the cache (once per revision)
    compiled = cache.get("bench", book, 1)
    buffer = "\x01" + "\n\x01".join(reversed(workload["messages"]))

    def full() -> object:
        found = activate(request, cache)
        return audit_books(books, found, max_books=16, max_decisions=128)

    def matcher() -> object:
        return compiled.scan(buffer.lower(), False)

    automaton = ahocorasick.Automaton()
    owners: dict[str, list[int]] = {}
    for entry in workload["entries"]:
        for key in entry["keys"]:
            owners.setdefault(key.lower(), []).append(entry["uid"])
    for index, key in enumerate(owners):
        automaton.add_word(key, index)
    automaton.make_automaton()
    postings = list(owners.values())

    def floor() -> set[int]:
        found: set[int] = set()
        for _, index in automaton.iter(buffer.lower()):
            found.update(postings[index])
        return found

    times = interleaved({"full": full, "matcher": matcher, "pyahocorasick": floor}, repeat)
    times["matched"] = sum(1 for d in result.decisions if d.matched_primary)
    times["kept"] = len(result.activated)
    times["floor matched"] = len(floor())
    return times


def interleaved(contenders: dict[str, Callable[[], object]], repeat: int) -> dict[str, Any]:
    """Median CPU ms (this process's) of each contender over ``repeat`` rounds, one call of each
    per round: on a shared machine the time spent waiting for a core is not the code's."""
    for fn in contenders.values():
        fn()  # warm
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(repeat):
        for name, fn in contenders.items():
            gc.collect()
            started = time.process_time()
            fn()
            samples[name].append((time.process_time() - started) * 1000)
    return {name: statistics.median(values) for name, values in samples.items()}


def build_rounds(workload: dict[str, Any], repeat: int) -> dict[str, float]:
    """Medians (ms): our compiled form for a cold turn vs pyahocorasick's build, same keys; and
    the first activation after a cold build."""
    book = WorldBook(entries=tuple(_entry(e) for e in workload["entries"]))
    keys = [key for entry in workload["entries"] for key in entry["keys"]]

    def ours() -> object:
        compiled = compile_book("bench", book)
        compiled.mode(False)
        return compiled

    def theirs() -> object:
        owners: dict[str, list[int]] = {}
        for index, key in enumerate(keys):
            owners.setdefault(key.lower(), []).append(index // KEYS_PER_ENTRY)
        automaton = ahocorasick.Automaton()
        for index, key in enumerate(owners):
            automaton.add_word(key, index)
        automaton.make_automaton()
        return automaton

    times: dict[str, float] = interleaved({"ours": ours, "pyahocorasick": theirs}, repeat)
    books = [BookInput(resource_id="bench", book=book, revision=1)]
    request = _request(books, _context(workload))

    def cold() -> object:
        found = activate(request, MatcherCache())
        return audit_books(books, found, max_books=16, max_decisions=128)

    times["cold activation"] = median_ms(cold, max(3, repeat // 3))
    return times


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
  const start = process.cpuUsage();              // CPU time, as the Python contenders
  matched = scan();
  const used = process.cpuUsage(start);
  times.push((used.user + used.system) / 1e3);
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
    """Median CPU ms of ``fn`` (this process's) over ``repeat`` calls."""
    samples = []
    for _ in range(repeat):
        started = time.process_time()
        fn()
        samples.append((time.process_time() - started) * 1000)
    return statistics.median(samples)


def edit_in_process(repeat: int) -> dict[str, float]:
    """A one-entry edit of a 10,000-entry book as ``PATCH`` stores it, then the next activation
    (sparse chat), against the full rebuild and activation it would cost without the
    incremental update; and the refused over-cap book per turn."""
    workload = make_workload("sparse")
    entries = [_entry(e) for e in workload["entries"]]
    context = _context(workload)
    book = WorldBook(entries=tuple(entries))
    cache = MatcherCache()
    activate(_request([BookInput(resource_id="b", book=book, revision=0)], context), cache)
    updates, turns, totals, rebuilds = [], [], [], []
    for revision in range(1, repeat + 1):
        edited = list(book.entries)
        index = (revision * 613) % len(edited)
        edited[index] = msgspec.structs.replace(
            edited[index], keys=(f"renamed{revision}",), content=f"edited {revision}"
        )
        # What PATCH /world-books/:id stores: unchanged entries keep the previous objects.
        new = share_unchanged_entries(book, WorldBook(entries=tuple(edited)))
        books = [BookInput(resource_id="b", book=new, revision=revision)]
        request = _request(books, context)
        gc.collect()
        started = time.process_time()
        cache.get("b", new, revision)
        between = time.process_time()
        audit_books(books, activate(request, cache), max_decisions=128)
        done = time.process_time()
        updates.append((between - started) * 1000)
        turns.append((done - between) * 1000)
        totals.append((done - started) * 1000)
        gc.collect()
        started = time.process_time()
        audit_books(books, activate(request, MatcherCache()), max_decisions=128)
        rebuilds.append((time.process_time() - started) * 1000)
        book = new
    over = WorldBook(entries=tuple([*entries, entries[0]]))  # 10,001 entries
    refused_books = [BookInput(resource_id="o", book=over, revision=1)]
    refused = _request(refused_books, context)
    over_cache = MatcherCache()
    activate(refused, over_cache)
    per_turn = median_ms(
        lambda: audit_books(refused_books, activate(refused, over_cache), max_decisions=128),
        repeat,
    )
    return {
        "update": statistics.median(updates),
        "activation": statistics.median(turns),
        "total": statistics.median(totals),
        "rebuild": statistics.median(rebuilds),
        "refused": per_turn,
        "derived": cache.derived,
    }


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
            k: []
            for k in (
                "reload",
                "get",
                "compiled",
                "activate",
                "old-decode",
                "old-compiled",
                "floor",
            )
        }
        context = _context(make_workload("sparse"))
        for number in range(1, repeat + 1):
            _hand_edit(path, number)
            gc.collect()

            async def new_path() -> None:
                started = time.process_time()
                await library.reload()
                stages["reload"].append(time.process_time() - started)
                started = time.process_time()
                current = await library.get(record.id)
                stages["get"].append(time.process_time() - started)
                started = time.process_time()
                new_cache.get(record.id, current.body.book, revision())
                stages["compiled"].append(time.process_time() - started)
                books = [
                    BookInput(resource_id=record.id, book=current.body.book, revision=revision())
                ]
                started = time.process_time()
                audit_books(books, activate(_request(books, context), new_cache), max_decisions=128)
                stages["activate"].append(time.process_time() - started)

            asyncio.run(new_path())
            gc.collect()
            started = time.process_time()
            data = path.read_bytes()
            hashlib.sha256(data).hexdigest()
            stages["floor"].append(time.process_time() - started)
            gc.collect()
            started = time.process_time()
            data = path.read_bytes()
            hashlib.sha256(data).hexdigest()
            old = library.decode(data)  # the whole document, typed
            book = share_unchanged_entries(old_book, old.body.book)
            stages["old-decode"].append(time.process_time() - started)
            started = time.process_time()
            old_cache.get(record.id, book, revision())
            stages["old-compiled"].append(time.process_time() - started)
            old_book = book
    ms = {k: statistics.median(v) * 1000 for k, v in stages.items()}
    new_total = ms["reload"] + ms["get"] + ms["compiled"]
    old_total = ms["old-decode"] + ms["old-compiled"]
    size = len(data) / 1e6
    print(f"\na 10,000-entry book ({size:.1f} MB stored) edited on disk, medians of {repeat}:")
    print(
        f"  re-read {ms['reload']:7.2f} ms + next read {ms['get']:6.2f} ms"
        f" + compiled-form update {ms['compiled']:6.2f} ms = {new_total:7.2f} ms;"
        f" then the next activation {ms['activate']:6.2f} ms"
    )
    print(
        f"  (one typed decode of the whole document, unchanged entries shared by comparison:"
        f" {ms['old-decode']:7.2f} + {ms['old-compiled']:6.2f} ms = {old_total:7.2f} ms,"
        f" x{old_total / new_total:4.1f}; reading and hashing the file alone {ms['floor']:6.2f} ms)"
    )


async def http_edit(repeat: int) -> dict[str, float]:
    """Over HTTP with every built-in plugin: a player saves one entry of the bound 10,000-entry
    book (``PATCH /world-books/{id}``), then plays a turn; against turns with no edit before."""
    import aiohttp

    from bench_story import API, CARD, PRESET, Client, Server, Story

    with tempfile.TemporaryDirectory() as tmp:
        server = Server(Path(tmp) / "data", None)
        try:
            async with aiohttp.ClientSession() as http:
                await server.wait_ready(http)
                client = Client(http, server.origin)
                preset = await client.call(
                    "POST", f"{API}/import", {"content": PRESET.read_text(encoding="utf-8")}
                )
                card = await client.call(
                    "POST",
                    f"{API}/characters/import",
                    CARD.read_bytes(),
                    params={"filename": CARD.name},
                )
                imported = await client.call(
                    "POST",
                    f"{API}/world-books/import",
                    _st_export(make_workload("sparse")),
                    params={"filename": "big.json"},
                )
                book_id = imported["worldBook"]["id"]
                user = await client.call("POST", f"{API}/users", {"name": "Ada"})
                profile = {
                    "preset": preset["preset"]["id"],
                    "card": card["character"]["id"],
                    "books": [book_id],
                    "user": user["user"]["id"],
                }
                story = Story(client, await client.session(profile, "edit bench"))
                await story.open()
                rng = random.Random(5)
                words = make_workload("sparse")["messages"][0].split()

                def text() -> str:
                    return " ".join(rng.choice(words) for _ in range(30))

                for _ in range(3):
                    await story.turn(text())
                stored = (await client.call("GET", f"{API}/world-books/{book_id}"))["worldBook"]
                plain, patches, after, cpu_plain, cpu_after = [], [], [], [], []
                puts, cpu_puts, after_put, cpu_after_put = [], [], [], []
                for number in range(1, repeat + 1):
                    before = server.cpu()
                    plain.append(await story.turn(text()))
                    cpu_plain.append(server.cpu() - before)
                    entry = stored["book"]["entries"][(number * 613) % ENTRIES]
                    entry["keys"] = [f"renamed{number}"]
                    entry["content"] = f"saved in the page {number}"
                    body = json.dumps({"book": stored["book"]}).encode()
                    started = time.perf_counter()
                    patched = await client.call("PATCH", f"{API}/world-books/{book_id}", body)
                    patches.append(time.perf_counter() - started)
                    before = server.cpu()
                    after.append(await story.turn(text()))
                    cpu_after.append(server.cpu() - before)
                # The editor's saves: one entry at a time under the book's revision, each
                # followed by a turn (the first save of a revision counts the book once).
                revision = patched["worldBook"]["updatedAt"]
                for number in range(1, repeat + 2):
                    entry = dict(stored["book"]["entries"][(number * 419) % ENTRIES])
                    entry["content"] = f"saved one entry {number}"
                    before, started = server.cpu(), time.perf_counter()
                    saved = await client.call(
                        "PUT",
                        f"{API}/world-books/{book_id}/entries/{entry['uid']}",
                        {"entry": entry, "expectedRevision": revision},
                    )
                    wall, cpu = time.perf_counter() - started, server.cpu() - before
                    revision = saved["revision"]
                    before = server.cpu()
                    turn = await story.turn(text())
                    turn_cpu = server.cpu() - before
                    if number == 1:
                        first_put = (wall, cpu)
                        continue
                    puts.append(wall)
                    cpu_puts.append(cpu)
                    after_put.append(turn)
                    cpu_after_put.append(turn_cpu)
                await story.close()
        finally:
            server.stop()
    ms = {
        "plain": statistics.median(plain),
        "patch": statistics.median(patches),
        "after": statistics.median(after),
        "cpu plain": statistics.mean(cpu_plain),
        "cpu after": statistics.mean(cpu_after),
        "put": statistics.median(puts),
        "cpu put": statistics.mean(cpu_puts),
        "after put": statistics.median(after_put),
        "cpu after put": statistics.mean(cpu_after_put),
        "first put": first_put[0],
        "cpu first put": first_put[1],
    }
    return {k: v * 1000 for k, v in ms.items()}


def report(repeat: int, *, node: bool = True, http: bool = True) -> None:
    """Print every figure of this benchmark (``tools/bench_hotpaths.py`` prints it too)."""
    print(
        f"{ENTRIES:,} entries x {KEYS_PER_ENTRY} keys, {MESSAGES} messages, "
        f"~{CHAT_CHARS // 1024} KiB; medians of {repeat} interleaved rounds (CPU ms)"
    )
    print(
        f"\n{'workload':<9} {'full':>8} {'matcher':>8} {'pyaho':>8} {'st-node':>9}"
        f" {'full/matcher':>13} {'full/pyaho':>11} {'st/full':>8}  matched/kept (st, pyaho)"
    )
    node_missing = node and shutil.which("node") is None
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for kind in ("no-match", "sparse", "dense"):
            workload = make_workload(kind)
            path = folder / f"{kind}.json"
            path.write_text(json.dumps(workload))
            t = activation_rounds(workload, repeat)
            st = st_node(path, folder, max(3, repeat // 3)) if node else None
            st_ms, st_matched = st if st is not None else (float("nan"), -1)
            print(
                f"{kind:<9} {t['full']:>8.2f} {t['matcher']:>8.2f} {t['pyahocorasick']:>8.2f}"
                f" {st_ms:>9.1f} {t['full'] / t['matcher']:>12.1f}x"
                f" {t['full'] / t['pyahocorasick']:>10.1f}x {st_ms / t['full']:>7.0f}x"
                f"  {t['matched']}/{t['kept']} ({st_matched}, {t['floor matched']})"
            )
    if node_missing:
        print("(node not found: the SillyTavern loop was skipped)")

    print(f"\n{'build':<9} {'ours':>8} {'pyaho':>8} {'ours/pyaho':>11}  first activation after it")
    for kind in ("sparse", "dense"):
        b = build_rounds(make_workload(kind), repeat)
        print(
            f"{kind:<9} {b['ours']:>8.2f} {b['pyahocorasick']:>8.2f}"
            f" {b['ours'] / b['pyahocorasick']:>10.2f}x  {b['cold activation']:8.2f}"
        )

    e = edit_in_process(repeat)
    print("\none-entry edit of a 10,000-entry book as PATCH stores it, then the next activation:")
    print(
        f"  compiled-form update {e['update']:6.2f} + activation {e['activation']:6.2f}"
        f" = {e['total']:6.2f} ms   (full rebuild + activation {e['rebuild']:7.2f} ms,"
        f" x{e['rebuild'] / e['total']:5.1f})   derived {e['derived']} of {repeat}"
    )
    print(
        f"  a book over the 10,000-entry request cap, every turn after its refusal: "
        f"{e['refused']:6.3f} ms"
    )
    disk_edit(repeat)
    if http:
        h = asyncio.run(http_edit(max(5, repeat // 2)))
        print("\nover HTTP, every built-in plugin, synthetic provider (wall ms; server CPU ms):")
        print(
            f"  PATCH of the book with one entry changed {h['patch']:7.1f};"
            f" the next turn {h['after']:6.1f} (CPU {h['cpu after']:5.1f})"
            f" vs a turn with no edit before {h['plain']:6.1f} (CPU {h['cpu plain']:5.1f}):"
            f" the edit adds {h['after'] - h['plain']:+6.1f} ms to the turn"
        )
        print(
            f"  PUT of one entry {h['put']:7.1f} (CPU {h['cpu put']:5.1f});"
            f" the next turn {h['after put']:6.1f} (CPU {h['cpu after put']:5.1f}):"
            f" save + next turn cost {h['cpu put'] + h['cpu after put'] - h['cpu plain']:+6.1f}"
            f" ms of server CPU more than a plain turn"
        )
        print(
            f"  (the first PUT after the PATCH, which counts the book's nodes once:"
            f" {h['first put']:7.1f}, CPU {h['cpu first put']:5.1f})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--no-node", action="store_true", help="skip the SillyTavern loop")
    parser.add_argument("--no-http", action="store_true", help="skip the edit over HTTP")
    args = parser.parse_args()
    report(args.repeat, node=not args.no_node, http=not args.no_http)


if __name__ == "__main__":
    main()
