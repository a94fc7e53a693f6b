#!/usr/bin/env python3
"""Benchmark one MVU reply with 50 commands on a 1 MiB state, against copying baselines.

The engine run is a full :func:`innkeeper_tavern.pure.mvu.engine.apply_reply`: extraction, value
parsing, 50 commands on a copy-on-write candidate, schema regeneration, metadata stripping and
the per-state budget check. The baseline runs the same commands with the same code but deep-copies
the whole state (``stat_data`` and ``schema``) before every command — what an engine that keeps
each command atomic by copying would do. A second baseline copies the state *once per
reply* (``stat_data`` and ``schema`` cloned by a msgspec JSON round trip, the fastest exact copy
of a JSON tree here, then the same engine on the clone): the simple design a good engineer would
try first (see :func:`copy_once_apply` for why this is its lower bound). All run in this
process; medians, tracemalloc peaks and ratios are printed. It also times encoding and
size-checking whole ledgers of about 1, 8 and 32 MiB (the pure part of saving
``mvu-instances.json``; the atomic file write belongs to the service). No assertion is made
about timings.

Usage: uv run --no-sync python tools/bench_mvu.py [--repeat N] [--quick]
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import statistics
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import msgspec

from innkeeper_tavern.pure.mvu import engine
from innkeeper_tavern.pure.mvu.cow import CowTree
from innkeeper_tavern.pure.mvu.dsl.engine import descriptor_for, initialize_with_schema
from innkeeper_tavern.pure.mvu.extract import extract_commands
from innkeeper_tavern.pure.mvu.initvar import initialize_variables
from innkeeper_tavern.pure.mvu.ledger import (
    MAX_LEDGER_BYTES,
    InstanceIdentity,
    Ledger,
    check_ledger_size,
    create_instance,
    encode_ledger,
)
from innkeeper_tavern.pure.mvu.limits import Budget

TARGET_STATE_BYTES = 1 << 20
COMMANDS = 50


def make_state(target_bytes: int) -> dict[str, Any]:
    """A card-like state of about ``target_bytes``: many NPCs with VWD fields and inventories."""
    npcs: dict[str, Any] = {"$meta": {"extensible": True}}
    i = 0
    size = 0
    while size < target_bytes:
        npc = {
            "好感度": [i % 100, "0-100, how much they like the player"],
            "hp": [100, "health"],
            "location": ["教堂", "where they are"],
            "mood": "calm",
            "inventory": [f"item{i}-{k}" for k in range(4)] + ["$__META_EXTENSIBLE__$"],
            "notes": {
                "$meta": {"extensible": True},
                "first_met": f"day {i % 30}",
                "summary": f"NPC {i} " + "remembers the rain over the chapel and the bells. " * 16,
            },
        }
        npcs[f"npc{i:05d}"] = npc
        size += len(json.dumps(npc, ensure_ascii=False).encode())
        i += 1
    return {"world": {"day": 1, "weather": "rain"}, "npcs": npcs}


def make_reply(npc_count: int) -> str:
    """A reply with exactly 50 commands of every kind, spread over the state."""
    lines = ["<UpdateVariable>", "<Analysis>time passes</Analysis>"]
    step = max(1, npc_count // 10)
    for k in range(10):
        n = f"npc{(k * step):05d}"
        lines.append(f"_.set('npcs.{n}.好感度', {k}, {k + 1});//friendlier")
        lines.append(f"_.add('npcs.{n}.hp', -{k + 1});//hit")
        lines.append(f"_.insert('npcs.{n}.inventory', 'gift{k}');//got a gift")
        lines.append(f"_.set('npcs.{n}.mood', 'happy');")
    patch = []
    for k in range(10):
        n = f"npc{(k * step + 1):05d}"
        patch.append(f'{{"op":"replace","path":"/npcs/{n}/location","value":"market"}}')
    lines.append("<JSONPatch>[" + ",".join(patch) + "]</JSONPatch>")
    lines.append("</UpdateVariable>")
    text = "\n".join(lines)
    assert len(extract_commands(text)) == COMMANDS
    return text


def baseline_apply(variables: dict[str, Any], text: str) -> engine.UpdateResult:
    """Same commands and code, but the whole state is deep-copied before each command."""
    budget = Budget()
    commands = extract_commands(text, budget)
    run = engine._Run(variables, budget)
    for index, command in enumerate(commands):
        data = CowTree(copy.deepcopy(run.data.root), budget)
        data.adopt(data.root)
        schema = CowTree(copy.deepcopy(run.schema.root), budget)
        schema.adopt(schema.root)
        run.data, run.schema = data, schema
        try:
            run.run(index, command)
        except engine._Reject as rejection:
            run.diagnostics.append(engine.Diagnostic(rejection.code, rejection.message, index))
    out = dict(variables)
    out["schema"] = engine.build_schema(run.data.root, run.schema.root, budget)
    out["stat_data"] = engine.strip_metadata(run.data.root, budget)
    out["delta_data"] = run.delta
    size = engine.check_variables(out)
    return engine.UpdateResult(out, True, commands, run.diagnostics, run.changes, state_bytes=size)


def _clone(value: Any) -> Any:
    return msgspec.json.decode(msgspec.json.encode(value))


def copy_once_apply(variables: dict[str, Any], text: str) -> engine.UpdateResult:
    """Clone ``stat_data`` and ``schema`` once, then apply the reply to the clone.

    The engine still runs copy-on-write on the clone; an in-place engine would skip copying the
    few containers on the written paths, which is far less than the clone, so this is a lower
    bound of what the copy-once design costs.
    """
    cloned = {**variables, "stat_data": _clone(variables["stat_data"])}
    cloned["schema"] = _clone(variables["schema"])
    return engine.apply_reply(cloned, text)


def measure(fn: Callable[[], engine.UpdateResult], repeat: int) -> tuple[float, float]:
    times = []
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    gc.collect()
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return statistics.median(times), peak / (1 << 20)


def ledger_of(target_bytes: int, variables: dict[str, Any]) -> Ledger:
    """A ledger just under ``target_bytes``, made of instances holding ``variables``."""
    ledger = Ledger()
    step = len(encode_ledger(variables_ledger(variables)))
    n = 0
    while len(encode_ledger(ledger)) + step <= target_bytes:
        identity = InstanceIdentity("character:bench", f"session-{n}", "2026-11-30T00:00:00Z")
        ledger, _ = create_instance(ledger, identity, variables, now="2026-11-30T00:00:00Z")
        n += 1
    return ledger


def variables_ledger(variables: dict[str, Any]) -> Ledger:
    identity = InstanceIdentity("character:bench", "probe", "2026-11-30T00:00:00Z")
    return create_instance(Ledger(), identity, variables, now="2026-11-30T00:00:00Z")[0]


def measure_ledger(repeat: int) -> None:
    """Encode + cap check of the whole ledger (the pure part of saving mvu-instances.json)."""
    piece = initialize_variables(make_state(40 * 1024))
    print(f"{'ledger size':28} {'encode+check ms':>15}")
    for target in (1 << 20, 8 << 20, MAX_LEDGER_BYTES):
        ledger = ledger_of(target, piece)
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            size = check_ledger_size(ledger)
            times.append(time.perf_counter() - start)
        label = f"{size / (1 << 20):.2f} MiB, {len(ledger.states)} states"
        print(f"{label:28} {statistics.median(times) * 1e3:15.1f}")


SCHEMA_SOURCE = r"""
import { registerMvuSchema } from 'https://testingcf.jsdelivr.net/gh/StageDog/tavern_resource/dist/util/mvu_zod.js';
registerMvuSchema(z.object({
  npcs: z.record(z.string(), z.object({
    好感度: z.coerce.number().transform(v => _.clamp(v, 0, 100)).prefault(0),
    mood: z.enum(['calm', 'happy', 'grim']).prefault('calm'),
    inventory: z.array(z.string()).prefault([]),
    summary: z.string().prefault(''),
  })).prefault({}),
}));
"""


def measure_schema_mode(repeat: int) -> None:
    """The same kind of reply under a schema declaration (each command is validated)."""
    npcs = {
        f"npc{i:05d}": {
            "好感度": i % 100,
            "mood": "calm",
            "inventory": [f"item{k}" for k in range(4)],
            "summary": "rain over the chapel " * 40,
        }
        for i in range(1000)
    }
    variables = initialize_with_schema({"npcs": npcs}, descriptor_for(SCHEMA_SOURCE))
    text = "\n".join(
        f"_.set('npcs.npc{k * 10:05d}.{'好感度' if k % 2 else 'mood'}', "
        f"{k if k % 2 else repr('happy')});"
        for k in range(COMMANDS)
    )
    result = engine.apply_reply(variables, text)
    assert result.fatal is None and not result.diagnostics, result.diagnostics
    size = len(msgspec.json.encode(variables)) / (1 << 20)
    elapsed, peak = measure(lambda: engine.apply_reply(variables, text), repeat)
    print(
        f"schema mode: {COMMANDS} commands on {size:.2f} MiB, each validated: "
        f"median {elapsed * 1e3:.1f} ms, peak {peak:.2f} MiB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--quick", action="store_true", help="3 repeats")
    parser.add_argument("--no-ledger", action="store_true", help="skip the ledger encoding part")
    args = parser.parse_args()
    repeat = 3 if args.quick else args.repeat

    # Metadata (markers, $meta) is stripped at initialization; aim a little above 1 MiB raw.
    raw = make_state(TARGET_STATE_BYTES * 108 // 100)
    variables = initialize_variables(raw)
    npc_count = len(variables["stat_data"]["npcs"])
    state_bytes = len(msgspec.json.encode(variables["stat_data"]))
    text = make_reply(npc_count)

    ours = engine.apply_reply(variables, text)
    base = baseline_apply(variables, text)
    assert ours.fatal is None and not ours.diagnostics, ours.diagnostics
    assert ours.variables["stat_data"] == base.variables["stat_data"], "engines disagree"
    assert ours.variables["schema"] == base.variables["schema"], "schemas disagree"
    once = copy_once_apply(variables, text)
    assert ours.variables["stat_data"] == once.variables["stat_data"], "engines disagree"
    assert ours.variables["schema"] == once.variables["schema"], "schemas disagree"

    engine_time, engine_peak = measure(lambda: engine.apply_reply(variables, text), repeat)
    base_time, base_peak = measure(lambda: baseline_apply(variables, text), repeat)
    once_time, once_peak = measure(lambda: copy_once_apply(variables, text), repeat)
    print(
        f"state: {state_bytes / (1 << 20):.2f} MiB stat_data, {npc_count} NPCs; "
        f"variables {ours.state_bytes / (1 << 20):.2f} MiB; reply: {COMMANDS} commands; "
        f"repeat {repeat}"
    )
    print(f"{'':28} {'median ms':>10} {'peak MiB':>9}")
    print(f"{'engine (copy-on-write)':28} {engine_time * 1e3:10.1f} {engine_peak:9.2f}")
    print(f"{'baseline (deepcopy/command)':28} {base_time * 1e3:10.1f} {base_peak:9.2f}")
    print(f"{'baseline (clone once/reply)':28} {once_time * 1e3:10.1f} {once_peak:9.2f}")
    print(f"time ratio baseline/engine: {base_time / engine_time:.1f}x")
    print(f"peak memory ratio baseline/engine: {base_peak / engine_peak:.1f}x")
    print(f"time ratio copy-once/engine: {once_time / engine_time:.2f}x")
    print(f"peak memory ratio copy-once/engine: {once_peak / engine_peak:.2f}x")
    measure_schema_mode(repeat)
    if not args.no_ledger:
        measure_ledger(repeat)


if __name__ == "__main__":
    main()
