"""Fixtures for the session store tests: a store in a temp dir with a fake clock and ids."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from innkeeper_core.sessions import EventStore, StoreSessionController

EPOCH_MS = 1_767_225_600_000  # 2026-01-01T00:00:00.000Z


class FakeClock:
    """Advances one millisecond per reading."""

    def __init__(self) -> None:
        self.now = EPOCH_MS

    def __call__(self) -> int:
        self.now += 1
        return self.now


@pytest.fixture
def ids() -> Callable[[], str]:
    counter = itertools.count(1)
    return lambda: f"id-{next(counter)}"


@pytest.fixture
async def store(tmp_path: Path, ids: Callable[[], str]) -> AsyncIterator[EventStore]:
    async with await EventStore.open(tmp_path, clock=FakeClock(), new_id=ids) as opened:
        yield opened


@pytest.fixture
def controller(store: EventStore) -> StoreSessionController:
    return StoreSessionController(store)
