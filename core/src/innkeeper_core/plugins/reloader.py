"""Development hot reload: watch plugin sources and reload the plugin whose files changed."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import Final

from watchfiles import Change, PythonFilter, awatch

from innkeeper_core.plugins.host import PluginHost

log = logging.getLogger("innkeeper.reload")

#: Milliseconds of quiet before a burst of file events (an editor's save) is acted on.
DEBOUNCE_MS: Final = 300

ChangeSource = Callable[[list[Path], asyncio.Event], AsyncIterator[set[tuple[Change, str]]]]


def _watch(paths: list[Path], stop: asyncio.Event) -> AsyncIterator[set[tuple[Change, str]]]:
    return awatch(
        *paths, watch_filter=PythonFilter(), debounce=DEBOUNCE_MS, step=50, stop_event=stop
    )


def plugins_for_paths(roots: dict[Path, str], changed: Iterable[str]) -> set[str]:
    """Map changed file paths to plugin ids by the longest matching source root."""
    ordered = sorted(roots.items(), key=lambda item: len(item[0].parts), reverse=True)
    hit: set[str] = set()
    for raw in changed:
        path = Path(raw).resolve()
        for root, plugin_id in ordered:
            if path == root or root in path.parents:
                hit.add(plugin_id)
                break
    return hit


class PluginReloader:
    """Runs until ``stop`` is set; reloads are serialised by the plugin host's lock."""

    def __init__(self, host: PluginHost, changes: ChangeSource = _watch) -> None:
        self.host = host
        self.changes = changes

    def roots(self) -> dict[Path, str]:
        return {
            rec.path.resolve(): pid
            for pid, rec in self.host.records.items()
            if rec.path is not None
        }

    async def run(self, stop: asyncio.Event) -> None:
        roots = self.roots()
        if not roots:
            log.info("hot reload: no editable plugin sources to watch")
            return
        log.info("hot reload: watching %d plugin source folder(s)", len(roots))
        async for batch in self.changes(sorted(roots), stop):
            for plugin_id in sorted(plugins_for_paths(roots, (p for _, p in batch))):
                if plugin_id not in self.host.records:
                    continue
                rec = await self.host.reload(plugin_id)
                if rec.error:
                    log.error("reload of %s failed: %s", plugin_id, rec.error)
                else:
                    log.info("reloaded %s (generation %d)", plugin_id, rec.generation)
