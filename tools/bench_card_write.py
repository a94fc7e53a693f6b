#!/usr/bin/env python3
"""Benchmark card writes on one binding: ``POST /pmp-dsh-tavern/api/v1/mvu/card-write``
(capability, grant and lease checks, then the MVU CAS update) over loopback HTTP, sequential
commits with the revision each answer returns.

Baseline, measured in the same run on the same session: the MVU service's own ``update`` called
in-process (the ledger commit with its atomic save, no HTTP and no binding checks) — the least
any card write must pay. Printed: commits/s of each and the ratio.

Usage: uv run --no-sync python tools/bench_card_write.py [--writes N]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import time
from typing import Any

from bench_openings import play_host
from innkeeper_hostapi.mvu import TAVERN_MVU
from innkeeper_tavern.plugin import TAVERN_RESOURCES

V1 = "/pmp-dsh-tavern/api/v1"
V2 = "/pmp-dsh-tavern/api/v2"
CARD = {
    "spec": "chara_card_v2",
    "spec_version": "2.0",
    "data": {
        "name": "Bench",
        "first_mes": "Hello.",
        "character_book": {
            "name": "book",
            "entries": [
                {
                    "keys": [],
                    "content": "hp: 100",
                    "comment": "[initvar] base",
                    "enabled": True,
                    "insertion_order": 1,
                }
            ],
        },
    },
}


async def main(writes: int) -> None:
    async with play_host() as (host, _):
        client, origin = host.client, {"Origin": host.origin}

        async def call(method: str, path: str, body: Any) -> Any:
            resp = await client.request(method, path, json=body, headers=origin)
            data = await resp.json()
            assert resp.status < 300, data
            return data

        resources = host.get(TAVERN_RESOURCES)
        cid = (await resources.import_character(json.dumps(CARD).encode(), "b.json")).record.id
        draft = (await call("POST", V2 + "/drafts", {"characterId": cid}))["draft"]
        receipt = await call(
            "POST",
            f"{V2}/drafts/{draft['id']}/materialize",
            {"expectedRevision": 1, "operationId": "op", "text": "Hi"},
        )
        sid = receipt["sessionId"]
        source = '{"bundle": 1}'
        identity = {
            "version": 1,
            "sha256": hashlib.sha256(source.encode()).hexdigest(),
            "scope": "card",
        }
        grant = await call(
            "POST",
            V1 + "/rendering-write-grants",
            {
                "source": source,
                "sourceIdentity": identity,
                "executionId": "e",
                "downloaded": True,
                "enabled": True,
            },
        )
        scope = {
            "mode": "initial",
            "playthroughId": draft["playthroughId"],
            "sessionId": sid,
            "characterId": cid,
        }
        binding = await call(
            "POST",
            V1 + "/mvu/card-binding",
            {"scope": scope, "grantId": grant["grantId"], "sourceIdentity": identity},
        )
        service: Any = host.get(TAVERN_MVU)
        view = await service.opening_view(sid, first_checkpoint=False)
        revision = view["currentRevision"]
        local = {"authority": "local", "sessionId": sid}
        card_s = raw_s = 0.0
        # Interleaved, so both see the same ledger size (history grows with every commit).
        for i in range(writes):
            start = time.perf_counter()
            answer = await call(
                "POST",
                V1 + "/mvu/card-write",
                {
                    "capability": binding["capability"],
                    "operation": "replace",
                    "value": {"stat_data": {"hp": i}},
                    "expectedRevision": revision,
                    "operationId": f"w{i}",
                    "cause": "script",
                },
            )
            card_s += time.perf_counter() - start
            revision = answer["receipt"]["revision"]
            start = time.perf_counter()
            result = await service.update(
                id=binding["resourceId"],
                content={"stat_data": {"hp": -i}},
                expected_revision=revision,
                operation_id=f"raw{i}",
                scope=local,
            )
            raw_s += time.perf_counter() - start
            revision = result["receipt"]["revision"]
    card_rate, raw_rate = writes / card_s, writes / raw_s
    print(f"{writes} sequential commits of each kind on one binding, interleaved")
    print(f"card-write over HTTP     {card_rate:8.1f} commits/s")
    print(f"MVU update in-process    {raw_rate:8.1f} commits/s  (baseline)")
    print(f"card-write / baseline    {card_rate / raw_rate:8.2f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--writes", type=int, default=200)
    asyncio.run(main(parser.parse_args().writes))
