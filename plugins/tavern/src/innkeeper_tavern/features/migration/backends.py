"""Where ``innkeeper import`` / ``export`` read and write: a host, or the stores directly.

See ``innkeeper_tavern.face.cli.import_export`` for the decision. :class:`OnlineBackend` talks to a
host through an ``innkeeper_hostapi.commands.HostClient`` — a running server over loopback
(:class:`HttpHostClient`, with the desktop request token) or the host the command started in its
own process (``CommandEnvironment.local_host``); :class:`OfflineBackend` opens the stores under
the writer lock. :func:`open_backend` picks one.
"""

from __future__ import annotations

import asyncio
import json
import re
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, Literal, Protocol

import aiohttp

from innkeeper_hostapi.commands import (
    CommandEnvironment,
    HostClient,
    HostClientError,
    HostResponse,
)
from innkeeper_tavern.pure.api_paths import V1_PREFIX
from innkeeper_tavern.pure.formats import card as card_format
from innkeeper_tavern.pure.formats.errors import FormatError, field_message
from innkeeper_tavern.pure.formats.png import MAX_CARD_FILE_BYTES
from innkeeper_tavern.pure.formats.preset import export_preset_json
from innkeeper_tavern.pure.formats.user import export_user_json
from innkeeper_tavern.state.resources import ResourceError, TavernResources
from innkeeper_tavern.state.resources.classify import FileKind
from innkeeper_tavern.state.resources.lock import DataDirLock, DataDirLockedError, recorded_server
from innkeeper_tavern.state.resources.service import export_world_book_json, file_stem

#: Plugin id whose data directory holds the stores (the entry-point name in pyproject.toml).
PLUGIN_ID: Final = "tavern"
TOKEN_PATH: Final = "/pmp-dsh-tavern/api/request-token"
#: Seconds to wait for ``/healthz`` before deciding no server is running.
PROBE_TIMEOUT_SECONDS: Final = 1.5
#: Seconds allowed for one file transfer (a 32 MiB card over loopback takes well under this).
TRANSFER_TIMEOUT_SECONDS: Final = 120.0
#: Largest file ``import`` reads: the card import limit is the largest of every kind.
MAX_IMPORT_FILE_BYTES: Final = MAX_CARD_FILE_BYTES

ExportKind = Literal["characters", "presets", "world-books", "users"]
EXPORT_KINDS: Final = ("characters", "presets", "world-books", "users")


_NO_ANSWER: Final = (
    ": a server seems to be running but does not answer at its address; "
    "stop it or pass the address it listens on (--server URL)"
)


class CommandError(Exception):
    """A failure that ends the command with a message (no traceback)."""


class Backend(Protocol):
    """Where imports go and exports come from: the running server or the stores directly."""

    label: str

    async def import_file(self, kind: FileKind, path: Path, data: bytes) -> tuple[str, str]:
        """Import one file; returns (new id, display name); raises ``CommandError``."""
        ...

    async def list_ids(self, kind: ExportKind) -> list[str]:
        """Every stored id of ``kind``."""
        ...

    async def names(self, kind: ExportKind) -> dict[str, str]:
        """Every stored id of ``kind`` with its display name."""
        ...

    async def card_hashes(self) -> dict[str, tuple[str, str]]:
        """SHA-256 of each stored card's imported file → (id, name) (duplicates are skipped)."""
        ...

    async def export(self, kind: ExportKind, resource_id: str, fmt: str) -> tuple[bytes, str]:
        """One export attachment: (bytes, suggested file name)."""
        ...

    async def close(self) -> None:
        """Release connections or locks."""
        ...


# ====================================================================== online


class HttpHostClient:
    """``innkeeper_hostapi.commands.HostClient`` over loopback HTTP with the request token."""

    def __init__(self, base_url: str, session: aiohttp.ClientSession, token: str) -> None:
        self.label = f"server at {base_url}"
        self._base = base_url.rstrip("/")
        self._session = session
        self._headers = {"X-Tavern-Request-Token": token}

    @classmethod
    async def connect(cls, base_url: str) -> HttpHostClient | None:
        """A client if a server answers at ``base_url``, else ``None``."""
        timeout = aiohttp.ClientTimeout(total=TRANSFER_TIMEOUT_SECONDS)
        session = aiohttp.ClientSession(timeout=timeout)
        try:
            probe = aiohttp.ClientTimeout(total=PROBE_TIMEOUT_SECONDS)
            async with session.get(f"{base_url}/healthz", timeout=probe) as resp:
                if resp.status != 200:
                    await session.close()
                    return None
            async with session.get(
                f"{base_url}{TOKEN_PATH}", headers={"X-Tavern-Client": "embedded"}
            ) as resp:
                body = await resp.json()
                if resp.status != 200 or not isinstance(body.get("token"), str):
                    raise CommandError(f"the server refused a request token: {body.get('error')}")
                token: str = body["token"]
        except (aiohttp.ClientError, TimeoutError):
            await session.close()
            return None
        except BaseException:
            await session.close()
            raise
        return cls(base_url, session, token)

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> HostResponse:
        sent = {**self._headers, **(headers or {})}
        try:
            async with self._session.request(
                method, f"{self._base}{path}", data=body, headers=sent
            ) as resp:
                data = await resp.read()
                return HostResponse(status=resp.status, body=data, headers=dict(resp.headers))
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise HostClientError(f"server request failed: {exc}") from None

    async def close(self) -> None:
        await self._session.close()


class OnlineBackend:
    """Talks to a host through a :class:`HostClient`: a running server, or the host this
    command started in its own process (``CommandEnvironment.local_host``)."""

    def __init__(self, client: HostClient) -> None:
        self.client = client
        self.label = client.label

    @classmethod
    async def connect(cls, base_url: str) -> OnlineBackend | None:
        """A backend if a server answers at ``base_url``, else ``None``."""
        client = await HttpHostClient.connect(base_url)
        return None if client is None else cls(client)

    async def _send(
        self, method: str, path: str, data: bytes | None, headers: dict[str, str]
    ) -> HostResponse:
        try:
            return await self.client.request(method, path, body=data, headers=headers)
        except HostClientError as exc:
            raise CommandError(str(exc)) from None

    async def _call(
        self,
        method: str,
        path: str,
        *,
        data: bytes | None = None,
        content_type: str = "application/json",
        query: dict[str, str] | None = None,
    ) -> tuple[int, bytes, str]:
        url = f"{V1_PREFIX}{path}"
        if query:
            url += "?" + urllib.parse.urlencode(query)
        headers = {"Content-Type": content_type} if data is not None else {}
        resp = await self._send(method, url, data, headers)
        return resp.status, resp.body, resp.headers.get("Content-Disposition", "")

    async def request_json(
        self, method: str, path: str, body: Any = None
    ) -> tuple[int, dict[str, Any]]:
        """A JSON request to any server path (``/pmp-dsh-tavern/api/v2/...``)."""
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if data is not None else {}
        resp = await self._send(method, path, data, headers)
        try:
            doc = json.loads(resp.body)
        except ValueError:
            raise CommandError(f"the server answered {resp.status} without JSON") from None
        return resp.status, doc if isinstance(doc, dict) else {}

    async def request_raw(
        self, method: str, path: str, data: bytes | None = None, content_type: str = ""
    ) -> HostResponse:
        """A request to any server path with a raw body (a group chat's JSONL)."""
        headers = {"Content-Type": content_type} if data is not None and content_type else {}
        return await self._send(method, path, data, headers)

    @staticmethod
    def _json(status: int, body: bytes) -> dict[str, Any]:
        try:
            doc = json.loads(body)
        except ValueError:
            doc = {}
        if not isinstance(doc, dict):
            doc = {}
        if status >= 400 or doc.get("ok") is not True:
            code = doc.get("code", f"HTTP_{status}")
            raise CommandError(f"{code}: {problem_message(doc)}")
        return doc

    async def import_file(self, kind: FileKind, path: Path, data: bytes) -> tuple[str, str]:
        name = path.name
        if kind == "character":
            ctype = "image/png" if data.startswith(b"\x89PNG") else "application/json"
            status, body, _ = await self._call(
                "POST",
                "/characters/import",
                data=data,
                content_type=ctype,
                query={"filename": name},
            )
            doc = self._json(status, body)["character"]
        elif kind == "preset":
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                raise CommandError("INVALID_JSON: preset is not valid UTF-8") from None
            payload = {"content": text, "name": file_stem(name)}
            status, body, _ = await self._call("POST", "/import", data=json.dumps(payload).encode())
            doc = self._json(status, body)["preset"]
        elif kind == "world-book":
            status, body, _ = await self._call(
                "POST", "/world-books/import", data=data, query={"filename": name}
            )
            doc = self._json(status, body)["worldBook"]
        elif kind == "user":
            status, body, _ = await self._call("POST", "/users/import", data=data)
            doc = self._json(status, body)["user"]
        else:
            raise CommandError(f"cannot import {kind}")
        return str(doc["id"]), str(doc["name"])

    async def list_ids(self, kind: ExportKind) -> list[str]:
        return list(await self.names(kind))

    async def names(self, kind: ExportKind) -> dict[str, str]:
        status, body, _ = await self._call("GET", f"/{kind}")
        key = {"world-books": "worldBooks"}.get(kind, kind)
        return {str(i["id"]): str(i.get("name", "")) for i in self._json(status, body)[key]}

    async def card_hashes(self) -> dict[str, tuple[str, str]]:
        status, body, _ = await self._call("GET", "/characters")
        rows = self._json(status, body)["characters"]
        return {
            str(r["sha256"]): (str(r["id"]), str(r.get("name", "")))
            for r in reversed(rows)  # the oldest copy wins when a file was imported twice
            if isinstance(r.get("sha256"), str)
        }

    async def export(self, kind: ExportKind, resource_id: str, fmt: str) -> tuple[bytes, str]:
        quoted = urllib.parse.quote(resource_id, safe="")
        suffix = {
            "characters": fmt,
            "presets": "export",
            "world-books": "json",
            "users": "export",
        }[kind]
        status, body, disposition = await self._call("GET", f"/{kind}/{quoted}/{suffix}")
        if status != 200:
            self._json(status, body)
        return body, _disposition_name(disposition) or f"{resource_id}.{_ext(kind, fmt)}"

    async def close(self) -> None:
        await self.client.close()


def problem_message(doc: Mapping[str, Any]) -> str:
    """The message of a problem answer: ``error`` is a string, or (with details) an object
    whose ``message`` already names the field (docs/http.md "Errors")."""
    error = doc.get("error", "request failed")
    if isinstance(error, Mapping):
        return str(error.get("message", "request failed"))
    return str(error)


def _disposition_name(header: str) -> str | None:
    match = re.search(r"filename\*=UTF-8''([^;]+)", header)
    if match:
        return urllib.parse.unquote(match.group(1))
    match = re.search(r'filename="([^"]*)"', header)
    return match.group(1) if match else None


def _ext(kind: str, fmt: str) -> str:
    return fmt if kind == "characters" else "json"


# ====================================================================== offline


class OfflineBackend:
    """Opens the stores in the data directory under the writer lock."""

    def __init__(self, root: Path) -> None:
        self.label = f"data directory {root} (no server is running on it)"
        self._lock = DataDirLock(root)
        self._res = TavernResources(root)

    @property
    def resources(self) -> TavernResources:
        """The open stores (for the folder import's relations)."""
        return self._res

    async def start(self) -> None:
        """Take the writer lock and open the stores."""
        try:
            self._lock.acquire()
        except DataDirLockedError as exc:
            raise CommandError(f"{exc}{_NO_ANSWER}") from None
        await self._res.open()

    async def import_file(self, kind: FileKind, path: Path, data: bytes) -> tuple[str, str]:
        try:
            if kind == "character":
                result = await self._res.import_character(data, path.name)
                return result.record.id, result.record.body.name
            if kind == "preset":
                preset = await self._res.import_preset(data, file_stem(path.name))
                return preset.id, preset.body.name
            if kind == "world-book":
                book = await self._res.import_world_book(data, file_name=path.name)
                return book.id, book.body.name
            if kind == "user":
                user = await self._res.import_user(data)
                return user.id, user.body.name
        except FormatError as exc:
            raise CommandError(f"{exc.code}: {field_message(exc.message, exc.path)}") from None
        except ResourceError as exc:
            raise CommandError(f"{exc.code}: {exc.message}") from None
        raise CommandError(f"cannot import {kind}")

    async def list_ids(self, kind: ExportKind) -> list[str]:
        library = self._library(kind)
        return sorted(e.id for e in library.entries())

    async def names(self, kind: ExportKind) -> dict[str, str]:
        return {e.id: e.name for e in self._library(kind).entries()}

    async def card_hashes(self) -> dict[str, tuple[str, str]]:
        entries = sorted(self._res.characters.entries(), key=lambda e: e.created_at, reverse=True)
        return {
            str(e.summary["sha256"]): (e.id, e.name)
            for e in entries
            if isinstance(e.summary.get("sha256"), str)
        }

    def _library(self, kind: ExportKind) -> Any:
        return {
            "characters": self._res.characters,
            "presets": self._res.presets,
            "world-books": self._res.world_books,
            "users": self._res.users,
        }[kind]

    async def export(self, kind: ExportKind, resource_id: str, fmt: str) -> tuple[bytes, str]:
        try:
            record = await self._library(kind).get(resource_id)
            name = f"{record.body.name}.{_ext(kind, fmt)}"
            if kind == "presets":
                return export_preset_json(record.body), name
            if kind == "world-books":
                return export_world_book_json(record.body), name
            if kind == "users":
                return export_user_json(record.body), name
            if fmt == "json":
                return card_format.export_card_json(record.body), name
            cover = await self._res.characters.read_artifact(resource_id)
            return card_format.export_card_png(record.body, cover), name
        except (FormatError, ResourceError) as exc:
            raise CommandError(f"{exc.code}: {exc.message}") from None

    async def close(self) -> None:
        self._lock.release()


async def open_backend(
    env: CommandEnvironment, mode: str, server: str | None = None, *, host: bool = False
) -> Backend:
    """Where the command reads and writes (see the module docstring).

    ``--server URL`` names the server. Otherwise the data directory decides: while a server
    holds its writer lock, the command talks to the address that server recorded beside the
    lock (falling back to the configured address); with the lock free no server uses this data
    directory, so the stores are opened directly (``--online`` then tries the configured
    address instead). ``host=True`` (the work needs sessions, e.g. chats) starts the whole host
    in this process instead of opening the stores (``CommandEnvironment.local_host``): its
    Tavern plugin takes the writer lock as a server's would.
    """
    root = env.plugin_data_dir(PLUGIN_ID)
    if server is not None:
        online = await OnlineBackend.connect(server.rstrip("/"))
        if online is None:
            raise CommandError(f"no server answers at {server}")
        return online
    held = mode != "offline" and await asyncio.to_thread(DataDirLock(root).held_elsewhere)
    if held or mode == "online":
        recorded = await asyncio.to_thread(recorded_server, root) if held else None
        candidates = [recorded[0]] if recorded else []
        candidates.append(env.base_url.rstrip("/"))
        for base_url in dict.fromkeys(candidates):
            online = await OnlineBackend.connect(base_url)
            if online is not None:
                if held:
                    online.label = f"server at {base_url} (data directory {root})"
                return online
        if mode == "online":
            raise CommandError(f"no server answers at {', '.join(dict.fromkeys(candidates))}")
    if host and env.start_local_host is not None:
        if await asyncio.to_thread(DataDirLock(root).held_elsewhere):
            raise CommandError(f"{root} is in use by another process{_NO_ANSWER}")
        try:
            return OnlineBackend(await env.local_host())
        except HostClientError as exc:
            raise CommandError(f"starting the host in this process failed: {exc}") from None
    offline = OfflineBackend(root)
    await offline.start()
    return offline
