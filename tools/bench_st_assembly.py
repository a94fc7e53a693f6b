#!/usr/bin/env python3
"""Benchmark the default RP strategy's per-turn assembly for Lucid Loom v2.8 (issue 29).

A real host with the real Assembler and Tavern plugins: the corpus preset "Lucid Loom v2.8"
(253 prompts, squashed, speakers named), the corpus card "Pxansatu" with its embedded book, a
user with a persona, a new session (it gets ``tavern-rp``). It plays ``--turns`` turns with the
synthetic provider and times, per turn, the Assembler's work (``plan``: the sources, Tavern's
included, and placement; the projector: history budget, projection and, where the code has it,
the request shape) and the whole turn (``/prompt`` to idle). Prints medians; timings are never
asserted.

Run it for two trees in one pairing to compare (``before`` = a worktree of main whose sources
go first on ``PYTHONPATH``):

    farm-bench -n 5 -- sh -c 'exec uv run --no-sync python tools/bench_st_assembly.py >>/tmp/a' \\
      --vs "sh -c 'exec env PYTHONPATH=$BASE_PATHS uv run --no-sync python \\
      tools/bench_st_assembly.py >>/tmp/b'"
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
import urllib.parse
from pathlib import Path
from typing import Any

from innkeeper_core.testing import start_test_host
from innkeeper_hostapi.agents import AGENTS, PROVIDER

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "sillytavern-corpus"
PRESET = CORPUS / "prolix-oc-st-presets" / "presets" / "Lucid Loom v2.8.json"
CARD = CORPUS / "prolix-oc-st-presets" / "cards" / "Pxansatu.json"
V1 = "/pmp-dsh-tavern/api/v1"


async def run(turns: int) -> dict[str, float]:
    import innkeeper_assembler.service as service

    spent: list[float] = []

    def timed(fn: Any) -> Any:
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return await fn(*args, **kwargs)
            finally:
                spent.append(time.perf_counter() - start)

        return wrapper

    service.Assembler.render_section = timed(service.Assembler.render_section)  # type: ignore[method-assign]
    service.AssemblerProjector.project = timed(service.AssemblerProjector.project)  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory() as data:
        host = await start_test_host(Path(data))
        try:
            await host.load("assembler", "innkeeper_assembler.plugin")
            await host.load("tavern", "innkeeper_tavern.plugin")

            async def call(method: str, path: str, body: Any = None, **kw: Any) -> Any:
                headers = {"Origin": host.origin}
                if "data" in kw:
                    headers["Content-Type"] = "application/json"
                    got = await host.client.request(method, path, data=kw["data"], headers=headers)
                else:
                    got = await host.client.request(method, path, json=body, headers=headers)
                payload = await got.json()
                assert got.status < 300, payload
                return payload

            preset = (
                await call("POST", V1 + "/import", {"content": PRESET.read_text(), "name": "Loom"})
            )["preset"]["id"]
            card = (
                await call(
                    "POST",
                    f"{V1}/characters/import?filename={urllib.parse.quote(CARD.name)}",
                    data=CARD.read_bytes(),
                )
            )["character"]["id"]
            user = (
                await call(
                    "POST", V1 + "/users", {"name": "Mira", "description": "A cartographer."}
                )
            )["user"]["id"]
            session = (await call("POST", "/host/api/sessions", {"title": "bench"}))["session"][
                "id"
            ]
            await call("POST", V1 + "/select", {"id": preset, "sessionId": session})
            await call(
                "POST", V1 + "/character-selection", {"sessionId": session, "characterCardId": card}
            )
            await call("POST", V1 + "/user-selection", {"sessionId": session, "userId": user})
            provider = host.get(PROVIDER)
            per_turn: list[float] = []
            assembly: list[float] = []
            for turn in range(turns):
                provider.enqueue(f"Reply {turn}: the ash settles over the weavers' hall. " * 8)  # type: ignore[attr-defined]
                spent.clear()
                start = time.perf_counter()
                await call(
                    "POST",
                    f"/host/api/sessions/{session}/prompt",
                    {"text": f"Turn {turn}: we walk on through the ash. " * 6},
                )
                await host.get(AGENTS).wait_idle(session)
                per_turn.append(time.perf_counter() - start)
                assembly.append(sum(spent))
            sent = provider.requests[-1].messages  # type: ignore[attr-defined]
        finally:
            await host.close()
    skip = min(2, turns - 1)  # the first turns warm caches
    return {
        "assembly_ms": statistics.median(assembly[skip:]) * 1000,
        "turn_ms": statistics.median(per_turn[skip:]) * 1000,
        "messages_sent": float(len(sent)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=12)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(run(args.turns))))


if __name__ == "__main__":
    main()
