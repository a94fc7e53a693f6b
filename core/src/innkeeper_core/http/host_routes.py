"""The host's own routes: health, plugin status, tools and the desktop request token."""

from __future__ import annotations

import os
from typing import Final

from aiohttp import web

from innkeeper_core import __version__
from innkeeper_core.plugins.host import PluginHost
from innkeeper_hostapi import json_response

HOST_OWNER: Final = "host"
TOKEN_PATH: Final = "/pmp-dsh-tavern/api/request-token"


class HostRoutes:
    """Handlers bound to one host instance."""

    def __init__(self, plugins: PluginHost) -> None:
        self.plugins = plugins

    async def healthz(self, request: web.Request) -> web.StreamResponse:
        return json_response({"ok": True, "version": __version__, "pid": os.getpid()})

    async def list_plugins(self, request: web.Request) -> web.StreamResponse:
        rows = [self.plugins.describe(pid) for pid in sorted(self.plugins.records)]
        return json_response({"ok": True, "plugins": rows})

    async def list_tools(self, request: web.Request) -> web.StreamResponse:
        tools = [
            {
                "name": tool.name,
                "owner": tool.owner,
                "description": tool.description,
                "parameters": tool.parameters,
                "risk": tool.risk,
            }
            for tool in self.plugins.registries.tools.list()
        ]
        return json_response({"ok": True, "tools": tools})
