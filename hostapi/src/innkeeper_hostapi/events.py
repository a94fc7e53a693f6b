"""Event bus protocol and the host's own events."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from .keys import EventKey
from .models import Model

T = TypeVar("T")

#: An async event listener.
Listener = Callable[[T], Awaitable[None]]


class EventBus(Protocol):
    """Serial, awaited publish/subscribe keyed by :class:`EventKey`."""

    async def emit(self, key: EventKey[T], payload: T) -> None:
        """Call every listener of ``key`` in subscription order, awaiting each.

        The first listener that raises stops the emit and the error propagates to the emitter,
        so an awaited listener can veto (e.g. a failing ``agent/created`` listener fails creation).
        """
        ...

    async def publish(self, key: EventKey[T], payload: T) -> None:
        """Call every listener of ``key``; a failing listener is logged and the others still run."""
        ...


class PluginStateChanged(Model, frozen=True):
    """A plugin was loaded, reloaded, unloaded or failed."""

    plugin_id: str
    state: str
    generation: int
    error: str | None = None


#: Published after a plugin's state changes (load, reload, failure, unload).
PLUGIN_STATE_CHANGED: EventKey[PluginStateChanged] = EventKey(
    "host/plugin-state", PluginStateChanged
)
