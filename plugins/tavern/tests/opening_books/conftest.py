"""A host with the real Tavern plugin loaded, wrapped in the opening world-book helpers."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio
from book_harness import Books

from innkeeper_hostapi.testing import RunningHost


@pytest_asyncio.fixture
async def books(innkeeper_host: RunningHost) -> AsyncIterator[Books]:
    await innkeeper_host.load("tavern", "innkeeper_tavern.plugin")
    yield Books(innkeeper_host)
