"""Hello: the smallest useful Innkeeper plugin, and the template for writing your own.

It provides a service (``GREETER``), serves two routes and listens to its own event:

- ``GET /hello/{name}`` greets ``name``;
- ``POST /hello/greetings`` with ``{"name": "..."}`` does the same for a JSON body;
- every greeting emits ``hello/greeted``, whose listener counts greetings in the service.

Everything is registered through ``ctx``, so unloading or reloading the plugin takes all of it
back. Configure the greeting with ``[plugins.hello] greeting = "Howdy"`` in the host's TOML file.
"""

from __future__ import annotations

import sys

import msgspec
from aiohttp import web

from innkeeper_hostapi import (
    EventKey,
    PluginContext,
    ServiceKey,
    hookimpl,
    json_response,
    path_params,
)
from innkeeper_hostapi.commands import CommandEnvironment
from innkeeper_hostapi.http import read_struct

__version__ = "0.1.0"

DEFAULT_GREETING = "Hello"
#: Names longer than this are refused (a limit is enforced, not hoped for).
MAX_NAME_CHARS = 200


class Greeter:
    """Builds greetings and counts them."""

    def __init__(self, greeting: str) -> None:
        self.greeting = greeting
        self.greeted = 0

    def greet(self, name: str) -> str:
        return f"{self.greeting}, {name}!"


class GreetingRequest(msgspec.Struct, forbid_unknown_fields=True):
    """Body of ``POST /hello/greetings``."""

    name: str


#: Other plugins can use the greeter: ``ctx.get(GREETER)``.
GREETER: ServiceKey[Greeter] = ServiceKey("hello.greeter", Greeter)
#: Emitted with the greeted name after every greeting.
GREETED: EventKey[str] = EventKey("hello/greeted", str)


@hookimpl
def innkeeper_plugin_setup(ctx: PluginContext) -> None:
    """Register the service, the listener and the routes."""
    ctx.provide(GREETER, lambda: Greeter(str(ctx.config.get("greeting", DEFAULT_GREETING))))

    async def count_greeting(name: str) -> None:
        ctx.get(GREETER).greeted += 1

    ctx.on(GREETED, count_greeting)

    async def respond(name: str) -> web.StreamResponse:
        if not 0 < len(name) <= MAX_NAME_CHARS:
            return json_response(
                {"ok": False, "error": "name must be 1-200 characters", "code": "HELLO_BAD_NAME"},
                status=400,
            )
        greeter = ctx.get(GREETER)
        text = greeter.greet(name)
        await ctx.emit(GREETED, name)
        return json_response({"ok": True, "greeting": text, "greeted": greeter.greeted})

    async def greet(request: web.Request) -> web.StreamResponse:
        return await respond(path_params(request)["name"])

    async def greet_json(request: web.Request) -> web.StreamResponse:
        body = await read_struct(request, GreetingRequest, max_bytes=4096)
        return await respond(body.name)

    ctx.add_route("GET", "/hello/{name}", greet, name="hello.greet")
    ctx.add_route("POST", "/hello/greetings", greet_json, name="hello.greetings", max_body=4096)


def command(argv: list[str], env: CommandEnvironment) -> int:
    """``innkeeper hello NAME...``: print greetings (shows how a plugin adds a CLI command)."""
    if not argv:
        sys.stderr.write("usage: innkeeper hello NAME...\n")
        return 2
    greeting = str(env.plugin_config.get("hello", {}).get("greeting", DEFAULT_GREETING))
    greeter = Greeter(greeting)
    for name in argv:
        sys.stdout.write(greeter.greet(name) + "\n")
    return 0
