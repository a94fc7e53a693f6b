"""A host with the real Tavern plugin loaded, wrapped in the opening world-book helpers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from book_harness import Books
from tavern_harness import HostStarter, host_starter

from innkeeper_core.testing import CoreTestHost
from innkeeper_hostapi.testing import RunningHost


@pytest_asyncio.fixture
async def books(innkeeper_host: RunningHost) -> AsyncIterator[Books]:
    await innkeeper_host.load("tavern", "innkeeper_tavern.plugin")
    yield Books(innkeeper_host)


@pytest.fixture
def state_file(tmp_path: Path) -> Path:
    """``<plugin data>/opening-world-books.json`` of the host above."""
    return tmp_path / "innkeeper-data" / "plugins" / "tavern" / "opening-world-books.json"


@pytest_asyncio.fixture
async def start_books() -> AsyncIterator[HostStarter]:
    """``start(data_dir, **config)`` → ``(host, Books)``; restarts share a data directory."""

    async def load(host: CoreTestHost) -> Books:
        await host.load("tavern", "innkeeper_tavern.plugin")
        return Books(host)

    async with host_starter(load) as start:
        yield start
