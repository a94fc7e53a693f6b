"""The chrome mode (`docs/contract/play.md#chrome`): ``native`` or ``play``, stored in
``chrome.json`` with a server-authoritative ``revision``, served by ``GET/PUT /v2/chrome`` and the
SSE stream ``GET /v2/chrome/events``, and offered to server plugins as the ``tavern.chrome`` service
with the browser service's face (``get_mode``, ``get_snapshot``, ``subscribe``, ``refresh``,
``set_mode``, ``switch_mode``, ``when``). Chrome changes are not operation-logged (the spec keeps
chrome quiet).

``GET /v2/chrome`` carries an ``ETag`` (a digest of ``{mode, revision}``) and answers a matching
``If-None-Match`` with an empty ``304``, so a client polling it once a second (the spec's internal
transport) costs a few bytes while nothing changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import inspect
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

import msgspec
from aiohttp import web

from innkeeper_hostapi import ServiceKey, json_response
from innkeeper_tavern.face.routes.play import SMALL_BODY_LIMIT, PlayRoute, json_body
from innkeeper_tavern.features.play.errors import PLAY_CHROME_INVALID, PlayError
from innkeeper_tavern.state.resources.atomic import atomic_write, read_bounded
from innkeeper_tavern.state.resources.errors import ResourceError

CHROME_FILE: Final = "chrome.json"
MAX_CHROME_BYTES: Final = 1 << 10
INITIAL_REVISION: Final = "initial"
MODES: Final = ("native", "play")
#: Seconds between SSE keep-alive comments (`docs/play.md#chrome-mode`: 25 s).
SSE_KEEPALIVE_SECONDS: Final = 25.0

Mode = Literal["native", "play"]
Cleanup = Callable[[], Awaitable[None] | None]
Setup = Callable[[], Awaitable[Cleanup | None] | Cleanup | None]


@dataclass(frozen=True, slots=True)
class ChromeSnapshot:
    """An immutable ``{mode, revision}``."""

    mode: Mode
    revision: str

    def wire(self) -> dict[str, str]:
        return {"mode": self.mode, "revision": self.revision}


class _File(msgspec.Struct, rename="camel", kw_only=True):
    schema_version: int = 1
    mode: Mode = "native"
    revision: str = INITIAL_REVISION


class ChromeService:
    """The chrome store and its subscribers (the ``tavern.chrome`` service)."""

    def __init__(self, data_dir: Path, *, logger: logging.Logger) -> None:
        self._path = data_dir / CHROME_FILE
        self._log = logger
        self._snapshot = ChromeSnapshot("native", INITIAL_REVISION)
        self._listeners: list[Callable[[ChromeSnapshot], None]] = []
        self._lock = asyncio.Lock()
        self._effects: list[_When] = []
        #: Open SSE streams: each gets ``None`` when the service closes, so unloading never
        #: waits on a client that keeps its stream open.
        self.streams: set[asyncio.Queue[ChromeSnapshot | None]] = set()

    async def open(self) -> None:
        await self.refresh()

    # -- reads ----------------------------------------------------------------------------
    def get_mode(self) -> Mode:
        return self._snapshot.mode

    def get_snapshot(self) -> ChromeSnapshot:
        return self._snapshot

    async def refresh(self) -> ChromeSnapshot:
        """Re-read ``chrome.json`` (a missing or invalid file is the default ``native``)."""
        try:
            raw = await asyncio.to_thread(read_bounded, self._path, MAX_CHROME_BYTES)
        except ResourceError:
            raw = None
        snapshot = ChromeSnapshot("native", INITIAL_REVISION)
        if raw is not None:
            try:
                stored = msgspec.json.decode(raw, type=_File)
                snapshot = ChromeSnapshot(stored.mode, stored.revision[:128])
            except msgspec.DecodeError:
                self._log.warning("%s is invalid; chrome mode is native", CHROME_FILE)
        await self._commit(snapshot)
        return snapshot

    # -- writes ---------------------------------------------------------------------------
    async def set_mode(self, mode: object) -> ChromeSnapshot:
        """Store ``mode``; the same mode changes nothing (same revision, no event)."""
        if mode not in MODES:
            raise PlayError(400, PLAY_CHROME_INVALID, "mode must be 'native' or 'play'")
        async with self._lock:
            if mode == self._snapshot.mode:
                return self._snapshot
            snapshot = ChromeSnapshot(mode, str(uuid.uuid4()))
            data = msgspec.json.encode(_File(mode=snapshot.mode, revision=snapshot.revision))
            await asyncio.to_thread(atomic_write, self._path, data)
            await self._commit(snapshot)
            return snapshot

    async def switch_mode(self) -> ChromeSnapshot:
        return await self.set_mode("native" if self._snapshot.mode == "play" else "play")

    async def _commit(self, snapshot: ChromeSnapshot) -> None:
        if snapshot == self._snapshot:
            return
        changed_mode = snapshot.mode != self._snapshot.mode
        self._snapshot = snapshot
        for listener in list(self._listeners):
            try:
                listener(snapshot)
            except Exception:
                self._log.exception("a chrome listener failed")
        if changed_mode:
            for effect in list(self._effects):
                await effect.sync()

    # -- subscriptions ----------------------------------------------------------------------
    def subscribe(self, listener: Callable[[ChromeSnapshot], None]) -> Callable[[], None]:
        """Call ``listener`` now and on every change; returns an idempotent disposer."""
        self._listeners.append(listener)
        listener(self._snapshot)

        def dispose() -> None:
            with contextlib.suppress(ValueError):
                self._listeners.remove(listener)

        return dispose

    async def when(self, mode: Mode, setup: Setup) -> Callable[[], Awaitable[None]]:
        """Run ``setup`` while the mode is ``mode``; its cleanup runs on leave and on dispose."""
        if mode not in MODES:
            raise PlayError(400, PLAY_CHROME_INVALID, "mode must be 'native' or 'play'")
        effect = _When(self, mode, setup)
        self._effects.append(effect)
        await effect.sync()

        async def dispose() -> None:
            if effect in self._effects:
                self._effects.remove(effect)
            await effect.leave()

        return dispose

    async def close(self) -> None:
        """Unload: clear every ``when`` effect and subscriber."""
        effects, self._effects = self._effects, []
        for effect in effects:
            await effect.leave()
        self._listeners.clear()
        for stream in list(self.streams):
            stream.put_nowait(None)

    @property
    def listener_count(self) -> int:
        return len(self._listeners)


class _When:
    def __init__(self, service: ChromeService, mode: Mode, setup: Setup) -> None:
        self.service = service
        self.mode = mode
        self.setup = setup
        self.cleanup: Cleanup | None = None
        self.active = False

    async def sync(self) -> None:
        if self.service.get_mode() == self.mode and not self.active:
            self.active = True
            result = self.setup()
            if inspect.isawaitable(result):
                result = await result
            if not self.active or self not in self.service._effects:  # left while setting up
                self.cleanup = result
                await self.leave(force=True)
                return
            self.cleanup = result
        elif self.service.get_mode() != self.mode and self.active:
            await self.leave()

    async def leave(self, force: bool = False) -> None:
        if not (self.active or force):
            return
        self.active = False
        cleanup, self.cleanup = self.cleanup, None
        if cleanup is not None:
            try:
                done = cleanup()
                if inspect.isawaitable(done):
                    await done
            except Exception:
                self.service._log.exception("a chrome effect cleanup failed")


#: ``tavern.chrome`` for server plugins (our addition; the browser's is ``pmpDshTavernChrome``).
TAVERN_CHROME: ServiceKey[ChromeService] = ServiceKey("tavern.chrome", ChromeService)


def _sse(snapshot: ChromeSnapshot) -> bytes:
    return b"event: chrome/change\ndata: " + msgspec.json.encode(snapshot.wire()) + b"\n\n"


def _etag(snapshot: ChromeSnapshot) -> str:
    return '"' + hashlib.sha256(msgspec.json.encode(snapshot.wire())).hexdigest()[:16] + '"'


def _matches(if_none_match: str, etag: str) -> bool:
    """Whether an ``If-None-Match`` list names ``etag`` (weakly) or is ``*``."""
    return any(tag.strip().removeprefix("W/") in (etag, "*") for tag in if_none_match.split(","))


def chrome_routes(chrome: ChromeService) -> list[PlayRoute]:
    async def get_chrome(request: web.Request) -> web.StreamResponse:
        snapshot = chrome.get_snapshot()
        headers = {"ETag": _etag(snapshot), "Cache-Control": "no-cache"}
        if _matches(request.headers.get("If-None-Match", ""), headers["ETag"]):
            return web.Response(status=304, headers=headers)
        return json_response({"ok": True, **snapshot.wire()}, headers=headers)

    async def put_chrome(request: web.Request) -> web.StreamResponse:
        body = await json_body(request)
        if set(body) - {"mode"}:
            raise PlayError(400, PLAY_CHROME_INVALID, "the body is {mode}")
        snapshot = await chrome.set_mode(body.get("mode"))
        return json_response({"ok": True, **snapshot.wire()})

    async def events(request: web.Request) -> web.StreamResponse:
        queue: asyncio.Queue[ChromeSnapshot | None] = asyncio.Queue()
        response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-store",
                "X-Accel-Buffering": "no",
            }
        )
        await response.prepare(request)
        chrome.streams.add(queue)
        dispose = chrome.subscribe(queue.put_nowait)  # the current snapshot first
        try:
            while True:
                try:
                    snapshot = await asyncio.wait_for(queue.get(), SSE_KEEPALIVE_SECONDS)
                except TimeoutError:
                    await response.write(b": keep-alive\n\n")
                    continue
                if snapshot is None:
                    break
                await response.write(_sse(snapshot))
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            dispose()
            chrome.streams.discard(queue)
        with contextlib.suppress(ConnectionResetError):
            await response.write_eof()
        return response

    return [
        PlayRoute(
            "/chrome",
            {"GET": (get_chrome, None), "PUT": (put_chrome, SMALL_BODY_LIMIT)},
            "tavern.v2.chrome",
        ),
        PlayRoute("/chrome/events", {"GET": (events, None)}, "tavern.v2.chrome_events"),
    ]


__all__ = ["TAVERN_CHROME", "ChromeService", "ChromeSnapshot", "chrome_routes"]
