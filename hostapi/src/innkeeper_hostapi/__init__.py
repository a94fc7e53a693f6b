"""Innkeeper's public plugin API: all a plugin imports.

A plugin is a module with ``@hookimpl`` functions, found through the entry-point group
``innkeeper.plugins``::

    from innkeeper_hostapi import PluginContext, hookimpl

    @hookimpl
    def innkeeper_plugin_setup(ctx: PluginContext) -> None:
        ctx.add_route("GET", "/hello", handler)
"""

from __future__ import annotations

import pluggy

from .context import PluginContext
from .errors import (
    HttpProblem,
    InnkeeperError,
    PluginDisposedError,
    PluginLoadError,
    RegistrationConflict,
    ServiceNotFound,
)
from .events import EventBus, Listener
from .hookspecs import PROJECT_NAME
from .http import Handler, Middleware, json_response, path_params, problem, read_body, read_json
from .keys import AdapterSlot, EventKey, ServiceKey
from .models import HostInfo, Model
from .registration import Registration

#: Marks a plugin function as a hook implementation (pluggy marker for project ``innkeeper``).
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)

#: The plugin API version; a plugin may check it before relying on newer calls.
API_VERSION = "1.0"

__all__ = [
    "API_VERSION",
    "PROJECT_NAME",
    "AdapterSlot",
    "EventBus",
    "EventKey",
    "Handler",
    "HostInfo",
    "HttpProblem",
    "InnkeeperError",
    "Listener",
    "Middleware",
    "Model",
    "PluginContext",
    "PluginDisposedError",
    "PluginLoadError",
    "Registration",
    "RegistrationConflict",
    "ServiceKey",
    "ServiceNotFound",
    "hookimpl",
    "json_response",
    "path_params",
    "problem",
    "read_body",
    "read_json",
]
