"""A running host with the real Tavern plugin, plus helpers for the v2 play routes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio
from play_harness import Play
from tavern_harness import HostStarter, host_starter

from innkeeper_core.testing import CoreTestHost
from innkeeper_hostapi.testing import RunningHost


async def _load(host: CoreTestHost, root: Path) -> Play:
    await host.load("tavern", "innkeeper_tavern.plugin")
    return Play(host, root)


@pytest_asyncio.fixture
async def play(innkeeper_host: RunningHost, tmp_path: Path) -> AsyncIterator[Play]:
    """The Tavern plugin in a fresh host and an unbound, existing workspace directory."""
    await innkeeper_host.load("tavern", "innkeeper_tavern.plugin")
    root = tmp_path / "workspace"
    root.mkdir()
    yield Play(innkeeper_host, root)


@pytest_asyncio.fixture
async def start_play(tmp_path: Path) -> AsyncIterator[HostStarter]:
    """``start(data_dir)`` → ``(host, Play)`` with the workspace root ``tmp_path/workspace``."""
    root = tmp_path / "workspace"
    root.mkdir(exist_ok=True)

    async def load(host: CoreTestHost) -> Play:
        return await _load(host, root)

    async with host_starter(load) as start:
        yield start
