"""The host started inside a command's process, not listening: ``CommandEnvironment.local_host``.

``innkeeper import`` with no server running still needs what only a host does (sessions, the
Tavern plugin's selections and play workspace). :func:`start_local_host` builds the same app
``innkeeper serve`` runs (every plugin; ``listening=False``, see :func:`create_app`), starts it
with an :class:`aiohttp.web.AppRunner` and no site, so no socket is opened, and answers requests
by running them through the app's own middleware chain and catch-all dispatcher (a streamed
answer is collected; an event stream is refused, see :class:`_CapturingWriter`). A request
therefore meets the same rules as over loopback: the peer is loopback, the ``Host`` header is
``127.0.0.1`` and mutations carry this process's request token.

The Tavern plugin takes its data directory's writer lock when it loads, as in a server; the host
is refused (:class:`HostClientError`) when a plugin fails to load, so a command never writes
through a host that lacks the plugin it needs.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Mapping
from typing import Any, Final

import msgspec
from aiohttp import web
from aiohttp.base_protocol import BaseProtocol
from aiohttp.streams import StreamReader
from aiohttp.test_utils import make_mocked_request

from innkeeper_core.app import CONTAINER, create_app
from innkeeper_core.config import MAX_REQUEST_BODY, HostConfig
from innkeeper_core.http.security import TOKEN_HEADER
from innkeeper_core.plugins.host import PluginState
from innkeeper_core.plugins.sources import SavedPluginModules
from innkeeper_hostapi.commands import HostClientError, HostResponse

#: The ``Host`` header of in-process requests (on the guard's default allow-list).
LOCAL_HOST_HEADER: Final = "127.0.0.1"
#: The peer address the guard sees: loopback, like every client a server accepts.
_PEER: Final = ("127.0.0.1", 0)


class _InProcessTransport(asyncio.Transport):
    """What a request's ``transport`` answers: a loopback peer, no socket."""

    def __init__(self) -> None:
        super().__init__(extra={"peername": _PEER, "sockname": _PEER})
        self._closing = False

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        self._closing = True


class _CapturingWriter:
    """The payload writer of an in-process request: a handler that streams its answer
    (``prepare`` + ``write``) has the bytes collected here, as a client would read them to the
    end. An event stream never ends, so it meets a closed connection instead, as with a client
    gone."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        self.length: int | None = None
        self.buffer_size = 0
        self.output_size = 0
        self.chunks: list[bytes] = []
        self.refused = False

    def enable_chunking(self) -> None:
        """Nothing to frame: the chunks are joined."""

    def enable_compression(self, *args: Any, **kwargs: Any) -> None:
        """Nothing to compress."""

    def send_headers(self) -> None:
        """Headers are read from the response object."""

    async def write_headers(self, status_line: str, headers: Mapping[str, str]) -> None:
        if headers.get("Content-Type", "").startswith("text/event-stream"):
            self.refused = True
            raise ConnectionResetError("in-process requests carry no event stream")

    async def write(self, data: bytes | bytearray | memoryview, *args: Any) -> None:
        self.chunks.append(bytes(data))
        self.output_size += len(data)

    async def write_eof(self, data: bytes = b"", *args: Any) -> None:
        if data:
            await self.write(data)

    async def drain(self) -> None:
        """Nothing is buffered."""


class LocalHost:
    """Implements ``innkeeper_hostapi.commands.HostClient`` over a started, unlistening app."""

    def __init__(
        self, config: HostConfig, runner: web.AppRunner, saved: SavedPluginModules
    ) -> None:
        self.label = f"data directory {config.data_dir} (no server is running on it)"
        self._runner = runner
        self._app = runner.app
        container = self._app[CONTAINER]
        self._token = container.guard().token
        self._plugins = container.plugin_host()
        self._handler: Any = container.dispatcher().handle
        for middleware in reversed(self._app.middlewares):
            self._handler = functools.partial(middleware, handler=self._handler)
        self._saved = saved
        self._closed = False

    def failed_plugins(self) -> dict[str, str]:
        """Plugins that did not load, with the reason (normally none)."""
        return {
            plugin_id: record.error or str(record.state)
            for plugin_id, record in self._plugins.records.items()
            if record.state is not PluginState.ACTIVE
        }

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> HostResponse:
        """Run one request through the app (see the module docstring)."""
        if self._closed:
            raise HostClientError("the in-process host is stopped")
        loop = asyncio.get_running_loop()
        transport = _InProcessTransport()
        sent = {"Host": LOCAL_HOST_HEADER, TOKEN_HEADER: self._token, **(headers or {})}
        payload = StreamReader(_connected(loop, transport), max(len(body or b""), 1 << 16))
        if body is not None:
            sent.setdefault("Content-Type", "application/json")
            sent["Content-Length"] = str(len(body))
            payload.feed_data(body)
        payload.feed_eof()
        writer = _CapturingWriter(transport)
        request = make_mocked_request(
            method.upper(),
            path,
            headers=sent,
            app=self._app,
            writer=writer,
            transport=transport,
            payload=payload,
            client_max_size=MAX_REQUEST_BODY,
        )
        try:
            response = await self._handler(request)
        except web.HTTPException as exc:  # aiohttp's own (405 and friends) are responses
            response = exc
        except ConnectionResetError:
            if not writer.refused:
                raise
            response = None
        if writer.refused or response is None:
            raise HostClientError(f"{method} {path} answers with an event stream (not in-process)")
        if response.prepared:  # streamed: what the handler wrote
            data = b"".join(writer.chunks)
        elif not isinstance(response, web.Response):
            raise HostClientError(f"{method} {path} answered with an unprepared stream")
        elif response.body is None:
            data = b""
        elif isinstance(response.body, bytes | bytearray):
            data = bytes(response.body)
        else:
            raise HostClientError(f"{method} {path} answered with a payload object")
        return HostResponse(status=response.status, body=data, headers=dict(response.headers))

    async def close(self) -> None:
        """Stop the host: plugins unload (releasing their locks), resources shut down."""
        if not self._closed:
            self._closed = True
            try:
                await self._runner.cleanup()
            finally:
                self._saved.restore()  # the command's own plugin modules stay importable


def _connected(loop: asyncio.AbstractEventLoop, transport: asyncio.Transport) -> BaseProtocol:
    protocol = BaseProtocol(loop)
    protocol.transport = transport
    return protocol


async def start_local_host(config: HostConfig) -> LocalHost:
    """Start the host of ``config`` in this process without listening (module docstring)."""
    saved = SavedPluginModules()
    app = create_app(msgspec.structs.replace(config, reload=False), listening=False)
    runner = web.AppRunner(app, handle_signals=False, access_log=None)
    try:
        await runner.setup()
    except BaseException:
        await runner.cleanup()
        saved.restore()
        raise
    host = LocalHost(config, runner, saved)
    failed = host.failed_plugins()
    if failed:
        await host.close()
        reasons = "; ".join(f"{plugin}: {why}" for plugin, why in sorted(failed.items()))
        raise HostClientError(f"the host could not load every plugin ({reasons})")
    return host
