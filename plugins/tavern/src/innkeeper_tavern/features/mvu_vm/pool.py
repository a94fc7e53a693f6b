"""Live command-processor VMs: one per state instance and declaration, bounded, idle ones
evicted.

docs/contract/mvu-vm.md#command-processors: one effective processor per state instance, its VM
and receipt reused from reply to reply, whatever displays are open. Here a VM lives while it is
used: at
most :data:`MAX_LIVE_VMS` are kept, and one unused for :data:`IDLE_SECONDS` is dropped. A VM
re-created for the same instance and declaration keeps its receipt and ``registrationId``; an
initialization failure is kept the same way (the same declaration fails the same way until the
card changes it).
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from innkeeper_hostapi.mvu import CommandProcessorReceipt, MvuCommandView

from .vm import Dispatch, ScriptVm, VmError, views_of

#: VMs kept alive at once (each holds at most 32 MiB; docs/mvu.md gives the measured size).
MAX_LIVE_VMS: Final = 64
#: Seconds an unused VM is kept.
IDLE_SECONDS: Final = 600.0


@dataclass(frozen=True, slots=True)
class Declaration:
    """A card's command-processor declaration: where it comes from and its exact source."""

    source_name: str
    source: str
    sha256: str = field(init=False)

    def __post_init__(self) -> None:
        digest = hashlib.sha256(self.source.encode("utf-8", "surrogatepass")).hexdigest()
        object.__setattr__(self, "sha256", digest)


@dataclass(slots=True)
class _Live:
    vm: ScriptVm
    lock: asyncio.Lock
    used: float


class VmPool:
    """The service's live VMs, keyed by state id and declaration digest."""

    def __init__(
        self,
        *,
        max_live: int = MAX_LIVE_VMS,
        idle_seconds: float = IDLE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_live = max_live
        self.idle_seconds = idle_seconds
        self._clock = clock
        self._live: OrderedDict[tuple[str, str], _Live] = OrderedDict()
        self._receipts: dict[str, tuple[str, CommandProcessorReceipt | VmError]] = {}
        self._creating: dict[tuple[str, str], asyncio.Lock] = {}
        self._counter = itertools.count(1)
        #: Bumped when the pool is closed (the service unloads): every lease taken before fails.
        self.generation = 0
        #: VMs created (cold starts), for tests and measurements.
        self.created = 0
        #: Dispatches run.
        self.dispatched = 0

    @property
    def live(self) -> int:
        """Live VMs."""
        return len(self._live)

    def receipt(self, state_id: str, declaration: Declaration) -> CommandProcessorReceipt | None:
        """The receipt of the instance's initialized declaration (``None`` before its first
        initialization or when it failed)."""
        known = self._receipts.get(state_id)
        if known is None or known[0] != declaration.sha256:
            return None
        return known[1] if isinstance(known[1], CommandProcessorReceipt) else None

    def close(self) -> None:
        """Drop every VM and receipt (the service unloads)."""
        self.generation += 1
        self._live.clear()
        self._receipts.clear()

    def _evict(self) -> None:
        now = self._clock()
        for key, live in list(self._live.items()):
            if live.lock.locked():
                continue
            if now - live.used > self.idle_seconds or len(self._live) > self.max_live:
                del self._live[key]

    def _known(
        self, state_id: str, declaration: Declaration
    ) -> CommandProcessorReceipt | VmError | None:
        known = self._receipts.get(state_id)
        return known[1] if known is not None and known[0] == declaration.sha256 else None

    async def _acquire(
        self, state_id: str, declaration: Declaration
    ) -> tuple[_Live, CommandProcessorReceipt]:
        key = (state_id, declaration.sha256)
        known = self._known(state_id, declaration)
        if isinstance(known, VmError):
            raise known
        creating = self._creating.setdefault(key, asyncio.Lock())
        async with creating:
            live = self._live.get(key)
            if live is None or live.vm.broken:
                generation = self.generation
                try:
                    vm = await asyncio.to_thread(ScriptVm, declaration.source)
                except VmError as exc:
                    if generation == self.generation:
                        self._receipts[state_id] = (declaration.sha256, exc)
                    raise
                finally:
                    self._creating.pop(key, None)
                self.created += 1
                live = _Live(vm, asyncio.Lock(), self._clock())
                if generation == self.generation:
                    self._live[key] = live
        if key in self._live:
            self._live.move_to_end(key)
        known = self._known(state_id, declaration)
        if not isinstance(known, CommandProcessorReceipt):
            # First initialization of this declaration for this instance (a re-created VM
            # keeps the receipt it had).
            known = CommandProcessorReceipt(
                registration_id=f"mvu-card-processor-{next(self._counter)}-{secrets.token_hex(4)}",
                source=declaration.source_name,
                sha256=declaration.sha256,
                listener_count=live.vm.listener_count,
            )
            self._receipts[state_id] = (declaration.sha256, known)
        return live, known

    async def dispatch(
        self, state_id: str, declaration: Declaration, call: Dispatch
    ) -> tuple[list[MvuCommandView], CommandProcessorReceipt]:
        """Run one ``COMMAND_PARSED`` dispatch in the instance's VM (created if needed)."""
        self._evict()
        live, receipt = await self._acquire(state_id, declaration)
        async with live.lock:
            live.used = self._clock()
            self.dispatched += 1
            output = await asyncio.to_thread(live.vm.dispatch, call)
        self._evict()
        return views_of(output), receipt
