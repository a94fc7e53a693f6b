"""Host registries. Each removes by identity and reports what an owner still holds."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from aiohttp import web

from innkeeper_hostapi import (
    AdapterSlot,
    EventKey,
    Handler,
    Middleware,
    RegistrationConflict,
    ServiceKey,
    ServiceNotFound,
)

T = TypeVar("T")
log = logging.getLogger("innkeeper.plugins")


@dataclass(frozen=True, slots=True, eq=False)
class ServiceBinding:
    """One provided service. ``resolve`` builds (once) and returns the instance."""

    name: str
    owner: str
    resolve: Callable[[], Any]


class ServiceRegistry:
    """Service key → binding; one binding per key."""

    def __init__(self) -> None:
        self._bindings: dict[str, ServiceBinding] = {}

    def bind(self, key: ServiceKey[Any], owner: str, resolve: Callable[[], Any]) -> ServiceBinding:
        existing = self._bindings.get(key.name)
        if existing is not None:
            raise RegistrationConflict("service", key.name, existing.owner, owner)
        binding = ServiceBinding(key.name, owner, resolve)
        self._bindings[key.name] = binding
        return binding

    def unbind(self, binding: ServiceBinding) -> None:
        if self._bindings.get(binding.name) is binding:
            del self._bindings[binding.name]

    def get(self, key: ServiceKey[T]) -> T:
        binding = self._bindings.get(key.name)
        if binding is None:
            raise ServiceNotFound(f"no service provides {key.name!r}")
        value: T = binding.resolve()
        return value

    def get_optional(self, key: ServiceKey[T]) -> T | None:
        binding = self._bindings.get(key.name)
        if binding is None:
            return None
        value: T = binding.resolve()
        return value

    def snapshot(self) -> frozenset[tuple[str, str]]:
        return frozenset((b.name, b.owner) for b in self._bindings.values())

    def owned_by(self, owner: str) -> list[str]:
        return [b.name for b in self._bindings.values() if b.owner == owner]


@dataclass(frozen=True, slots=True, eq=False)
class SlotClaim:
    name: str
    owner: str
    adapter: Any


class AdapterSlots:
    """Singleton adapter slots: a second claim fails at once naming both owners."""

    def __init__(self) -> None:
        self._claims: dict[str, SlotClaim] = {}

    def claim(self, slot: AdapterSlot[Any], owner: str, adapter: Any) -> SlotClaim:
        existing = self._claims.get(slot.name)
        if existing is not None:
            raise RegistrationConflict("adapter slot", slot.name, existing.owner, owner)
        claim = SlotClaim(slot.name, owner, adapter)
        self._claims[slot.name] = claim
        return claim

    def release(self, claim: SlotClaim) -> None:
        """Free the slot only if ``claim`` is still the one holding it."""
        if self._claims.get(claim.name) is claim:
            del self._claims[claim.name]

    def get(self, slot: AdapterSlot[T]) -> T | None:
        claim = self._claims.get(slot.name)
        value: T | None = None if claim is None else claim.adapter
        return value

    def snapshot(self) -> frozenset[tuple[str, str]]:
        return frozenset((c.name, c.owner) for c in self._claims.values())

    def owned_by(self, owner: str) -> list[str]:
        return [c.name for c in self._claims.values() if c.owner == owner]


@dataclass(frozen=True, slots=True, eq=False)
class Subscription:
    event: str
    owner: str
    listener: Callable[[Any], Awaitable[None]]


class HostEventBus:
    """Serial, awaited publish/subscribe. Listener lists are copy-on-write tuples."""

    def __init__(self) -> None:
        self._subs: dict[str, tuple[Subscription, ...]] = {}

    def subscribe(
        self, key: EventKey[Any], owner: str, listener: Callable[[Any], Awaitable[None]]
    ) -> Subscription:
        sub = Subscription(key.name, owner, listener)
        self._subs[key.name] = (*self._subs.get(key.name, ()), sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        remaining = tuple(s for s in self._subs.get(sub.event, ()) if s is not sub)
        if remaining:
            self._subs[sub.event] = remaining
        else:
            self._subs.pop(sub.event, None)

    def listening(self, key: EventKey[Any]) -> bool:
        """Whether any listener is subscribed to ``key`` now."""
        return key.name in self._subs

    async def emit(self, key: EventKey[T], payload: T) -> None:
        for sub in self._subs.get(key.name, ()):
            await sub.listener(payload)

    async def publish(self, key: EventKey[T], payload: T) -> None:
        for sub in self._subs.get(key.name, ()):
            try:
                await sub.listener(payload)
            except Exception:
                log.exception("listener of %s owned by %s failed", key.name, sub.owner)

    def snapshot(self) -> frozenset[tuple[str, str, int]]:
        return frozenset(
            (name, s.owner, i) for name, subs in self._subs.items() for i, s in enumerate(subs)
        )

    def owned_by(self, owner: str) -> list[str]:
        return [s.event for subs in self._subs.values() for s in subs if s.owner == owner]


@dataclass(frozen=True, slots=True, eq=False)
class MiddlewareEntry:
    owner: str
    order: int
    seq: int
    middleware: Middleware


class MiddlewareChain:
    """Plugin middlewares behind one host middleware (aiohttp freezes its own list)."""

    def __init__(self) -> None:
        self._entries: tuple[MiddlewareEntry, ...] = ()
        self._seq = 0

    def add(self, owner: str, middleware: Middleware, order: int) -> MiddlewareEntry:
        self._seq += 1
        entry = MiddlewareEntry(owner, order, self._seq, middleware)
        self._entries = tuple(sorted((*self._entries, entry), key=lambda e: (e.order, e.seq)))
        return entry

    def remove(self, entry: MiddlewareEntry) -> None:
        self._entries = tuple(e for e in self._entries if e is not entry)

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        entries = self._entries  # one snapshot per request
        if not entries:
            return await handler(request)
        call = handler
        for entry in reversed(entries):
            call = _bind(entry.middleware, call)
        return await call(request)

    def snapshot(self) -> frozenset[tuple[str, int, int]]:
        return frozenset((e.owner, e.order, e.seq) for e in self._entries)

    def owned_by(self, owner: str) -> list[int]:
        return [e.seq for e in self._entries if e.owner == owner]


def _bind(middleware: Middleware, inner: Handler) -> Handler:
    async def call(request: web.Request) -> web.StreamResponse:
        return await middleware(request, inner)

    return call


class TaskRegistry:
    """Named background tasks with strong references, cancelled and awaited on dispose."""

    def __init__(self) -> None:
        self._tasks: dict[asyncio.Task[Any], str] = {}

    def start(self, coro: Any, name: str, owner: str) -> asyncio.Task[Any]:
        task: asyncio.Task[Any] = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks[task] = owner
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._tasks.pop(task, None)
        if not task.cancelled() and task.exception() is not None:
            log.error("task %s ended with an error", task.get_name(), exc_info=task.exception())

    async def stop(self, task: asyncio.Task[Any]) -> None:
        if not task.done():
            task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        self._tasks.pop(task, None)

    def snapshot(self) -> frozenset[str]:
        return frozenset(t.get_name() for t in self._tasks)

    def owned_by(self, owner: str) -> list[str]:
        return [t.get_name() for t, o in self._tasks.items() if o == owner]
