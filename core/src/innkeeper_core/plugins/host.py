"""The plugin host: load, unload and reload plugins one at a time, leaving no trace behind."""

from __future__ import annotations

import asyncio
import enum
import inspect
import logging
import sys
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pluggy

from innkeeper_core.http.dispatch import PluginGate
from innkeeper_core.plugins.context import HostPluginContext, HostRegistries
from innkeeper_core.plugins.sources import (
    RESERVED_IDS,
    PluginSource,
    import_plugin,
    plugin_modules,
    preflight,
    purge_modules,
    source_root,
)
from innkeeper_hostapi import PROJECT_NAME, HostInfo, hookspecs
from innkeeper_hostapi.events import PLUGIN_STATE_CHANGED, PluginStateChanged

log = logging.getLogger("innkeeper.plugins")


class PluginState(enum.StrEnum):
    """What ``/host/api/plugins`` reports for a plugin."""

    ACTIVE = "active"
    RELOADING = "reloading"
    FAILED = "failed"


@dataclass(slots=True)
class PluginRecord:
    """The host's own bookkeeping for one plugin (not pluggy's private data)."""

    source: PluginSource
    state: PluginState = PluginState.FAILED
    generation: int = 0
    error: str | None = None
    #: True while a generation of the plugin is set up and serving.
    serving: bool = False
    path: Path | None = None
    context: HostPluginContext | None = None
    plugin: object | None = None
    leaks: dict[str, list[Any]] = field(default_factory=dict)

    @property
    def plugin_id(self) -> str:
        return self.source.plugin_id


@dataclass(frozen=True, slots=True)
class HostSnapshot:
    """A comparable summary of everything plugins can add to the host."""

    routes: frozenset[tuple[str, str, str]]
    services: frozenset[tuple[str, str]]
    slots: frozenset[tuple[str, str]]
    listeners: frozenset[tuple[str, str, int]]
    middlewares: frozenset[tuple[str, int, int]]
    tasks: frozenset[str]
    sections: frozenset[tuple[str, str, int]]
    request_hooks: frozenset[tuple[str, str, int]]
    annotations: frozenset[tuple[str, str, int]]
    tools: frozenset[tuple[str, str, str]]
    commands: frozenset[tuple[str, str]]
    pluggy_plugins: frozenset[str]
    hookimpls: int
    plugin_modules: frozenset[str]


def _describe(exc: BaseException) -> str:
    return "".join(traceback.format_exception_only(exc)).strip()


class PluginHost:
    """Owns the pluggy manager and every plugin's lifecycle. All changes run under one lock."""

    def __init__(
        self,
        registries: HostRegistries,
        gate: PluginGate,
        data_root: Path,
        *,
        blocked: frozenset[str] = frozenset(),
        plugin_config: Mapping[str, Mapping[str, Any]] | None = None,
        drain_seconds: float = 10.0,
    ) -> None:
        self.registries = registries
        self.gate = gate
        self.data_root = data_root
        self.blocked = blocked
        self.plugin_config = dict(plugin_config or {})
        self.drain_seconds = drain_seconds
        self.pm = pluggy.PluginManager(PROJECT_NAME)
        self.pm.add_hookspecs(hookspecs)
        self._records: dict[str, PluginRecord] = {}
        self._lock = asyncio.Lock()
        self._host_info: HostInfo | None = None

    # -- queries -------------------------------------------------------------------------------
    @property
    def records(self) -> Mapping[str, PluginRecord]:
        return self._records

    def snapshot(self) -> HostSnapshot:
        reg = self.registries
        roots = {r.source.root_module for r in self._records.values()}
        return HostSnapshot(
            routes=frozenset((e.method, e.template, e.owner) for e in reg.routes.entries),
            services=reg.services.snapshot(),
            slots=reg.slots.snapshot(),
            listeners=reg.bus.snapshot(),
            middlewares=reg.middlewares.snapshot(),
            tasks=reg.tasks.snapshot(),
            sections=reg.sections.snapshot(),
            request_hooks=reg.request_hooks.snapshot(),
            annotations=reg.annotations.snapshot(),
            tools=reg.tools.snapshot(),
            commands=reg.commands.snapshot(),
            pluggy_plugins=frozenset(
                name for name, plugin in self.pm.list_name_plugin() if plugin is not None
            ),
            hookimpls=sum(len(caller.get_hookimpls()) for caller in vars(self.pm.hook).values()),
            plugin_modules=frozenset(m for root in roots for m in plugin_modules(root)),
        )

    def describe(self, plugin_id: str) -> dict[str, Any]:
        """The ``/host/api/plugins`` row of one plugin."""
        rec = self._records[plugin_id]
        return {
            "name": rec.plugin_id,
            "distribution": rec.source.dist_name,
            "version": rec.source.version
            if rec.source.version != "0"
            else str(getattr(rec.plugin, "__version__", "0")),
            "source": rec.source.kind,
            "state": str(rec.state),
            "serving": rec.serving,
            "generation": rec.generation,
            "registered": self.registries.owned_by(rec.plugin_id),
            "lastError": rec.error,
            "leaks": rec.leaks,
        }

    # -- lifecycle -----------------------------------------------------------------------------
    def host_started(self, info: HostInfo) -> None:
        """Call the historic ``innkeeper_host_started`` hook (replayed to later registrations)."""
        self._host_info = info
        self.pm.hook.innkeeper_host_started.call_historic(kwargs={"info": info})

    async def load(self, source: PluginSource) -> PluginRecord:
        """Import, register and set up one plugin; a failure is recorded, never raised."""
        async with self._lock:
            return await self._load(source)

    async def _load(self, source: PluginSource) -> PluginRecord:
        pid = source.plugin_id
        if pid in self._records and self._records[pid].serving:
            raise ValueError(f"plugin {pid!r} is already loaded")
        rec = PluginRecord(source)
        self._records[pid] = rec
        if pid in RESERVED_IDS:
            rec.error = f"plugin id {pid!r} is reserved"
            return rec
        if pid in self.blocked or self.pm.is_blocked(pid):
            rec.error = "blocked by configuration"
            return rec
        rec.path = source_root(source)
        try:
            await self._start_generation(rec)
        except Exception as exc:
            rec.state, rec.error = PluginState.FAILED, _describe(exc)
            log.error("plugin %s failed to load: %s", pid, rec.error)
            purge_modules(source.root_module)
        await self._announce(rec)
        return rec

    async def _start_generation(self, rec: PluginRecord) -> None:
        """Import (if needed), register and run setup; on failure undo all of it and re-raise."""
        source = rec.source
        plugin = rec.plugin if rec.plugin is not None else import_plugin(source)
        generation = rec.generation + 1
        ctx = HostPluginContext(
            source.plugin_id,
            generation,
            self.registries,
            self.data_root,
            self.plugin_config.get(source.plugin_id, {}),
        )
        self.pm.register(plugin, name=source.plugin_id)
        try:
            self.pm.check_pending()
            caller = self.pm.subset_hook_caller(
                "innkeeper_plugin_setup",
                remove_plugins=[p for p in self.pm.get_plugins() if p is not plugin],
            )
            for result in caller(ctx=ctx):
                if inspect.isawaitable(result):
                    await result
        except BaseException:
            await ctx.close()
            self.pm.unregister(plugin)
            raise
        rec.plugin, rec.context, rec.generation = plugin, ctx, generation
        rec.state, rec.serving, rec.error = PluginState.ACTIVE, True, None
        rec.path = source_root(source) or rec.path

    async def _stop_generation(self, rec: PluginRecord) -> None:
        """Dispose the serving generation and unregister it from pluggy."""
        ctx, plugin = rec.context, rec.plugin
        rec.context, rec.serving = None, False
        if ctx is not None:
            errors = await ctx.close()
            if errors:
                rec.error = "; ".join(_describe(e) for e in errors)
        if plugin is not None and self.pm.is_registered(plugin):
            self.pm.unregister(plugin)
        rec.leaks = self.registries.owned_by(rec.plugin_id)
        if rec.leaks:
            log.error("plugin %s left registrations behind: %s", rec.plugin_id, rec.leaks)

    async def unload(self, plugin_id: str) -> None:
        """Drain, dispose and forget a plugin; its modules are purged."""
        async with self._lock:
            rec = self._records.pop(plugin_id)
            self.gate.close(plugin_id)
            try:
                await self.gate.drain(plugin_id, self.drain_seconds)
                await self._stop_generation(rec)
                rec.plugin = None
                purge_modules(rec.source.root_module)
            finally:
                self.gate.open(plugin_id)

    async def reload(self, plugin_id: str) -> PluginRecord:
        """Replace a plugin's code with what is on disk now.

        A syntax error found before touching anything, or an import/setup failure of the new
        code, leaves (or puts back) the old generation serving and reports ``failed``.
        """
        async with self._lock:
            rec = self._records[plugin_id]
            if not rec.serving:
                self._records.pop(plugin_id)
                return await self._load(rec.source)
            if rec.path is not None:
                problem = await asyncio.to_thread(preflight, rec.path)
                if problem is not None:
                    rec.state, rec.error = PluginState.FAILED, problem
                    await self._announce(rec)
                    return rec
            root = rec.source.root_module
            rec.state = PluginState.RELOADING
            self.gate.close(plugin_id)
            try:
                if not await self.gate.drain(plugin_id, self.drain_seconds):
                    log.warning("plugin %s: drain timed out; reloading anyway", plugin_id)
                old_modules = plugin_modules(root)
                old_plugin = rec.plugin
                await self._stop_generation(rec)
                rec.plugin = None
                purge_modules(root)
                try:
                    await self._start_generation(rec)
                except Exception as exc:
                    reason = _describe(exc)
                    log.error("plugin %s reload failed: %s", plugin_id, reason)
                    purge_modules(root)
                    sys.modules.update(old_modules)
                    rec.plugin = old_plugin
                    try:
                        await self._start_generation(rec)
                    except Exception as again:
                        reason += f"; restoring the old generation failed too: {_describe(again)}"
                        rec.plugin = None
                        purge_modules(root)
                    rec.state, rec.error = PluginState.FAILED, reason
                del old_modules, old_plugin
            finally:
                self.gate.open(plugin_id)
            await self._announce(rec)
            return rec

    async def shutdown(self) -> None:
        """Unload every plugin, newest first."""
        for plugin_id in reversed(list(self._records)):
            if self._records[plugin_id].serving:
                await self.unload(plugin_id)
            else:
                self._records.pop(plugin_id)

    async def _announce(self, rec: PluginRecord) -> None:
        await self.registries.bus.publish(
            PLUGIN_STATE_CHANGED,
            PluginStateChanged(
                plugin_id=rec.plugin_id,
                state=str(rec.state),
                generation=rec.generation,
                error=rec.error,
            ),
        )
