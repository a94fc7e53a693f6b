"""pytest plugin for plugin authors: a running host, and a check that unloading leaves no trace.

Installed automatically with ``innkeeper-hostapi`` (entry point ``pytest11``). Fixtures:

``innkeeper_host``
    A started host on a temporary data directory with no plugins loaded, plus an HTTP client.
    ``await innkeeper_host.load("myplugin", "my_plugin_module")`` loads yours.

``leak_check``
    ``async with leak_check():`` snapshots the host's registries, runs the block (load, exercise,
    unload your plugin) and fails if anything the plugin registered is still there.

The host implementation is found through the entry-point group ``innkeeper.testing`` (the host
package provides it), so this module never imports the host.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Hashable, Mapping
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import pytest
import pytest_asyncio

from .keys import ServiceKey

T = TypeVar("T")

if TYPE_CHECKING:
    from aiohttp.test_utils import TestClient


class RunningHost(Protocol):
    """A host started for a test."""

    @property
    def client(self) -> TestClient[Any, Any]:
        """An aiohttp test client talking to the host over loopback."""
        ...

    @property
    def origin(self) -> str:
        """The host's own origin; send it as ``Origin`` on mutations."""
        ...

    async def load(self, plugin_id: str, target: str) -> Mapping[str, Any]:
        """Load a plugin from ``module[:attr]`` or a drop-in folder path; returns its status row."""
        ...

    async def unload(self, plugin_id: str) -> None:
        """Unload a plugin (drain, dispose, purge its modules)."""
        ...

    async def reload(self, plugin_id: str) -> Mapping[str, Any]:
        """Reload a plugin from disk; returns its status row."""
        ...

    def status(self, plugin_id: str) -> Mapping[str, Any]:
        """The plugin's ``/host/api/plugins`` row."""
        ...

    def get(self, key: ServiceKey[T]) -> T:
        """Resolve a service, e.g. ``PROVIDER`` to script the synthetic provider's replies."""
        ...

    def snapshot(self) -> Hashable:
        """A comparable summary of every registry plugins can add to."""
        ...

    async def close(self) -> None:
        """Unload everything and stop the server."""
        ...


HostFactory = Callable[[Path], Any]


def _host_factory() -> HostFactory:
    for ep in entry_points(group="innkeeper.testing", name="host"):
        factory: HostFactory = ep.load()
        return factory
    raise RuntimeError("no Innkeeper host is installed (entry point innkeeper.testing:host)")


@pytest_asyncio.fixture
async def innkeeper_host(tmp_path: Path) -> AsyncIterator[RunningHost]:
    """A running host with an empty plugin set, torn down after the test."""
    host: RunningHost = await _host_factory()(tmp_path / "innkeeper-data")
    try:
        yield host
    finally:
        await host.close()


@pytest.fixture
def leak_check(
    innkeeper_host: RunningHost,
) -> Callable[[], contextlib.AbstractAsyncContextManager[None]]:
    """``async with leak_check():`` asserts the host's registries end as they began."""

    @contextlib.asynccontextmanager
    async def check() -> AsyncIterator[None]:
        before = innkeeper_host.snapshot()
        yield
        after = innkeeper_host.snapshot()
        assert after == before, f"host state changed:\nbefore={before}\nafter={after}"

    return check
