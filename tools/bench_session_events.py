#!/usr/bin/env python3
"""What ``session/events-committed`` costs the writers: appends with and without listeners.

The same event store, the same payloads, in one run, three ways (interleaved in a rotating
order, ``--repeat`` rounds, medians):

* **baseline**: nobody listens to ``session/events-committed`` (the host queues nothing);
* **no-op**: one subscribed listener that returns at once;
* **rp-like**: the Tavern RP listener's work on an event that does not concern it (scan the
  commit for a ``sandbox/mode`` event).

Each round appends ``--events`` user messages one at a time (one transaction each, awaited) and
then waits until every commit is delivered. It prints the time per append (commit and
delivery included) and the ratio to the baseline; 1.00 means free.

    uv run --no-sync python tools/bench_session_events.py [--events 2000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from innkeeper_core.plugins.registries import HostEventBus
from innkeeper_core.sessions import EventStore
from innkeeper_core.sessions.committed import CommittedEvents
from innkeeper_hostapi.agents import SESSION_EVENTS_COMMITTED, SessionEventsCommitted
from innkeeper_hostapi.sessions import SandboxMode, UserMessage, text_content

Work = Callable[[SessionEventsCommitted], None]


def noop(commit: SessionEventsCommitted) -> None:
    return None


def rp_like(commit: SessionEventsCommitted) -> None:
    if any(isinstance(e.data, SandboxMode) for e in commit.events):
        raise AssertionError("the benchmark appends no sandbox events")


async def one_round(store: EventStore, work: Work | None, events: int) -> float:
    bus = HostEventBus()
    committed = CommittedEvents(bus, bus.listening)
    remove = store.add_listener(committed.on_append)
    committed.start()
    delivered = asyncio.Event()
    seen = 0

    async def listener(commit: SessionEventsCommitted) -> None:
        nonlocal seen
        assert work is not None
        work(commit)
        seen += 1
        if seen == events:
            delivered.set()

    sub = bus.subscribe(SESSION_EVENTS_COMMITTED, "bench", listener) if work else None
    try:
        session = (await store.create_session()).id
        datas = [
            UserMessage(message_id=f"m{i}", content=text_content(f"line {i} of the story"))
            for i in range(events)
        ]
        start = time.perf_counter()
        for data in datas:
            await store.append(session, data)
        if work is not None:
            await delivered.wait()
        return (time.perf_counter() - start) / events
    finally:
        if sub is not None:
            bus.unsubscribe(sub)
        remove()
        await committed.stop()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    ways: dict[str, Work | None] = {"baseline": None, "no-op": noop, "rp-like": rp_like}
    times: dict[str, list[float]] = {name: [] for name in ways}
    with tempfile.TemporaryDirectory() as tmp:
        async with await EventStore.open(Path(tmp)) as store:
            names = list(ways)
            for round_no in range(args.repeat):
                # Rotate the order: no way always pays for the store's periodic checkpoints.
                shift = round_no % len(names)
                for name in names[shift:] + names[:shift]:
                    times[name].append(await one_round(store, ways[name], args.events))
    base = statistics.median(times["baseline"])
    print(f"{args.events} appends x {args.repeat} rounds (median per append)")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"  {name:9} {median * 1e6:8.1f} us   ratio {median / base:5.2f}")


if __name__ == "__main__":
    asyncio.run(main())
