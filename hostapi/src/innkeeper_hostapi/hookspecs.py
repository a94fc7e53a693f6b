"""Hook specifications: the functions a plugin module may implement with ``@hookimpl``.

Every hook name starts with ``innkeeper_``. Hooks are few and synchronous except
``innkeeper_plugin_setup``, which may be a coroutine function. Everything else a plugin does goes
through its :class:`~innkeeper_hostapi.context.PluginContext`, so every contribution has an owner
and a disposer.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from .context import PluginContext
    from .models import HostInfo

PROJECT_NAME = "innkeeper"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)


# ---------------------------------------------------------------------------- plugin lifecycle
@hookspec
def innkeeper_plugin_setup(ctx: PluginContext) -> Awaitable[None] | None:
    """Set the plugin up: provide services, add routes, subscribe to events, spawn tasks.

    Called once per load of *this* plugin only (first load and every reload), never broadcast to
    other plugins. May be a coroutine function; the host awaits it. Everything registered
    through ``ctx`` is undone automatically when the plugin unloads. If setup raises, whatever it
    registered so far is disposed and the plugin is reported ``failed``; the other plugins keep
    running.
    """


@hookspec(historic=True)
def innkeeper_host_started(info: HostInfo) -> None:
    """The host is serving. Historic: a plugin loaded or reloaded later still receives it.

    ``info`` is immutable (pluggy keeps historic arguments for the life of the process).
    Synchronous; do async work in a task started with ``ctx.spawn`` from setup.
    """
