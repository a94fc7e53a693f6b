#!/usr/bin/env python3
"""The ``request/assembly`` digest of a long story's requests: :class:`WireDigest` (each
message's encoding reused while it is sent again) vs ``json.dumps`` of the whole sent array every
step (what the agent did before), on the same arrays in the same run.

Each step sends ``--sections`` system sections the request projector rebuilds as new message
objects (unchanged text) plus the story's history, which grows by a user and an assistant message
per step. Times are CPU time per step over ``--steps`` steps; both sides build the same arrays.

    uv run --no-sync python tools/bench_wire_digest.py [--steps 300] [--sections 60]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import time
from collections.abc import Callable, Sequence

from innkeeper_core.agents.evidence import WireDigest, wire_message
from innkeeper_hostapi.providers import ChatMessage


def whole_array(messages: Sequence[ChatMessage]) -> str:
    wire = [wire_message(m) for m in messages]
    return hashlib.sha256(json.dumps(wire, ensure_ascii=False).encode()).hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--sections", type=int, default=60)
    args = parser.parse_args()
    rng = random.Random(7)

    def words(n: int) -> str:
        return " ".join(f"word{rng.randrange(4_000)}" for _ in range(n))

    sections = [words(300) for _ in range(args.sections)]
    history = [
        ChatMessage(role="user" if i % 2 == 0 else "assistant", content=words(150))
        for i in range(2 * args.steps)
    ]

    def step(n: int) -> list[ChatMessage]:
        return [ChatMessage(role="system", content=c) for c in sections] + history[: 2 * n]

    def run(digest: Callable[[Sequence[ChatMessage]], str]) -> tuple[float, list[str]]:
        out: list[str] = []
        start = time.process_time()
        for n in range(1, args.steps + 1):
            out.append(digest(step(n)))
        return (time.process_time() - start) / args.steps, out

    base, expected = run(whole_array)
    cached, got = run(WireDigest())
    if got != expected:
        raise SystemExit("the digests differ")
    print(f"{args.steps} steps, {args.sections} sections, history up to {2 * args.steps} messages")
    print(f"json.dumps of the whole array: {base * 1000:8.3f} ms/step")
    print(f"WireDigest:                    {cached * 1000:8.3f} ms/step")
    print(f"ratio WireDigest / whole array: {cached / base:.2f}")


if __name__ == "__main__":
    main()
