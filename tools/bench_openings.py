#!/usr/bin/env python3
"""Benchmark opening drafts: a greeting switch of a card with a ~1 MiB ``[initvar]`` and 8
greetings (each with an ``<UpdateVariable>`` envelope).

A switch is ``PUT /pmp-dsh-tavern/api/v2/drafts/:id {expectedRevision, selection:{greetingIndex}}``
over loopback HTTP, answered with the new greeting's whole opening (about 2 MiB of JSON with its
schema), after every greeting was visited once; with ``--edits N`` the first N greetings'
openings were also edited once by the player (so a switch to one answers a saved edit; the
edits are kept on disk, 8 x 2 MiB with ``--edits 8``). "switch" ends when the
client has received every byte of the answer (it reads only ``draft.revision``); "+ client
decode" also decodes the whole answer with msgspec (a client's cost, not the host's; the
stdlib ``json`` decode of the same bytes is printed apart). Wall and process CPU medians are
both printed: on a loaded shared machine wall time swings several-fold, CPU time far less.

Baseline, measured in the same run: computing that greeting's opening in-process
(``opening(template, index)``: ``[initvar]`` + the greeting's envelope, the work any
implementation must do to show a greeting's variables), and ``GET /drafts/:id`` (the read a
client does anyway). Printed: median ms per switch, ratios, and the tracemalloc peak of one
switch.

Usage: uv run --no-sync python tools/bench_openings.py [--repeat N] [--kib 1024] [--edits N]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import tempfile
import time
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import msgspec

from bench_play import measure
from innkeeper_core.testing import start_test_host
from innkeeper_hostapi.mvu import TAVERN_MVU
from innkeeper_tavern.features.mvu_service.templates import opening
from innkeeper_tavern.plugin import TAVERN_RESOURCES

V2 = "/pmp-dsh-tavern/api/v2"
GREETINGS = 8


class _Revision(msgspec.Struct):
    revision: int


class _Answer(msgspec.Struct):
    draft: _Revision


#: Reads only ``draft.revision`` of an answer (skipping, not building, the opening).
_REVISION = msgspec.json.Decoder(_Answer)


def card(kib: int) -> dict[str, Any]:
    """``[initvar]`` of about ``kib`` KiB in four entries (one string field holds at most 1 MiB)."""
    entries = []
    per_entry = kib * 1024 // 4
    key = 0
    for part in range(4):
        lines: list[str] = []
        size = 0
        while size < per_entry:
            line = f"k{key:06d}: {'v' * 40}"
            lines.append(line)
            size += len(line) + 1
            key += 1
        entries.append(
            {
                "keys": [],
                "content": "\n".join(lines),
                "comment": f"[initvar] part {part}",
                "enabled": True,
                "insertion_order": part,
            }
        )
    greetings = [
        f'G{g}.\n<UpdateVariable>_.set("k000001", "g{g}");</UpdateVariable>'
        for g in range(GREETINGS)
    ]
    return {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {
            "name": "Bench",
            "first_mes": greetings[0],
            "alternate_greetings": greetings[1:],
            "character_book": {"name": "book", "entries": entries},
        },
    }


async def median(run: Callable[[], Awaitable[Any]], repeat: int) -> float:
    """Median wall time of ``repeat`` runs (the peak is measured apart, on one switch)."""
    return (await measure(run, repeat))[0]


async def cpu_median(run: Callable[[], Awaitable[Any]], repeat: int) -> float:
    """Median CPU time of the whole process (client and host, every thread) over ``repeat``
    runs: on a shared, loaded machine it moves far less than wall time."""
    times = []
    for _ in range(repeat):
        gc.collect()
        start = time.process_time()
        await run()
        times.append(time.process_time() - start)
    return sorted(times)[len(times) // 2]


@asynccontextmanager
async def play_host() -> AsyncIterator[tuple[Any, Path]]:
    """A test host with the Tavern plugin and a bound workspace, under a temporary directory:
    ``(host, tmp)``; closed (and removed) on exit."""
    logging.disable(logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        root.mkdir()
        host = await start_test_host(Path(tmp) / "data")
        try:
            await host.load("tavern", "innkeeper_tavern.plugin")
            origin = {"Origin": host.origin}
            await host.client.put(V2 + "/workspace", json={"path": str(root)}, headers=origin)
            yield host, Path(tmp)
        finally:
            await host.close()


async def main(repeat: int, kib: int, edits: int) -> None:
    async with play_host() as (host, tmp):
        client, origin = host.client, {"Origin": host.origin}
        resources = host.get(TAVERN_RESOURCES)
        cid = (await resources.import_character(json.dumps(card(kib)).encode(), "b.json")).record.id
        resp = await client.post(V2 + "/drafts", json={"characterId": cid}, headers=origin)
        draft = (await resp.json())["draft"]
        did, revision = draft["id"], draft["revision"]
        state: dict[str, Any] = {"revision": revision, "index": 0, "body": b""}

        async def put(body: dict[str, Any], *, decode: bool = True) -> dict[str, Any] | None:
            body = {"expectedRevision": state["revision"], **body}
            r = await client.put(f"{V2}/drafts/{did}", json=body, headers=origin)
            state["body"] = await r.read()
            assert r.status == 200, state["body"][:300]
            if not decode:  # only the revision (the answer's bytes were all received)
                state["revision"] = _REVISION.decode(state["body"]).draft.revision
                return None
            data: dict[str, Any] = msgspec.json.decode(state["body"])
            state["revision"] = data["draft"]["revision"]
            return data

        async def switch(*, decode: bool = False) -> dict[str, Any] | None:
            index = (state["index"] + 1) % GREETINGS
            data = await put({"selection": {"greetingIndex": index}}, decode=decode)
            state["index"] = index
            return data

        async def switch_decoded() -> None:
            await switch(decode=True)

        for _ in range(GREETINGS):  # visit (and with --edits, edit) every greeting once
            answer = await switch(decode=True)
            assert answer is not None
            variables = answer["opening"]["variables"]
            if state["index"] < edits:
                variables["stat_data"]["k000002"] = f"edited {state['index']}"
                await put({"variables": variables})
        folder = Path(tmp) / "data" / "plugins"
        record = next(folder.rglob(f"{did}.json"))
        edit_paths = list(record.with_suffix("").glob("*.json"))
        size = record.stat().st_size + sum(p.stat().st_size for p in edit_paths)
        edit_files = len(edit_paths)
        put_s = await median(switch, repeat)
        put_cpu = await cpu_median(switch, repeat)
        decoded_s = await median(switch_decoded, repeat)
        decoded_cpu = await cpu_median(switch_decoded, repeat)
        body = state["body"]
        started = time.perf_counter()
        json.loads(body)
        stdlib_s = time.perf_counter() - started
        started = time.perf_counter()
        msgspec.json.decode(body)
        decode_s = time.perf_counter() - started
        service: Any = host.get(TAVERN_MVU)
        template = await service.character_template(cid)

        async def compute() -> None:
            await asyncio.to_thread(opening, template, state["index"])

        compute_s = await median(compute, repeat)
        compute_cpu = await cpu_median(compute, repeat)

        async def read() -> None:
            r = await client.get(f"{V2}/drafts/{did}")
            msgspec.json.decode(await r.read())

        get_s = await median(read, repeat)
        get_cpu = await cpu_median(read, repeat)
        gc.collect()
        tracemalloc.start()
        await switch()
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    print(
        f"card: [initvar] {kib} KiB, {GREETINGS} greetings, edits={edits}; draft files "
        f"{size / 2**20:.1f} MiB ({edit_files} edit files); answer {len(body) / 2**20:.1f} MiB"
    )
    print("                          wall ms   cpu ms   (medians; goal: a switch <= 20 ms)")
    print(f"greeting switch (PUT)   {put_s * 1000:8.1f} {put_cpu * 1000:8.1f}")
    print(f"  + client decode       {decoded_s * 1000:8.1f} {decoded_cpu * 1000:8.1f}")
    print(
        f"opening() in-process    {compute_s * 1000:8.1f} {compute_cpu * 1000:8.1f}   "
        f"switch/opening = {put_s / compute_s:.2f}x wall, {put_cpu / compute_cpu:.2f}x cpu"
    )
    print(
        f"GET /drafts/:id         {get_s * 1000:8.1f} {get_cpu * 1000:8.1f}   "
        f"switch/GET = {put_s / get_s:.2f}x wall, {put_cpu / get_cpu:.2f}x cpu"
    )
    print(
        f"client decode of one answer alone: msgspec {decode_s * 1000:.1f} ms, "
        f"stdlib json {stdlib_s * 1000:.1f} ms"
    )
    print(
        f"switch tracemalloc peak {peak / 2**20:8.1f} MiB (host + the received answer bytes, "
        "not decoded)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--kib", type=int, default=1024)
    parser.add_argument(
        "--edits", type=int, default=0, metavar="N", help="edit the first N greetings once first"
    )
    args = parser.parse_args()
    asyncio.run(main(args.repeat, args.kib, args.edits))
