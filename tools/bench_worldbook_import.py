#!/usr/bin/env python3
"""Import a 10,000-entry SillyTavern world-book export over HTTP, against the bare floor.

The export is a real corpus book with every field a 2025 SillyTavern writes (The Long
Reclamation) whose 38 entries are repeated to the 10,000-entry cap with distinct uids and one
extra key each (~19 MiB, ~520,000 JSON values). A real host with the Tavern plugin runs on a
loopback test server; each sample is ``POST /pmp-dsh-tavern/api/v1/world-books/import`` of those
bytes (decode, structure guard, normalization, validated atomic write of the stored document).

The floor, measured in the same run on the same bytes: ``msgspec`` decoding of the JSON plus an
atomic write (temp file, fsync, rename) of the bytes — what any import must at least do. Prints
medians and the ratio import / floor. No assertions about timings.

    uv run --no-sync python tools/bench_worldbook_import.py [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import statistics
import tempfile
import time
from pathlib import Path

import msgspec

from innkeeper_core.testing import start_test_host
from innkeeper_tavern.pure.formats.guards import MAX_BOOK_ENTRIES
from innkeeper_tavern.state.resources.atomic import atomic_write

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "sillytavern-corpus"
BOOK = CORPUS / "prolix-oc-st-presets" / "worldbooks" / "The Long Reclamation.json"
ROUTE = "/pmp-dsh-tavern/api/v1/world-books/import"


def make_export() -> bytes:
    source = json.loads(BOOK.read_bytes())
    originals = list(source["entries"].values())
    entries = {}
    for i in range(MAX_BOOK_ENTRIES):
        entry = dict(originals[i % len(originals)], uid=i, displayIndex=i)
        entry["key"] = [*entry["key"], f"k{i}"]
        entries[str(i)] = entry
    return json.dumps({**source, "entries": entries}).encode()


def floor(data: bytes, folder: Path) -> float:
    started = time.perf_counter()
    msgspec.json.decode(data)
    atomic_write(folder / "floor.json", data)
    return time.perf_counter() - started


async def run(runs: int) -> None:
    data = make_export()
    with tempfile.TemporaryDirectory(prefix="bench-import-") as tmp:
        folder = Path(tmp)
        host = await start_test_host(folder / "data")
        try:
            loaded = await host.load("tavern", "innkeeper_tavern.plugin")
            assert loaded["state"] != "failed", loaded
            headers = {"Origin": host.origin, "Content-Type": "application/json"}
            imports = []
            for _ in range(runs):
                started = time.perf_counter()
                response = await host.client.post(
                    ROUTE + "?filename=big.json", data=io.BytesIO(data), headers=headers
                )
                body = await response.read()
                imports.append(time.perf_counter() - started)
                assert response.status == 201, (response.status, body[:300])
        finally:
            await host.close()
        floors = [await asyncio.to_thread(floor, data, folder) for _ in range(runs)]
    imported, base = statistics.median(imports), statistics.median(floors)
    print(f"export: {MAX_BOOK_ENTRIES:,} entries, {len(data) / (1 << 20):.1f} MiB")
    print(f"import over HTTP (median of {runs}): {imported * 1000:9.0f} ms")
    print(f"floor: decode + atomic write       : {base * 1000:9.0f} ms")
    print(f"ratio import / floor               : {imported / base:9.1f}x")
    print("before this change the same request answered 413 (4 MiB body, 100,000 nodes)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(run(args.runs))


if __name__ == "__main__":
    main()
