"""Cleanup of invalid playthroughs (`docs/contract/play.md#cleanup` and
`docs/contract/play.md#availability`).

``preview`` inspects the current workspace without writes (archived runs included). ``clean``
removes the catalog rows of runs whose every session is confirmed missing and moves each one's
**dedicated** directory (named exactly after its ``playthrough-*`` id, holding no other run's
timeline and no bound import context) to ``.tavern-trash/<backupId>/files``; a durable
``record.json`` is written before the catalog row goes, so an interrupted clean leaves either the
original directory or the recovery copy, both restorable. ``restore`` moves the files back and
merges the original row into the catalog without overwriting an existing directory or a
different row with the same id. Host sessions, history and selections are never touched.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import stat
from datetime import UTC, datetime
from typing import Any, Final

from .errors import (
    PLAY_CLEANUP_CONFLICT,
    PLAY_CLEANUP_INVALID,
    PLAY_PATH_NOT_FOUND,
    PlayError,
)
from .import_context import ImportContexts
from .oplog import Operation
from .paths import Jail, split_relative
from .playthroughs import CATALOG_PATH, Playthrough, Playthroughs
from .schema import tavern_ext

TRASH_DIR: Final = ".tavern-trash"
RECORD_FILE: Final = "record.json"
#: Ids one mutation may name, 1 to 100 explicit ids (`docs/contract/play.md#cleanup`).
MAX_CLEANUP_IDS: Final = 100
#: Backups listed by a preview.
MAX_LISTED_BACKUPS: Final = 1000


def _now() -> str:
    now = datetime.now(UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


def _move(jail: Jail, source: tuple[str, ...], target: tuple[str, ...]) -> None:
    """Rename a real directory inside the root (no link followed at either end)."""
    src = jail.open_parent(source, create=False)
    try:
        dst = jail.open_parent(target, create=True)
        try:
            st = os.stat(src.name, dir_fd=src.fd, follow_symlinks=False)
            if not stat.S_ISDIR(st.st_mode):
                raise PlayError(409, PLAY_CLEANUP_CONFLICT, "the directory is not a real directory")
            try:
                os.stat(dst.name, dir_fd=dst.fd, follow_symlinks=False)
                raise PlayError(409, PLAY_CLEANUP_CONFLICT, "the target directory already exists")
            except FileNotFoundError:
                pass
            jail.recheck(source, src)
            jail.recheck(target, dst)
            os.rename(src.name, dst.name, src_dir_fd=src.fd, dst_dir_fd=dst.fd)
            os.fsync(dst.fd)
        finally:
            dst.close()
    finally:
        src.close()


class Cleanup:
    """Preview, clean and restore."""

    def __init__(self, playthroughs: Playthroughs, contexts: ImportContexts) -> None:
        self.playthroughs = playthroughs
        self.workspace = playthroughs.workspace
        self.contexts = contexts

    def _ids(self, value: object) -> list[str]:
        if not isinstance(value, list) or not 1 <= len(value) <= MAX_CLEANUP_IDS:
            raise PlayError(400, PLAY_CLEANUP_INVALID, f"ids must list 1 to {MAX_CLEANUP_IDS} ids")
        if not all(isinstance(i, str) and i for i in value) or len(set(value)) != len(value):
            raise PlayError(400, PLAY_CLEANUP_INVALID, "ids must be distinct non-empty strings")
        return list(value)

    def _scope(self, value: object) -> None:
        if not isinstance(value, str):
            raise PlayError(
                400, PLAY_CLEANUP_INVALID, "workspaceScope (from the preview) is required"
            )
        if value != self.workspace.scope():
            raise PlayError(409, PLAY_CLEANUP_CONFLICT, "the workspace changed; preview again")

    # -- eligibility ---------------------------------------------------------------------------
    def _dedicated(self, item: Playthrough, items: list[Playthrough]) -> str | None:
        """Why the run's directory is not dedicated to it, or ``None`` when it is."""
        parts = item.row["path"].split("/")
        if not item.id.startswith("playthrough-") or parts[-2] != item.id:
            return "shared-directory"
        folder = "/".join(parts[:-1]) + "/"
        for other in items:
            if other.id != item.id and other.row["path"].casefold().startswith(folder.casefold()):
                return "shared-directory"
            ctx_path = tavern_ext(other.row).get("importContextPath")
            if other.id != item.id and isinstance(ctx_path, str) and ctx_path.startswith(folder):
                return "referenced"
        for binding in self.contexts.bindings():
            if binding.path.startswith(folder):
                return "import-context-bound"
        return None

    async def _inspect(self, item: Playthrough, items: list[Playthrough]) -> dict[str, Any]:
        status, reason, ids = await self.playthroughs.classify(item, ignore_archive=True)
        cleanable = status == "invalid"
        why = reason
        if cleanable:
            why = self._dedicated(item, items)
            cleanable = why is None
            why = why or reason
        return {
            "id": item.id,
            "title": item.row.get("title") if isinstance(item.row.get("title"), str) else None,
            "path": item.row["path"],
            "archived": "archivedAt" in tavern_ext(item.row),
            "status": status,
            "reason": why,
            "cleanable": cleanable,
            "sessionIds": ids,
        }

    async def _records(self) -> list[dict[str, Any]]:
        try:
            _, entries = await self.workspace.list(TRASH_DIR)
        except PlayError as exc:
            if exc.code == PLAY_PATH_NOT_FOUND:
                return []
            raise
        out = []
        for entry in entries[:MAX_LISTED_BACKUPS]:
            if entry.type != "directory":
                continue
            try:
                found = await self.workspace.read(f"{TRASH_DIR}/{entry.name}/{RECORD_FILE}")
                record = json.loads(found.content)
            except (PlayError, ValueError):
                continue
            if isinstance(record, dict) and record.get("backupId") == entry.name:
                out.append(record)
        return out

    async def preview(self) -> dict[str, Any]:
        items = await self.playthroughs.all()
        return {
            "ok": True,
            "workspaceScope": self.workspace.scope(),
            "items": [await self._inspect(item, items) for item in items],
            "backups": [
                {k: r.get(k) for k in ("backupId", "playthroughId", "path", "createdAt", "state")}
                for r in await self._records()
            ],
        }

    # -- clean -----------------------------------------------------------------------------------
    async def clean(self, body: dict[str, Any], op: Operation) -> dict[str, Any]:
        ids = self._ids(body.get("ids"))
        self._scope(body.get("workspaceScope"))
        op.stage("request.validated")
        results = []
        for pid in ids:
            results.append(await self._clean_one(pid))
        op.stage("mutation.committed")
        return {"ok": True, "workspaceScope": self.workspace.scope(), "results": results}

    async def _clean_one(self, pid: str) -> dict[str, Any]:
        items = await self.playthroughs.all()
        item = next((i for i in items if i.id == pid), None)
        if item is None:
            return {"id": pid, "status": "preserved", "reason": "not-found"}
        inspected = await self._inspect(item, items)
        if not inspected["cleanable"]:
            return {"id": pid, "status": "preserved", "reason": inspected["reason"]}
        backup = f"{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(4)}"
        folder = item.row["path"].rsplit("/", 1)[0]
        record = {
            "schemaVersion": 1,
            "backupId": backup,
            "playthroughId": pid,
            "path": folder,
            "row": item.row,
            "createdAt": _now(),
            "state": "pending",
        }
        base = f"{TRASH_DIR}/{backup}"
        await self.workspace.write(f"{base}/{RECORD_FILE}", json.dumps(record, indent=2))

        def drop(doc: dict[str, Any] | None) -> dict[str, Any] | None:
            if doc is None:
                return None
            rows = [r for r in doc["playthroughs"] if r["id"] != pid]
            return None if len(rows) == len(doc["playthroughs"]) else {**doc, "playthroughs": rows}

        try:
            await self.workspace.update(CATALOG_PATH, drop)
        except PlayError as exc:
            return {"id": pid, "status": "failed", "reason": exc.code, "backupId": backup}
        jail = self.workspace.jail()
        try:
            async with self.workspace.guard(folder):
                await asyncio.to_thread(
                    _move, jail, split_relative(folder), split_relative(f"{base}/files")
                )
        except PlayError as exc:
            return {
                "id": pid,
                "status": "recovery-required",
                "reason": exc.code,
                "backupId": backup,
            }
        record["state"] = "cleaned"
        await self.workspace.write(f"{base}/{RECORD_FILE}", json.dumps(record, indent=2))
        return {"id": pid, "status": "cleaned", "backupId": backup}

    # -- restore ---------------------------------------------------------------------------------
    async def restore(self, body: dict[str, Any], op: Operation) -> dict[str, Any]:
        ids = self._ids(body.get("ids"))
        self._scope(body.get("workspaceScope"))
        op.stage("request.validated")
        results = [await self._restore_one(backup) for backup in ids]
        op.stage("mutation.committed")
        return {"ok": True, "workspaceScope": self.workspace.scope(), "results": results}

    async def _restore_one(self, backup: str) -> dict[str, Any]:
        base = f"{TRASH_DIR}/{backup}"
        try:
            split_relative(base)
            found = await self.workspace.read(f"{base}/{RECORD_FILE}")
            record = json.loads(found.content)
        except (PlayError, ValueError):
            return {"id": backup, "status": "failed", "reason": "backup-not-found"}
        row, folder = record.get("row"), record.get("path")
        if not isinstance(row, dict) or not isinstance(folder, str):
            return {"id": backup, "status": "failed", "reason": "record-invalid"}
        jail = self.workspace.jail()
        files = await self.workspace.read_optional_dir(f"{base}/files")
        if files:
            try:
                async with self.workspace.guard(folder):
                    await asyncio.to_thread(
                        _move, jail, split_relative(f"{base}/files"), split_relative(folder)
                    )
            except PlayError as exc:
                return {"id": backup, "status": "preserved", "reason": exc.code}
        conflict: dict[str, str] = {}

        def merge(doc: dict[str, Any] | None) -> dict[str, Any] | None:
            doc = doc or {"playthroughs": []}
            same = next((r for r in doc["playthroughs"] if r["id"] == row["id"]), None)
            if same is not None:
                if same != row:
                    conflict["reason"] = PLAY_CLEANUP_CONFLICT
                return None
            return {**doc, "playthroughs": [*doc["playthroughs"], row]}

        await self.workspace.update(CATALOG_PATH, merge)
        if conflict:
            return {"id": backup, "status": "recovery-required", "reason": conflict["reason"]}
        record["state"] = "restored"
        await self.workspace.write(f"{base}/{RECORD_FILE}", json.dumps(record, indent=2))
        return {"id": backup, "status": "restored", "playthroughId": row["id"]}
