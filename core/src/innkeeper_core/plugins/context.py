"""The per-plugin context: attribution, disposers and sealing on top of the host registries."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar

from dependency_injector import containers, providers

from innkeeper_core.agents.contributions import (
    RequestHookChain,
    SessionAnnotationChain,
    SystemPromptSections,
)
from innkeeper_core.http.routes import RouteTable
from innkeeper_core.tools.commands import CommandRegistry
from innkeeper_core.tools.registry import ToolRegistry
from innkeeper_hostapi import (
    AdapterSlot,
    EventKey,
    Handler,
    Middleware,
    PluginDisposedError,
    Registration,
    ServiceKey,
)
from innkeeper_hostapi.bodies import DEFAULT_MAX_BODY
from innkeeper_hostapi.registration import Disposer
from innkeeper_hostapi.structure import DEFAULT_LIMITS, StructureLimits
from innkeeper_hostapi.tools import ToolHandler, ToolRisk

from .registries import AdapterSlots, HostEventBus, MiddlewareChain, ServiceRegistry, TaskRegistry

T = TypeVar("T")

JSON_MEDIA_TYPES = ("application/json",)


@dataclass(slots=True)
class HostRegistries:
    """Everything a plugin can add to. Snapshots of these prove an unload left nothing behind."""

    routes: RouteTable = field(default_factory=RouteTable)
    services: ServiceRegistry = field(default_factory=ServiceRegistry)
    slots: AdapterSlots = field(default_factory=AdapterSlots)
    bus: HostEventBus = field(default_factory=HostEventBus)
    middlewares: MiddlewareChain = field(default_factory=MiddlewareChain)
    tasks: TaskRegistry = field(default_factory=TaskRegistry)
    sections: SystemPromptSections = field(default_factory=SystemPromptSections)
    request_hooks: RequestHookChain = field(default_factory=RequestHookChain)
    annotations: SessionAnnotationChain = field(default_factory=SessionAnnotationChain)
    tools: ToolRegistry = field(default_factory=ToolRegistry)
    commands: CommandRegistry = field(default_factory=CommandRegistry)

    def owned_by(self, owner: str) -> dict[str, list[Any]]:
        """What ``owner`` still holds, per registry (empty lists are omitted)."""
        held: dict[str, list[Any]] = {
            "routes": [f"{e.method} {e.template}" for e in self.routes.owned_by(owner)],
            "services": self.services.owned_by(owner),
            "slots": self.slots.owned_by(owner),
            "listeners": self.bus.owned_by(owner),
            "middlewares": self.middlewares.owned_by(owner),
            "tasks": self.tasks.owned_by(owner),
            "systemPromptSections": self.sections.owned_by(owner),
            "requestHooks": self.request_hooks.owned_by(owner),
            "sessionAnnotations": self.annotations.owned_by(owner),
            "tools": self.tools.owned_by(owner),
            "commands": self.commands.owned_by(owner),
        }
        return {k: v for k, v in held.items() if v}


class HostPluginContext:
    """Implements :class:`innkeeper_hostapi.PluginContext` for one plugin generation."""

    def __init__(
        self,
        plugin_id: str,
        generation: int,
        registries: HostRegistries,
        data_root: Path,
        config: Mapping[str, Any],
    ) -> None:
        self._id = plugin_id
        self._generation = generation
        self._reg = registries
        self._data_root = data_root
        self._config = MappingProxyType(dict(config))
        self._logger = logging.getLogger(f"innkeeper.plugin.{plugin_id}")
        self._registrations: list[Registration] = []
        self._sealed = False
        self._service_count = 0
        #: The plugin's own dependency-injector container for what it provides.
        self.container = containers.DynamicContainer()

    # -- identity ------------------------------------------------------------------------------
    @property
    def plugin_id(self) -> str:
        return self._id

    @property
    def generation(self) -> int:
        return self._generation

    @property
    def data_dir(self) -> Path:
        self._check()
        path = self._data_root / "plugins" / self._id
        path.mkdir(parents=True, exist_ok=True)
        return path

    @property
    def config(self) -> Mapping[str, Any]:
        return self._config

    @property
    def logger(self) -> logging.Logger:
        return self._logger

    @property
    def sealed(self) -> bool:
        return self._sealed

    def _check(self) -> None:
        if self._sealed:
            raise PluginDisposedError(
                f"plugin {self._id!r} generation {self._generation} is unloaded; "
                "its context accepts no more calls"
            )

    def _register(self, kind: str, key: str, disposer: Disposer) -> Registration:
        registration = Registration(self._id, kind, key, disposer)
        self._registrations.append(registration)
        return registration

    # -- services ------------------------------------------------------------------------------
    def provide(
        self,
        key: ServiceKey[T],
        factory: Callable[[], T],
        *,
        shutdown: Callable[[T], Awaitable[None] | None] | None = None,
    ) -> Registration:
        self._check()
        self._service_count += 1
        attr = f"service_{self._service_count}"
        built: list[T] = []

        def build() -> T:
            instance = factory()
            built.append(instance)
            return instance

        provider: providers.Singleton[T] = providers.Singleton(build)
        binding = self._reg.services.bind(key, self._id, provider)
        self.container.set_provider(attr, provider)

        async def dispose() -> None:
            self._reg.services.unbind(binding)
            provider.reset()
            with contextlib.suppress(AttributeError):
                delattr(self.container, attr)
            if shutdown is not None and built:
                result = shutdown(built.pop())
                if inspect.isawaitable(result):
                    await result
            built.clear()

        return self._register("service", key.name, dispose)

    def get(self, key: ServiceKey[T]) -> T:
        self._check()
        return self._reg.services.get(key)

    def get_optional(self, key: ServiceKey[T]) -> T | None:
        self._check()
        return self._reg.services.get_optional(key)

    # -- slots ---------------------------------------------------------------------------------
    def claim_slot(self, slot: AdapterSlot[T], adapter: T) -> Registration:
        self._check()
        claim = self._reg.slots.claim(slot, self._id, adapter)
        return self._register("slot", slot.name, lambda: self._reg.slots.release(claim))

    def slot(self, slot: AdapterSlot[T]) -> T | None:
        self._check()
        return self._reg.slots.get(slot)

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
        self._check()
        entry = self._reg.routes.add(
            method,
            path,
            handler,
            owner=self._id,
            name=name,
            max_body=DEFAULT_MAX_BODY if max_body is None else max_body,
            accepts=JSON_MEDIA_TYPES if accepts is None else accepts,
            json_limits=DEFAULT_LIMITS if json_limits is None else json_limits,
        )

        def dispose() -> None:
            self._reg.routes.remove(entry)

        return self._register("route", f"{entry.method} {path}", dispose)

    def add_middleware(self, middleware: Middleware, *, order: int = 0) -> Registration:
        self._check()
        entry = self._reg.middlewares.add(self._id, middleware, order)
        return self._register(
            "middleware", str(entry.seq), lambda: self._reg.middlewares.remove(entry)
        )

    def url_for(self, name: str, /, **params: str) -> str:
        self._check()
        return self._reg.routes.url_for(name, **params)

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
        self._check()
        entry = self._reg.tools.add(
            self._id, name, description, parameters, handler, risk=risk, timeout_s=timeout_s
        )
        return self._register("tool", name, lambda: self._reg.tools.remove(entry))

    # -- events and tasks ----------------------------------------------------------------------
    def on(self, key: EventKey[T], listener: Callable[[T], Awaitable[None]]) -> Registration:
        self._check()
        sub = self._reg.bus.subscribe(key, self._id, listener)
        return self._register("listener", key.name, lambda: self._reg.bus.unsubscribe(sub))

    async def emit(self, key: EventKey[T], payload: T) -> None:
        self._check()
        await self._reg.bus.emit(key, payload)

    def spawn(self, coro: Coroutine[Any, Any, Any], *, name: str) -> Registration:
        try:
            self._check()
        except PluginDisposedError:
            coro.close()
            raise
        task = self._reg.tasks.start(coro, f"plugin:{self._id}:{name}", self._id)
        return self._register("task", name, lambda: self._reg.tasks.stop(task))

    def on_dispose(self, callback: Disposer) -> Registration:
        self._check()
        return self._register("on_dispose", getattr(callback, "__name__", "callback"), callback)

    # -- lifecycle -----------------------------------------------------------------------------
    async def close(self) -> list[BaseException]:
        """Seal the context and dispose every registration, newest first.

        Disposal continues past failures; the failures are returned (and logged) so the loader
        can report them without leaving the remaining registrations behind.
        """
        self._sealed = True
        errors: list[BaseException] = []
        while self._registrations:
            registration = self._registrations.pop()
            try:
                await registration.dispose()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._logger.exception("disposing %r failed", registration)
                errors.append(exc)
        self.container.reset_singletons()
        await _maybe_await(self.container.shutdown_resources())
        return errors


async def _maybe_await(value: Any) -> None:
    if inspect.isawaitable(value):
        await value
