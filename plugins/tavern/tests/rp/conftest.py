"""A host with the Tavern plugin and the RP tools plugin; ``start_rp`` starts more (restarts)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio
from rp_harness import load_rp_host
from tavern_harness import HostStarter, TavernApi, host_starter

from innkeeper_core.testing import CoreTestHost
from innkeeper_hostapi.testing import RunningHost


@pytest_asyncio.fixture
async def api(innkeeper_host: RunningHost, tmp_path: Path) -> AsyncIterator[TavernApi]:
    yield await load_rp_host(innkeeper_host, tmp_path / "plugins")


@pytest_asyncio.fixture
async def start_rp(tmp_path: Path) -> AsyncIterator[HostStarter]:
    """``start(data_dir)`` → ``(host, TavernApi)`` with both plugins loaded."""

    async def load(host: CoreTestHost) -> TavernApi:
        return await load_rp_host(host, tmp_path / "plugins")

    async with host_starter(load) as start:
        yield start
