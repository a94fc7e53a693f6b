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
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal, TextIO

from innkeeper_hostapi.commands import (
    CommandEnvironment,
)
from innkeeper_tavern.face.cli.options import add_backend_flags, backend_mode
from innkeeper_tavern.features.migration.backends import (
    EXPORT_KINDS,
    MAX_IMPORT_FILE_BYTES,
    Backend,
    CommandError,
    open_backend,
)
from innkeeper_tavern.features.migration.output import render_table, safe_file_name
from innkeeper_tavern.state.resources.classify import classify

IMPORT_SUFFIXES: Final = (".json", ".png")


@dataclass(slots=True)
class FileResult:
    """One row of the import table."""

    path: Path
    kind: str
    status: Literal["imported", "skipped"]
    detail: str
    failed: bool = False


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


# ====================================================================== import


def path_argument(text: str) -> Path:
    """A PATH argument; an empty one (an unset shell variable) is refused, not read as ``.``."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path (an unset shell variable?)")
    return Path(text)


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
    parser.add_argument("paths", nargs="+", type=path_argument, metavar="PATH")
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
    add_backend_flags(parser)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    return asyncio.run(_import(args, env))


async def _import(args: argparse.Namespace, env: CommandEnvironment) -> int:
    from innkeeper_tavern.features.migration.layout import is_st_folder

    if len(args.paths) == 1 and is_st_folder(args.paths[0]):
        from innkeeper_tavern.face.cli.folder_import import import_folder

        return await import_folder(args, env)
    if args.dry_run or args.json:
        sys.stderr.write("innkeeper import: --dry-run and --json need one SillyTavern folder\n")
        return 2
    files, results = collect_files(args.paths)
    try:
        backend = await open_backend(env, backend_mode(args), args.server)
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
    parser.add_argument(
        "--out", type=path_argument, default=Path("."), help="folder to write (default .)"
    )
    parser.add_argument(
        "--format", choices=("png", "json"), default="png", help="character file format"
    )
    add_backend_flags(parser)
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
    from innkeeper_tavern.features.migration.export import export_folder

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


async def _export(args: argparse.Namespace, env: CommandEnvironment) -> int:
    try:
        # The whole-library export writes playthroughs too: they need the host's sessions.
        backend = await open_backend(
            env, backend_mode(args), args.server, host=args.kind == "sillytavern"
        )
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
