#!/usr/bin/env python3
"""Benchmark card-declared MVU command processors (QuickJS VMs, issue 14).

Measured, in one run:

* **VM cold start**: creating a VM with the processor environment and a card declaration and
  initializing it (what the first reply of an instance pays), against the same reply applied
  natively (``apply_reply``) as the baseline.
* **Per-turn processor cost**: one reply through the card processor (extract, dispatch in the
  warm VM, check the output, apply) against the same reply without a processor (``apply_reply``
  on the same state), as a ratio.
* **Memory per live VM**: QuickJS's own allocator size after initialization and one dispatch,
  and the resident-set growth of the process per VM over ``--vms`` live VMs; from it, how many
  live VMs fit in 1 GiB.

The reply has ten commands and a JSON Patch block; the state has ``--keys`` entries. Times are
medians over ``--repeat`` runs. No assertions: read the numbers.

    uv run --no-sync python tools/bench_mvu_vm.py [--repeat 50] [--vms 200] [--keys 200]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from innkeeper_tavern.features.mvu_service import commands as command_view
from innkeeper_tavern.features.mvu_vm import Dispatch, ScriptVm
from innkeeper_tavern.features.mvu_vm.vm import views_of
from innkeeper_tavern.pure.mvu import apply_commands, apply_reply, initialize_variables

#: A card declaration in the style of real MVU card scripts: a filter plus a path fix.
SCRIPT = r"""
await waitGlobalInitialized('Mvu');
eventOn(Mvu.events.COMMAND_PARSED, (variables, commands, message) => {
  for (let i = commands.length - 1; i >= 0; i--) {
    const path = commands[i].args[0] || '';
    if (path.includes('secret')) commands.splice(i, 1);
  }
});
"""


def _reply(keys: int) -> str:
    lines = [f"_.set('k{i}', {i * 2});//turn" for i in range(0, min(keys, 40), 4)]
    patch = '<JSONPatch>[{"op": "replace", "path": "/k1", "value": 7}]</JSONPatch>'
    return (
        "The story goes on.\n<UpdateVariable>\n"
        + "\n".join(lines)
        + "\n"
        + patch
        + "\n</UpdateVariable>"
    )


def _median_ms(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def _rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--vms", type=int, default=200)
    parser.add_argument("--keys", type=int, default=200)
    args = parser.parse_args()

    variables = initialize_variables({f"k{i}": i for i in range(args.keys)})
    text = _reply(args.keys)

    def native() -> None:
        apply_reply(variables, text)

    def cold() -> None:
        ScriptVm(SCRIPT)

    warm = ScriptVm(SCRIPT)

    def processed() -> None:
        prepared = command_view.prepare(text)
        call = Dispatch(variables, prepared.views(), text)
        chosen = command_view.select(prepared, views_of(warm.dispatch(call)))
        apply_commands(variables, chosen, extract_issues=prepared.issues)

    native()
    processed()
    native_ms = _median_ms(native, args.repeat)
    cold_ms = _median_ms(cold, args.repeat)
    turn_ms = _median_ms(processed, args.repeat)
    print(f"reply without processor (baseline): {native_ms:8.3f} ms")
    print(f"VM cold start:                      {cold_ms:8.3f} ms  ({cold_ms / native_ms:5.2f}x)")
    print(f"reply through the card processor:   {turn_ms:8.3f} ms  ({turn_ms / native_ms:5.2f}x)")

    gc.collect()
    before = _rss_bytes()
    live = []
    for _ in range(args.vms):
        vm = ScriptVm(SCRIPT)
        prepared = command_view.prepare(text)
        vm.dispatch(Dispatch(variables, prepared.views(), text))
        live.append(vm)
    gc.collect()
    per_vm_rss = (_rss_bytes() - before) / args.vms
    per_vm_engine = statistics.median(vm.memory_bytes() for vm in live)
    print(
        f"memory per live VM: {per_vm_engine / 1024:7.1f} KiB (QuickJS allocator), "
        f"{per_vm_rss / 1024:7.1f} KiB (process RSS growth over {args.vms} VMs)"
    )
    print(
        f"live VMs per GiB:   {int(2**30 / max(per_vm_rss, per_vm_engine)):7d} "
        f"(worst case at the 32 MiB cap: {2**30 // (32 * 2**20)})"
    )


if __name__ == "__main__":
    main()
