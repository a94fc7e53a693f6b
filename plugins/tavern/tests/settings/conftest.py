"""A host with the real Tavern plugin loaded (the settings routes are part of its setup)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio
from tavern_harness import TavernApi

from innkeeper_hostapi.testing import RunningHost


class Tavern(TavernApi):
    """HTTP helpers plus the plugin's data directory."""

    def __init__(self, host: RunningHost, root: Path) -> None:
        super().__init__(host)
        self.root = root


@pytest_asyncio.fixture
async def tavern(innkeeper_host: RunningHost, tmp_path: Path) -> AsyncIterator[Any]:
    await innkeeper_host.load("tavern", "innkeeper_tavern.plugin")
    yield Tavern(innkeeper_host, tmp_path / "innkeeper-data" / "plugins" / "tavern")
