#!/usr/bin/env python3
"""Benchmark saving the MVU ledger (``mvu-instances.json``) at 1, 8 and 32 MiB.

The save is what ``tavernMvu`` does on every commit (``MvuService._commit``): encode the whole
document with msgspec (sorted keys), check the combined 32 MiB cap (docs/contract/mvu.md#budgets),
then publish it atomically (temp file, fsync, rename, directory fsync). The baseline, measured in
the same run on the same document, is the naive save: stdlib ``json.dumps`` of the same builtins and
a plain ``write_bytes`` (no fsync, no rename).

Ledgers are built like real ones: sessions with one state instance each and a history of whole
versions (every version of a state is kept in full), about 12 KiB per version. Times are
medians over ``--repeat`` saves; peak memory is ``tracemalloc``'s peak of one save (Python
allocations, measured in a separate pass so it does not slow the timed runs). No assertions:
read the numbers.

    uv run --no-sync python tools/bench_mvu_ledger.py [--sizes 1,8,32] [--repeat 5]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import msgspec

from innkeeper_tavern.features.mvu_service.store import (
    InstancesFile,
    check_size,
    encode_instances,
    save_instances,
)
from innkeeper_tavern.pure.mvu import initialize_variables
from innkeeper_tavern.pure.mvu import ledger as mvu_ledger
from innkeeper_tavern.pure.mvu.ledger import (
    MAX_LEDGER_BYTES,
    HistoryEntry,
    InstanceIdentity,
    StateRecord,
)

MIB = 1024 * 1024
VERSIONS_PER_STATE = 8


def _variables(seed: int) -> dict[str, object]:
    stat = {
        f"npc_{i}": {"name": f"npc {seed}-{i}", "hp": i, "notes": "x" * 200, "tags": ["a", "b"]}
        for i in range(40)
    }
    return initialize_variables(stat)


def build(target_bytes: int) -> InstancesFile:
    """A document of roughly ``target_bytes`` (kept under the cap for the 32 MiB case).

    States and histories are assembled directly (the ledger's own ``update`` re-encodes the
    whole ledger per call, which would make building a 32 MiB ledger quadratic).
    """
    states: dict[str, StateRecord] = {}
    history: dict[str, list[HistoryEntry]] = {}
    session = 0
    while True:
        identity = InstanceIdentity("mvu:character:bench", f"session-{session}", "2026-01-01")
        state_id = mvu_ledger.instance_id(identity)
        content = _variables(session)
        entries = []
        for version in range(1, VERSIONS_PER_STATE + 1):
            stat = dict(content["stat_data"])  # type: ignore[call-overload]
            stat["npc_0"] = {**stat["npc_0"], "hp": version}
            content = {**content, "stat_data": stat}
            digest = _sha(content)
            entries.append(HistoryEntry(version, "t", "edit", content, digest, None, None))
        states[state_id] = StateRecord(
            id=state_id,
            template_id=identity.template_id,
            instance=identity,
            content=content,
            content_sha256=entries[-1].content_sha256,
            revision=VERSIONS_PER_STATE,
            created_at="t",
            updated_at="t",
        )
        history[state_id] = entries
        session += 1
        doc = InstancesFile(ledger=mvu_ledger.Ledger(states=states, history=history))
        if session % 8 == 0 and len(encode_instances(doc)) >= target_bytes:
            while len(encode_instances(doc)) > target_bytes:
                last = next(reversed(states))
                del states[last], history[last]
                doc = InstancesFile(ledger=mvu_ledger.Ledger(states=states, history=history))
            return doc


def _sha(value: object) -> str:
    return hashlib.sha256(msgspec.json.encode(value)).hexdigest()


def _median(fn: Callable[[], None], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _peak(fn: Callable[[], None]) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,8,32", help="ledger sizes in MiB")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(
        f"{'size':>8} {'bytes':>11} {'save ms':>9} {'naive ms':>9} {'ratio':>6} "
        f"{'save peak MiB':>14} {'naive peak MiB':>15}"
    )
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        for size in (int(s) for s in args.sizes.split(",")):
            # The 32 MiB case stays just under the cap (a bigger one is refused, not saved).
            target = min(size * MIB, MAX_LEDGER_BYTES - 256 * 1024)
            doc = build(target)

            def save(doc: InstancesFile = doc) -> None:
                data = encode_instances(doc)
                check_size(data)
                save_instances(root, data)

            def naive(doc: InstancesFile = doc) -> None:
                text = json.dumps(msgspec.to_builtins(doc), sort_keys=True)
                (root / "naive.json").write_bytes(text.encode())

            encoded = len(encode_instances(doc))
            save_s = _median(save, args.repeat)
            naive_s = _median(naive, args.repeat)
            print(
                f"{size:>6}Mi {encoded:>11,} {save_s * 1e3:>9.1f} {naive_s * 1e3:>9.1f} "
                f"{save_s / naive_s:>6.2f} {_peak(save) / MIB:>14.1f} {_peak(naive) / MIB:>15.1f}"
            )


if __name__ == "__main__":
    main()
