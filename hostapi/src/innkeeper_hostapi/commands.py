"""Command-line extension point: plugins add ``innkeeper <command>`` subcommands.

Declare an entry point in the group ``innkeeper.commands``; its name is the command and its
value a function ``main(argv, env) -> int``::

    [project.entry-points."innkeeper.commands"]
    import = "innkeeper_tavern.face.cli.import_export:import_main"

``argv`` holds the arguments after the command name (the host has already consumed
``--config FILE`` and ``--data-dir DIR`` wherever they appear). ``env`` says where the host keeps
its data and where a running server would listen, so a command can work offline on the data
directory or talk to the server.

When no server runs on the data directory, ``await env.local_host()`` starts the whole host
(every plugin, the session store) inside the command's process **without listening** on any
socket, and returns a :class:`HostClient` whose requests go through the same middleware and route
table a server's would (loopback peer, request token, body limits, error shapes). A command
that needs what only a running host can do (sessions, agents' selections, the play workspace)
uses it exactly as it would use a server. Close it when done: that stops the host (its plugins
release their locks). The in-process host does not call ``innkeeper_host_started`` (nothing
listens) and does not resume turns a crashed server left open (the next ``innkeeper serve``
does). A streamed answer is collected whole; an event stream (SSE) never ends, so it fails with
:class:`HostClientError`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from .models import Model

#: The entry-point group the host reads commands from.
COMMAND_GROUP = "innkeeper.commands"


class HostClientError(RuntimeError):
    """The host could not answer a request (it is stopped, or the route is an event stream)."""


class HostResponse(Model, frozen=True):
    """One answer of a :class:`HostClient`: the status, the body bytes, the headers."""

    status: int
    body: bytes
    headers: Mapping[str, str] = {}


class HostClient(Protocol):
    """An HTTP-like client of one host: a server over loopback, or a host in this process."""

    #: Where the requests go, for the first line a command prints ("server at …", "data …").
    label: str

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> HostResponse:
        """Send one request to ``path`` (with its query string); mutations are authorized."""
        ...

    async def close(self) -> None:
        """Release the connection, or stop the in-process host."""
        ...


#: Starts the host of the command's data directory in this process (see the module docstring).
LocalHostOpener = Callable[[], Awaitable[HostClient]]


class CommandEnvironment(Model, frozen=True):
    """What a plugin command knows about the host it belongs to."""

    data_dir: str
    base_url: str
    plugin_config: Mapping[str, Mapping[str, Any]] = {}
    #: Set by the ``innkeeper`` CLI; ``None`` where a command runs without a host to start.
    start_local_host: LocalHostOpener | None = None

    async def local_host(self) -> HostClient:
        """The data directory's host started in this process, not listening (module docstring).

        Raises :class:`HostClientError` when this environment cannot start one.
        """
        if self.start_local_host is None:
            raise HostClientError("this command was started without a host it could run")
        return await self.start_local_host()

    def plugin_data_dir(self, plugin_id: str) -> Path:
        """The same folder ``ctx.data_dir`` gives plugin ``plugin_id`` inside the server."""
        return Path(self.data_dir) / "plugins" / plugin_id


CommandMain = Callable[[list[str], CommandEnvironment], int]
