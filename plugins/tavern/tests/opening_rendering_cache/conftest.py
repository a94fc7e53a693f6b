"""A host with the real Tavern plugin loaded (it registers the rendering cache routes), and the
cache's folder in that host's data directory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from tavern_harness import TavernApi

from innkeeper_hostapi.testing import RunningHost


@pytest_asyncio.fixture
async def tavern(innkeeper_host: RunningHost) -> AsyncIterator[TavernApi]:
    await innkeeper_host.load("tavern", "innkeeper_tavern.plugin")
    yield TavernApi(innkeeper_host)


@pytest.fixture
def cache_root(tmp_path: Path) -> Path:
    """``<plugin data>/rendering-cache`` of the host above."""
    return tmp_path / "innkeeper-data" / "plugins" / "tavern" / "rendering-cache"
