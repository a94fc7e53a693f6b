"""The timed-effect state file (``loader-timed-effects.json``): a turn with no sticky or
cooldown effect running moves the session's clock without rewriting the file, and every read,
before and after a restart, gives what it would have given had the file been rewritten
(docs/worldbook.md#wi-timed-effects)."""

from __future__ import annotations

from pathlib import Path

from innkeeper_tavern.features.prompt_profile.timed import TimedEffectsStore
from innkeeper_tavern.pure.worldbook import TimedEffect, TimedEffectsState

EMPTY = TimedEffectsState()


def _sticky(end: int) -> TimedEffectsState:
    return TimedEffectsState(
        sticky={"b:0": TimedEffect(hash="h", start=1, end=end, protected=False)}
    )


async def _reads(store: TimedEffectsStore) -> list[TimedEffectsState]:
    return [store.input_for("s1", clock) for clock in range(8)]


async def test_an_idle_turn_moves_the_clock_without_a_write(tmp_path: Path) -> None:
    store = TimedEffectsStore(tmp_path)
    await store.open()
    await store.commit("s1", 1, EMPTY, EMPTY, 1.0)
    written = store.path.read_bytes()
    for clock in range(2, 6):
        await store.commit("s1", clock, EMPTY, EMPTY, float(clock))
    assert store.path.read_bytes() == written
    assert store.has("s1")
    live = await _reads(store)
    assert live == [EMPTY] * 8
    reopened = TimedEffectsStore(tmp_path)
    await reopened.open()
    assert await _reads(reopened) == live and reopened.has("s1")


async def test_a_running_effect_is_written_and_its_end_too(tmp_path: Path) -> None:
    store = TimedEffectsStore(tmp_path)
    await store.open()
    await store.commit("s1", 1, EMPTY, EMPTY, 1.0)
    await store.commit("s1", 2, EMPTY, _sticky(4), 2.0)
    reopened = TimedEffectsStore(tmp_path)
    await reopened.open()
    assert reopened.input_for("s1", 3) == _sticky(4)
    # The effect ends: the state that went in was not empty, so the file is rewritten.
    await store.commit("s1", 3, _sticky(4), EMPTY, 3.0)
    reopened = TimedEffectsStore(tmp_path)
    await reopened.open()
    assert reopened.input_for("s1", 4) == EMPTY
    assert reopened.input_for("s1", 3) == _sticky(4)  # a retry at the same point of the chat
