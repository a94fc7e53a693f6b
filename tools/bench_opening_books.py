#!/usr/bin/env python3
"""Benchmark session opening world books against the same entries as a standalone book.

On a real host with the Tavern plugin: one card, two sessions at the same greeting. Session A
gets the shipped "Lantern Inn" ``cellar`` opening through ``prepare`` → ``commit``; session B
gets a standalone world book with the same three entries, imported with
``POST /world-books/import`` and
selected for it (what a client would do without opening books). Each session holds the same
user message. Measured in the same run:

- the write: ``prepare`` + ``commit`` against ``/world-books/import`` + ``/world-book-selection``;
- a full profile compile (``TavernProfileLoader.compile``: selection, adapters, activation,
  render, audit) of session A against session B, and its world-book phase.

Prints medians and ratios (opening / standalone). Timings are printed, never asserted.

Usage: uv run --no-sync python tools/bench_opening_books.py [--repeat N]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import statistics
import tempfile
import time
from importlib import resources as package_files
from pathlib import Path
from typing import Any

from innkeeper_core.testing import start_test_host
from innkeeper_hostapi.agents import SESSIONS, TurnContext
from innkeeper_hostapi.sessions import UserMessage, text_content
from innkeeper_tavern.features.opening_books.manifest import load_manifest
from innkeeper_tavern.features.prompt_profile import PROFILE_LOADER
from innkeeper_tavern.plugin import TAVERN_RESOURCES

V1 = "/pmp-dsh-tavern/api/v1"
URL = "https://innkeeper.invalid/opening-books/lantern-inn-openings.js"
GREETING = "The cellar door creaks open."


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class Client:
    def __init__(self, host: Any) -> None:
        self.host = host

    async def upload(self, path: str, doc: Any) -> Any:
        headers = {"Origin": self.host.origin, "Content-Type": "application/json"}
        data = json.dumps(doc).encode()
        resp = await self.host.client.request("POST", V1 + path, data=data, headers=headers)
        answer = await resp.json()
        assert resp.status == 201, answer
        return answer

    async def call(self, method: str, path: str, body: Any, status: int = 200) -> Any:
        headers = {"Origin": self.host.origin}
        resp = await self.host.client.request(method, V1 + path, json=body, headers=headers)
        data = await resp.json()
        assert resp.status == status, data
        return data


async def run(repeat: int) -> None:
    folder = package_files.files("innkeeper_tavern.features.opening_books").joinpath("snapshots")
    text = folder.joinpath("lantern-inn-openings.js").read_text("utf-8")
    snapshot = {"url": URL, "sha256": sha(text), "content": text}
    manifest = load_manifest()
    [entry] = [s for s in manifest.snapshots.values() if s.url == URL]
    entries = [dict(e) for e in entry.openings["cellar"].entries]
    with tempfile.TemporaryDirectory() as tmp:
        host = await start_test_host(Path(tmp))
        try:
            await host.load("tavern", "innkeeper_tavern.plugin")
            client = Client(host)
            resources = host.get(TAVERN_RESOURCES)
            body = {"name": "Mara", "firstMessage": "Hi.", "alternateGreetings": [GREETING]}
            card = (await resources.create_character(body)).record.id
            sessions = host.get(SESSIONS)

            async def new_session() -> str:
                header = await sessions.create(title="bench")
                options = {"greetingIndex": 1}
                await client.call(
                    "POST",
                    "/character-selection",
                    {"sessionId": header.id, "characterCardId": card, "character": options},
                )
                await sessions.append(
                    header.id,
                    UserMessage(
                        message_id="u1",
                        content=text_content("I pull at the cellar trapdoor."),
                        turn=1,
                    ),
                )
                return header.id

            opening_writes: list[float] = []
            standalone_writes: list[float] = []
            last_a = last_b = ""
            for n in range(repeat):
                a, b = await new_session(), await new_session()
                identity = {
                    "version": 1,
                    "owner": "pmp-dsh-tavern",
                    "sessionId": a,
                    "characterId": card,
                    "greetingIndex": 1,
                    "greetingSha256": sha(GREETING),
                    "identitySha256": snapshot["sha256"],
                }
                start = time.perf_counter()
                base = f"/sessions/{a}/opening-worldbook"
                prepared = await client.call(
                    "POST",
                    base + "/prepare",
                    {"sourceIdentity": identity, "openingId": "cellar", "identitySource": snapshot},
                )
                commit = {
                    "proposalId": prepared["proposalId"],
                    "expectedRevision": prepared["expectedRevision"],
                    "operationId": f"op-{n}",
                    "sourceIdentity": identity,
                    "reviewed": True,
                    "write": True,
                }
                await client.call("POST", base + "/commit", commit)
                opening_writes.append(time.perf_counter() - start)

                start = time.perf_counter()
                doc = {"name": "cellar", "entries": {str(e["uid"]): e for e in entries}}
                book = await client.upload("/world-books/import?filename=cellar.json", doc)
                selection = {"sessionId": b, "worldBookIds": [book["worldBook"]["id"]]}
                await client.call("POST", "/world-book-selection", selection)
                standalone_writes.append(time.perf_counter() - start)
                last_a, last_b = a, b

            loader = host.get(PROFILE_LOADER)

            async def compile_once(session: str, n: int) -> tuple[float, float, int]:
                turn = TurnContext(
                    session_id=session,
                    turn=1000 + n,
                    delegation_depth=0,
                    claimed=(),
                    claim_seq=None,
                )
                compiled = await loader.compile(session, turn)
                loader.drop_turn(session, turn.turn)
                timings = compiled.timings_ms
                return timings["total"], timings["worldBook"], len(compiled.assembly_input.lore)

            a_total: list[float] = []
            a_book: list[float] = []
            b_total: list[float] = []
            b_book: list[float] = []
            a_lore = b_lore = 0
            # Interleaved (A, B, B, A, ...) so warm-up and machine load fall on both arms.
            for n in range(repeat + 3):
                order = (last_a, last_b) if n % 2 == 0 else (last_b, last_a)
                for session in order:
                    total, books, lore = await compile_once(session, n)
                    if n < 3:
                        continue  # warm-up: matcher compile, record caches
                    if session == last_a:
                        a_total.append(total)
                        a_book.append(books)
                        a_lore = lore
                    else:
                        b_total.append(total)
                        b_book.append(books)
                        b_lore = lore
        finally:
            await host.close()

    def med(values: list[float]) -> float:
        return statistics.median(values)

    print(f"repeat={repeat}; lore entries activated: opening {a_lore}, standalone {b_lore}")
    ow, sw = med(opening_writes) * 1000, med(standalone_writes) * 1000
    print(f"write   opening prepare+commit {ow:7.2f} ms | standalone create+select {sw:7.2f} ms")
    print(f"        ratio opening/standalone: {ow / sw:.2f}x")
    at, bt = med(a_total), med(b_total)
    print(f"compile total  opening {at:7.2f} ms | standalone {bt:7.2f} ms | ratio {at / bt:.2f}x")
    ab, bb = med(a_book), med(b_book)
    print(f"compile books  opening {ab:7.2f} ms | standalone {bb:7.2f} ms | ratio {ab / bb:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    asyncio.run(run(args.repeat))


if __name__ == "__main__":
    main()
