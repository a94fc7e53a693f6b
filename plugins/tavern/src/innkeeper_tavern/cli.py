"""``innkeeper import`` and ``innkeeper export``: move SillyTavern files in and out of the library.

Usage::

    innkeeper import [--server URL] [--online | --offline] PATH...
    innkeeper export {characters|presets|world-books|users} (ID... | --all)
                     [--out DIR] [--format png|json] [--server URL] [--online | --offline]
    innkeeper export sillytavern --out DIR   (the whole library as a SillyTavern folder)

Where the data goes (a decision, see docs/resources.md "Importing from the command line"): a
running server owns the stores — it keeps their indexes in memory and serializes writes with its
own locks — so writing the data directory behind its back would lose updates. The commands
therefore work on the data directory they are configured for: while a server holds its writer
lock they talk to that server, at the address it recorded beside the lock (whatever port it
runs on), using the desktop request token (docs/http.md) because a script sends no ``Origin``.
With the lock free no server uses the directory, and they open the stores directly under the
lock. ``--server URL`` names a server instead. The first line printed says where they write.

``import`` walks folders recursively (``*.json``, ``*.png``), recognizes cards (JSON/PNG), Chat
Completion presets, world books and Tavern user JSON, shows a progress bar on a terminal and ends
with a per-file table: imported (with the new id) or skipped (with the reason). Exit status: 0 when
nothing was rejected, 1 when a recognized file was rejected or a transfer failed, 2 for usage
errors.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import re
import sys
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, Protocol, TextIO

import aiohttp

from innkeeper_hostapi.commands import (
    CommandEnvironment,
    HostClient,
    HostClientError,
    HostResponse,
)

from .formats import card as card_format
from .formats.errors import FormatError
from .formats.png import MAX_CARD_FILE_BYTES
from .formats.preset import export_preset_json
from .formats.user import export_user_json
from .resources import ResourceError, TavernResources
from .resources.classify import FileKind, classify
from .resources.lock import DataDirLock, DataDirLockedError, recorded_server
from .resources.service import export_world_book_json, file_stem

#: Plugin id whose data directory holds the stores (the entry-point name in pyproject.toml).
PLUGIN_ID: Final = "tavern"
V1: Final = "/pmp-dsh-tavern/api/v1"
TOKEN_PATH: Final = "/pmp-dsh-tavern/api/request-token"
#: Seconds to wait for ``/healthz`` before deciding no server is running.
PROBE_TIMEOUT_SECONDS: Final = 1.5
#: Seconds allowed for one file transfer (a 32 MiB card over loopback takes well under this).
TRANSFER_TIMEOUT_SECONDS: Final = 120.0
#: Largest file ``import`` reads: the card import limit is the largest of every kind.
MAX_IMPORT_FILE_BYTES: Final = MAX_CARD_FILE_BYTES
IMPORT_SUFFIXES: Final = (".json", ".png")
ExportKind = Literal["characters", "presets", "world-books", "users"]
EXPORT_KINDS: Final = ("characters", "presets", "world-books", "users")


_NO_ANSWER: Final = (
    ": a server seems to be running but does not answer at its address; "
    "stop it or pass the address it listens on (--server URL)"
)


class CommandError(Exception):
    """A failure that ends the command with a message (no traceback)."""


@dataclass(slots=True)
class FileResult:
    """One row of the import table."""

    path: Path
    kind: str
    status: Literal["imported", "skipped"]
    detail: str
    failed: bool = False


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
        url = f"{V1}{path}"
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
            raise CommandError(f"{code}: {doc.get('error', 'request failed')}")
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
        except (FormatError, ResourceError) as exc:
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


async def _backend(
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


# ====================================================================== progress and table


class Progress:
    """A one-line progress bar on a terminal; silent otherwise."""

    WIDTH: Final = 28

    def __init__(self, total: int, stream: TextIO) -> None:
        self.total = max(total, 1)
        self.stream = stream
        self.enabled = stream.isatty()
        self.done = 0

    def step(self, label: str) -> None:
        """Advance by one file."""
        self.done += 1
        if not self.enabled:
            return
        filled = self.WIDTH * self.done // self.total
        bar = "#" * filled + "." * (self.WIDTH - filled)
        text = f"\r[{bar}] {self.done}/{self.total} {label[:40]:<40}"
        self.stream.write(text)
        self.stream.flush()

    def finish(self) -> None:
        """End the bar's line."""
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()


def render_table(rows: Sequence[Sequence[str]], headers: Sequence[str]) -> str:
    """A plain text table (columns padded to the widest cell)."""
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines.extend(
        "  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )
    return "\n".join(lines)


# ====================================================================== import


def collect_files(paths: Sequence[Path]) -> tuple[list[Path], list[FileResult]]:
    """Files to import (folders walked recursively, sorted) and results for missing paths."""
    files: list[Path] = []
    problems: list[FileResult] = []
    for path in paths:
        if path.is_dir():
            found = [
                Path(folder) / name
                for folder, dirs, names in os.walk(path)
                for name in names
                if name.lower().endswith(IMPORT_SUFFIXES) and not name.startswith(".")
                if not any(part.startswith(".") for part in Path(folder).relative_to(path).parts)
            ]
            files.extend(sorted(found))
        elif path.is_file():
            files.append(path)
        else:
            problems.append(FileResult(path, "-", "skipped", "no such file or folder", True))
    return files, problems


async def import_files(
    backend: Backend, files: Sequence[Path], stream: TextIO, *, allow_duplicates: bool = False
) -> list[FileResult]:
    """Import every file through ``backend``; one result per file.

    A card file whose exact bytes the library already imported (its stored ``sha256``) is
    skipped as a duplicate, naming the card it matched, unless ``allow_duplicates``.
    """
    results: list[FileResult] = []
    hashes: dict[str, tuple[str, str]] | None = None
    progress = Progress(len(files), stream)
    for path in files:
        progress.step(path.name)
        try:
            size = path.stat().st_size
            if size > MAX_IMPORT_FILE_BYTES:
                results.append(
                    FileResult(path, "-", "skipped", f"larger than {MAX_IMPORT_FILE_BYTES} bytes")
                )
                continue
            data = await asyncio.to_thread(path.read_bytes)
        except OSError as exc:
            results.append(FileResult(path, "-", "skipped", f"unreadable: {exc}", True))
            continue
        kind, reason = classify(data)
        if kind == "skip":
            results.append(FileResult(path, "-", "skipped", reason))
            continue
        digest = hashlib.sha256(data).hexdigest()
        if kind == "character" and not allow_duplicates:
            if hashes is None:
                hashes = await backend.card_hashes()
            if digest in hashes:
                same_id, same_name = hashes[digest]
                detail = f"duplicate of {same_id} ({same_name}): the same file was imported"
                results.append(FileResult(path, kind, "skipped", detail))
                continue
        try:
            new_id, name = await backend.import_file(kind, path, data)
        except CommandError as exc:
            results.append(FileResult(path, kind, "skipped", str(exc), True))
            continue
        if hashes is not None and kind == "character":
            hashes.setdefault(digest, (new_id, name))
        results.append(FileResult(path, kind, "imported", f"{new_id} ({name})"))
    progress.finish()
    return results


def _shown(path: Path) -> str:
    """``path`` relative to the working directory when it is inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _mode(args: argparse.Namespace) -> str:
    if args.online:
        return "online"
    if args.offline:
        return "offline"
    return "auto"


def _mode_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--server",
        metavar="URL",
        help="address of a running server (default: the configured host and port)",
    )
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--online", action="store_true", help="require a running server")
    group.add_argument(
        "--offline", action="store_true", help="write the data directory (no server may run)"
    )


def import_main(argv: list[str], env: CommandEnvironment) -> int:
    """``innkeeper import PATH...``."""
    parser = argparse.ArgumentParser(
        prog="innkeeper import",
        description=(
            "Import SillyTavern cards (JSON/PNG), presets, world books and Tavern users, or a "
            "whole SillyTavern user folder (SillyTavern/data/<user>: cards with their linked "
            "worlds, worlds, Chat Completion presets, personas and every chat as a playthrough). "
            "A folder import skips what is already there and can be re-run after an interruption."
        ),
        epilog=(
            "Exit status: 0 when nothing was refused, 1 when something was refused or the target "
            "is unreachable, 2 for usage errors. See docs/migration.md."
        ),
    )
    parser.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="folder import: report what would happen, write nothing",
    )
    parser.add_argument(
        "--json", action="store_true", help="folder import: print the report as JSON on stdout"
    )
    parser.add_argument(
        "--verbose", action="store_true", help="folder import: list every item, not only problems"
    )
    parser.add_argument(
        "--allow-duplicates",
        action="store_true",
        help="import a card file even when the library already has a card made from it",
    )
    _mode_flags(parser)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    return asyncio.run(_import(args, env))


async def _import(args: argparse.Namespace, env: CommandEnvironment) -> int:
    from .migration.layout import is_st_folder

    if len(args.paths) == 1 and is_st_folder(args.paths[0]):
        from .migration.cli import import_folder

        return await import_folder(args, env)
    if args.dry_run or args.json:
        sys.stderr.write("innkeeper import: --dry-run and --json need one SillyTavern folder\n")
        return 2
    files, results = collect_files(args.paths)
    try:
        backend = await _backend(env, _mode(args), args.server)
    except CommandError as exc:
        sys.stderr.write(f"innkeeper import: {exc}\n")
        return 1
    try:
        sys.stderr.write(f"importing {len(files)} file(s) into the {backend.label}\n")
        sys.stderr.flush()
        results.extend(
            await import_files(backend, files, sys.stderr, allow_duplicates=args.allow_duplicates)
        )
    finally:
        await backend.close()
    rows = [(r.status, r.kind, _shown(r.path), r.detail) for r in results]
    print(render_table(rows, ("RESULT", "KIND", "FILE", "DETAIL")))
    imported = sum(1 for r in results if r.status == "imported")
    duplicates = sum(1 for r in results if r.detail.startswith("duplicate of "))
    note = f" ({duplicates} as duplicate)" if duplicates else ""
    print(f"{imported} imported, {len(results) - imported} skipped{note}")
    return 1 if any(r.failed for r in results) else 0


# ====================================================================== export


def export_main(argv: list[str], env: CommandEnvironment) -> int:
    """``innkeeper export KIND (ID... | --all) [--out DIR] [--format png|json]``."""
    parser = argparse.ArgumentParser(
        prog="innkeeper export",
        description=(
            "Export stored resources as SillyTavern/Tavern files. The kind 'sillytavern' writes "
            "the whole library as a folder SillyTavern reads (characters/, worlds/, "
            "OpenAI Settings/, personas.json, User Avatars/, chats/ with every playthrough)."
        ),
        epilog="Exit status: 0 when every resource was written, 1 otherwise, 2 for usage errors.",
    )
    parser.add_argument("kind", choices=(*EXPORT_KINDS, "sillytavern"))
    parser.add_argument("ids", nargs="*", metavar="ID")
    parser.add_argument("--all", action="store_true", help="export every stored resource")
    parser.add_argument("--out", type=Path, default=Path("."), help="folder to write (default .)")
    parser.add_argument(
        "--format", choices=("png", "json"), default="png", help="character file format"
    )
    _mode_flags(parser)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    if args.kind == "sillytavern":
        if args.ids:
            sys.stderr.write("innkeeper export: 'sillytavern' exports everything (no IDs)\n")
            return 2
        return asyncio.run(_export(args, env))
    if bool(args.ids) == bool(args.all):
        sys.stderr.write("innkeeper export: give IDs or --all (not both)\n")
        return 2
    return asyncio.run(_export(args, env))


async def _export_folder(backend: Backend, out: Path) -> int:
    from .migration.export import export_folder

    sys.stderr.write(f"exporting a SillyTavern folder from the {backend.label} to {out}\n")
    try:
        items = await export_folder(backend, out)
    except CommandError as exc:
        sys.stderr.write(f"innkeeper export: {exc}\n")
        return 1
    finally:
        await backend.close()
    shown = {"imported": "exported", "refused": "failed", "unsupported": "skipped"}
    rows = [(shown.get(i.status, i.status), i.kind, i.detail) for i in items]
    print(render_table(rows, ("RESULT", "KIND", "FILE")))
    return 1 if any(i.status == "refused" for i in items) else 0


_UNSAFE_NAME: Final = re.compile(r'[\x00-\x1f\x7f"\\/:*?<>|]+')


def safe_file_name(name: str, used: set[str]) -> str:
    """A file name without path separators or control characters, unique within ``used``."""
    cleaned = _UNSAFE_NAME.sub("_", name).strip(" .") or "export"
    stem, dot, ext = cleaned.rpartition(".")
    if not dot:
        stem, ext = cleaned, ""
    candidate = cleaned
    counter = 2
    while candidate.lower() in used:
        candidate = f"{stem} ({counter}).{ext}" if ext else f"{stem} ({counter})"
        counter += 1
    used.add(candidate.lower())
    return candidate


async def _export(args: argparse.Namespace, env: CommandEnvironment) -> int:
    try:
        # The whole-library export writes playthroughs too: they need the host's sessions.
        backend = await _backend(env, _mode(args), args.server, host=args.kind == "sillytavern")
    except CommandError as exc:
        sys.stderr.write(f"innkeeper export: {exc}\n")
        return 1
    if args.kind == "sillytavern":
        return await _export_folder(backend, args.out)
    sys.stderr.write(f"exporting {args.kind} from the {backend.label}\n")
    failed = False
    rows: list[tuple[str, str, str]] = []
    try:
        ids = await backend.list_ids(args.kind) if args.all else list(args.ids)
        args.out.mkdir(parents=True, exist_ok=True)
        used = {p.name.lower() for p in args.out.iterdir()}
        progress = Progress(len(ids), sys.stderr)
        for resource_id in ids:
            progress.step(resource_id)
            try:
                data, name = await backend.export(args.kind, resource_id, args.format)
            except CommandError as exc:
                rows.append(("failed", resource_id, str(exc)))
                failed = True
                continue
            target = args.out / safe_file_name(name, used)
            await asyncio.to_thread(target.write_bytes, data)
            rows.append(("exported", resource_id, str(target)))
        progress.finish()
    except CommandError as exc:
        sys.stderr.write(f"innkeeper export: {exc}\n")
        return 1
    finally:
        await backend.close()
    print(render_table(rows, ("RESULT", "ID", "FILE")))
    return 1 if failed else 0
