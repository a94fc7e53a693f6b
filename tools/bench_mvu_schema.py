#!/usr/bin/env python3
"""Benchmark a template-style MVU schema (interpreter version 3) on a 1 MiB state.

The schema is written the way the MVU + mvu_zod template writes card schemas: a record of NPC
objects with ``_.clamp`` transforms and prefaults, and per-NPC inventories cleaned with
``_.pickBy(d, ({ 数量 }) => 数量 > 0)``. Measured in one run, medians over ``--repeat``:

* **compile** of the declaration (parse + interpret, the compile memo cleared each time);
* **validate** of the whole 1 MiB ``stat_data`` (what initialization and the first command of a
  reply do);
* **reply** of ten ``_.set`` commands in schema mode (each validated).

Baselines, same run: the same schema written for interpreter version 2 without destructuring or
lodash (a ``for...of`` loop instead of ``_.pickBy``, ``Math.min/max`` instead of ``_.clamp``),
and for the reply also the same content in native (``$meta``) mode with no schema at all. No
assertions: read the numbers.

    uv run --no-sync python tools/bench_mvu_schema.py [--repeat 5] [--mib 1]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import msgspec

from innkeeper_tavern.pure.mvu import engine
from innkeeper_tavern.pure.mvu.dsl import engine as dsl
from innkeeper_tavern.pure.mvu.dsl.capabilities import REVIEWED_MVU_ZOD_URL
from innkeeper_tavern.pure.mvu.initvar import initialize_variables
from innkeeper_tavern.pure.mvu.limits import Budget, MvuBudgetError

HEADER = f"import {{ registerMvuSchema }} from '{REVIEWED_MVU_ZOD_URL}';\n"

V3 = (
    HEADER
    + r"""
const clamp100 = n => _.clamp(Number(n) || 0, 0, 100);
export const Schema = z.object({
  世界: z.object({ 天: z.coerce.number().prefault(1) }).prefault({}),
  角色: z.record(z.string(), z.object({
    好感度: z.coerce.number().transform(clamp100).prefault(0),
    hp: z.coerce.number().transform(v => _.clamp(v, 0, 100)).prefault(100),
    心情: z.string().prefault('平静'),
    物品栏: z.record(
      z.string(),
      z.object({ 数量: z.coerce.number().prefault(1), 描述: z.string() }),
    )
      .transform(d => _.pickBy(d, ({ 数量 }) => 数量 > 0)).prefault({}),
  })).prefault({}),
});
$(() => { registerMvuSchema(Schema); });
"""
)

V2 = (
    HEADER
    + r"""
const clamp100 = n => Math.min(Math.max(Number(n) || 0, 0), 100);
export const Schema = z.object({
  世界: z.object({ 天: z.coerce.number().prefault(1) }).prefault({}),
  角色: z.record(z.string(), z.object({
    好感度: z.coerce.number().transform(clamp100).prefault(0),
    hp: z.coerce.number().transform(v => Math.min(Math.max(v, 0), 100)).prefault(100),
    心情: z.string().prefault('平静'),
    物品栏: z.record(
      z.string(),
      z.object({ 数量: z.coerce.number().prefault(1), 描述: z.string() }),
    )
      .transform(d => {
        const out = {};
        for (const key of Object.keys(d)) { if (d[key].数量 > 0) { out[key] = d[key]; } }
        return out;
      }).prefault({}),
  })).prefault({}),
});
$(() => { registerMvuSchema(Schema); });
"""
)


def make_stat(target_bytes: int) -> dict[str, Any]:
    npcs: dict[str, Any] = {}
    size = 0
    i = 0
    while size < target_bytes:
        npcs[f"npc{i:05d}"] = {
            "好感度": i % 100,
            "hp": 100,
            "心情": "平静",
            "物品栏": {
                f"物品{k}": {"数量": (i + k) % 3, "描述": "a worn leather strap " * 3}
                for k in range(6)
            },
        }
        size = len(msgspec.json.encode(npcs))
        i += 1
    return {"世界": {"天": 1}, "角色": npcs}


def median_ms(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--mib", type=float, default=1.0)
    args = parser.parse_args()
    stat = make_stat(int(args.mib * (1 << 20)))
    npcs = len(stat["角色"])
    mib = len(msgspec.json.encode(stat)) / (1 << 20)
    reply = "\n".join(f"_.set('角色.npc{k * 7:05d}.好感度', {k * 30});" for k in range(10))

    def compile_cold(source: str, version: int) -> Callable[[], Any]:
        def run() -> Any:
            dsl._CACHE.clear()
            return dsl.compile_declaration(source, version)

        return run

    rows = []
    states = {}
    for label, source, version in (("v3 template", V3, 3), ("v2 baseline", V2, 2)):
        compile_ms = median_ms(compile_cold(source, version), args.repeat)
        compiled = dsl.compile_declaration(source, version)
        _, issues = compiled.validate(stat, Budget(dsl.MAX_COMPILE_STEPS * 50))
        assert not issues, issues[:3]
        validate_ms = median_ms(
            lambda c=compiled: c.validate(stat, Budget(dsl.MAX_COMPILE_STEPS * 50)), args.repeat
        )
        variables = dsl.initialize_with_schema(stat, dsl.descriptor_for(source, version))
        states[label] = variables
        result = engine.apply_reply(variables, reply)
        assert result.fatal is None and not result.diagnostics, result.diagnostics
        reply_ms = median_ms(lambda v=variables: engine.apply_reply(v, reply), args.repeat)
        rows.append((label, compile_ms, validate_ms, reply_ms))
    a, b = states["v3 template"]["stat_data"], states["v2 baseline"]["stat_data"]
    assert a == b, "the two schemas disagree"
    try:
        native = initialize_variables(stat)
        native_ms: float | None = median_ms(lambda: engine.apply_reply(native, reply), args.repeat)
    except MvuBudgetError:
        native_ms = None  # $meta mode adds a generated schema; it may not fit the 2 MiB cap

    print(f"state: {mib:.2f} MiB stat_data, {npcs} NPCs x 6 items; repeat {args.repeat}")
    print(f"{'':14} {'compile ms':>11} {'validate ms':>12} {'10-set reply ms':>16}")
    for label, c, v, r in rows:
        print(f"{label:14} {c:11.2f} {v:12.1f} {r:16.1f}")
    v3, v2 = rows[0], rows[1]
    print(
        f"ratios v3/v2: compile {v3[1] / v2[1]:.2f}x, validate {v3[2] / v2[2]:.2f}x, "
        f"reply {v3[3] / v2[3]:.2f}x"
    )
    if native_ms is None:
        print(
            "native $meta mode: the state with its generated schema exceeds 2 MiB (try --mib 0.5)"
        )
    else:
        print(f"native $meta reply: {native_ms:.1f} ms; v3 reply / native {v3[3] / native_ms:.2f}x")


if __name__ == "__main__":
    main()
