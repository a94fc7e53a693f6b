"""The plugin context: the narrow, per-plugin facade a plugin uses to change the host."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from .http import Handler, Middleware
from .keys import AdapterSlot, EventKey, ServiceKey
from .registration import Disposer, Registration
from .structure import StructureLimits

if TYPE_CHECKING:
    from .tools import ToolHandler, ToolRisk

T = TypeVar("T")


class PluginContext(Protocol):
    """What ``innkeeper_plugin_setup(ctx)`` receives: one context per plugin and generation.

    Every call that changes host state returns a :class:`Registration` whose ``dispose()``
    removes exactly that registration. Unloading the plugin disposes all of them in reverse
    order; after that the context is sealed and every further call raises
    :class:`~innkeeper_hostapi.errors.PluginDisposedError`.
    """

    @property
    def plugin_id(self) -> str:
        """The plugin's id (its entry-point name)."""
        ...

    @property
    def generation(self) -> int:
        """1 for the first load, incremented by every reload."""
        ...

    @property
    def data_dir(self) -> Path:
        """This plugin's own data directory (created on first access)."""
        ...

    @property
    def config(self) -> Mapping[str, Any]:
        """This plugin's section of the host configuration (``[plugins.<id>]``), read-only."""
        ...

    @property
    def logger(self) -> logging.Logger:
        """Logger ``innkeeper.plugin.<id>``; never log prompt, message or resource bodies."""
        ...

    # -- services ---------------------------------------------------------------------------
    def provide(
        self,
        key: ServiceKey[T],
        factory: Callable[[], T],
        *,
        shutdown: Callable[[T], Awaitable[None] | None] | None = None,
    ) -> Registration:
        """Provide service ``key``, built lazily by ``factory`` on first ``get``.

        ``shutdown`` runs with the built instance when the registration is disposed. A key
        provided by someone else raises ``RegistrationConflict`` naming both owners.
        """
        ...

    def get(self, key: ServiceKey[T]) -> T:
        """Resolve ``key`` now (late binding: call it in handlers, not at import time)."""
        ...

    def get_optional(self, key: ServiceKey[T]) -> T | None:
        """Like :meth:`get` but ``None`` when nobody provides ``key``."""
        ...

    # -- adapter slots ------------------------------------------------------------------------
    def claim_slot(self, slot: AdapterSlot[T], adapter: T) -> Registration:
        """Install ``adapter`` in singleton ``slot``; a second claim fails naming both owners."""
        ...

    def slot(self, slot: AdapterSlot[T]) -> T | None:
        """The adapter currently in ``slot``, if any."""
        ...

    # -- HTTP ----------------------------------------------------------------------------------
    def add_route(
        self,
        method: str,
        path: str,
        handler: Handler,
        *,
        name: str | None = None,
        max_body: int | None = None,
        accepts: Iterable[str] | None = None,
        json_limits: StructureLimits | None = None,
    ) -> Registration:
        """Serve ``method path`` with ``handler`` through the host's reloadable route table.

        ``path`` uses aiohttp's template syntax with whole-segment parameters (``/items/{id}``,
        ``/items/{id:\\d+}``). ``max_body`` bounds the request body (default 1 MiB, see
        :func:`~innkeeper_hostapi.http.read_body`). ``accepts`` lists the media types a mutation
        body may have (default ``application/json``; anything else is 415). ``name`` enables
        :meth:`url_for`. The host reads and decodes the body before ``handler`` runs
        (:mod:`innkeeper_hostapi.bodies`); ``json_limits`` sets the structure guards of a JSON
        body (default: the spec's depth 32, 100,000 nodes, 1 MiB strings, 1,024-character keys,
        64-bit integers).
        """
        ...

    def add_middleware(self, middleware: Middleware, *, order: int = 0) -> Registration:
        """Wrap every request in ``middleware`` (lower ``order`` runs outermost)."""
        ...

    def url_for(self, name: str, /, **params: str) -> str:
        """Build the path of a named route (any plugin's) from its parameters."""
        ...

    # -- tools -------------------------------------------------------------------------------
    def add_tool(
        self,
        name: str,
        description: str,
        parameters: Mapping[str, Any],
        handler: ToolHandler,
        *,
        risk: ToolRisk = "danger-full-access",
        timeout_s: float | None = None,
    ) -> Registration:
        """Offer tool ``name`` to every agent (see :mod:`innkeeper_hostapi.tools`).

        ``parameters`` is the JSON Schema of the arguments object (checked now; every call's
        arguments are validated against it before ``handler`` runs). ``risk`` is checked
        against the session's sandbox mode; it defaults to the most powerful level, so an
        undeclared tool is treated with the most care. ``timeout_s`` bounds one call (default
        from the host configuration). A name registered by someone else raises
        ``RegistrationConflict`` naming both owners; an invalid name, description or schema
        raises ``ValueError``.
        """
        ...

    # -- events and tasks --------------------------------------------------------------------
    def on(self, key: EventKey[T], listener: Callable[[T], Awaitable[None]]) -> Registration:
        """Subscribe ``listener`` to event ``key``."""
        ...

    async def emit(self, key: EventKey[T], payload: T) -> None:
        """Emit an event: listeners run serially and awaited; the first error propagates."""
        ...

    def spawn(self, coro: Coroutine[Any, Any, Any], *, name: str) -> Registration:
        """Run ``coro`` as a background task named ``plugin:<id>:<name>``.

        Disposing (or unloading the plugin) cancels the task and awaits its end.
        """
        ...

    def on_dispose(self, callback: Disposer) -> Registration:
        """Run ``callback`` (sync or async) when the plugin unloads."""
        ...
