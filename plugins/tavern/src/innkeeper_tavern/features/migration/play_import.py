"""A chat as a playthrough, through the running server's public v2 routes (docs/play.md).

Per chat: a new play session with the card bound (and the persona named by the chat's
``user_name``, else the default persona; and the chat's own lorebook, ``chat_metadata.world_info``,
as the session's world book), a playthrough directory
``<card>/import-<hash>/`` holding the original chat (verbatim, in pieces) and
``import-context.json``, an empty ``timeline.json``, the import context bound to the session
(``pending`` until its first real turn) and a catalog row whose id is derived from the chat's
content hash — so a re-run finds the row and skips the chat.

The catalog rows are written in batches (:meth:`PlayImporter.add_rows`), not one catalog rewrite
per chat: the catalog grows with every row, and the card binding's conflict check reads every
playthrough of the catalog, so per-chat rows made a folder import quadratic. Until its row is
written a chat is ``pending`` in the ledger with its session recorded, so a run killed in between
adopts that session and finishes it (``ledger.py``).
"""

from __future__ import annotations

import hashlib
import json
import re
import urllib.parse
from pathlib import Path
from typing import Any, Final

from innkeeper_tavern.features.migration.backends import (
    CommandError,
    OnlineBackend,
    problem_message,
)
from innkeeper_tavern.pure.api_paths import V1_PREFIX, V2_PREFIX

#: The folder bound as the play workspace when none is bound (inside the Tavern data directory).
DEFAULT_WORKSPACE_DIR: Final = "play-workspace"
_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._-]+")


def segment(name: str) -> str:
    """A safe workspace path segment for a card's folder."""
    cleaned = _UNSAFE.sub("_", name).strip("._-")[:80]
    return cleaned if cleaned and cleaned[0].isalnum() else f"c{cleaned}"[:80] or "character"


class BindingsFull(CommandError):
    """The server keeps as many import-context bindings as it can (65,536; consumed bindings
    stay): no further chat can be bound."""


def _fail(status: int, doc: dict[str, Any], what: str) -> CommandError:
    return CommandError(f"{doc.get('code', f'HTTP_{status}')}: {what}: {problem_message(doc)}")


class PlayImporter:
    """Writes playthroughs through one online backend."""

    def __init__(self, backend: OnlineBackend) -> None:
        self.backend = backend
        self.rows: set[str] | None = None
        #: The catalog as this importer last wrote it (its revision is the SHA-256 of the bytes
        #: sent), so consecutive chats skip a read; a conflict drops it and rereads.
        self._cached: tuple[str | None, dict[str, Any]] | None = None

    async def _v2(self, method: str, path: str, body: Any = None) -> tuple[int, dict[str, Any]]:
        return await self.backend.request_json(method, f"{V2_PREFIX}{path}", body)

    async def ensure_workspace(self, tavern_dir: Path, *, dry_run: bool) -> str:
        """The bound workspace root; binds ``<tavern dir>/play-workspace`` when none is."""
        status, doc = await self._v2("GET", "/workspace")
        if status == 200 and doc.get("selected") and isinstance(doc.get("rootPath"), str):
            return str(doc["rootPath"])
        root = (tavern_dir / DEFAULT_WORKSPACE_DIR).resolve()
        if dry_run:
            return f"{root} (would be bound)"
        root.mkdir(parents=True, exist_ok=True)
        status, doc = await self._v2("PUT", "/workspace", {"path": str(root)})
        if status != 200:
            raise _fail(status, doc, "binding the play workspace")
        return str(root)

    async def _catalog(self) -> tuple[str | None, dict[str, Any]]:
        if self._cached is not None:
            revision, catalog = self._cached
            return revision, json.loads(json.dumps(catalog))
        query = urllib.parse.urlencode({"path": "catalog.json"})
        status, doc = await self._v2("GET", f"/workspace/files?{query}")
        if status == 404 and doc.get("code") == "PLAY_PATH_NOT_FOUND":
            return None, {"playthroughs": [], "ext": {}}
        if status != 200:
            raise _fail(status, doc, "reading catalog.json")
        return str(doc["revision"]), json.loads(doc["content"])

    async def existing(self) -> set[str]:
        """Ids of the catalog's playthroughs (read once per run)."""
        if self.rows is None:
            _, catalog = await self._catalog()
            self.rows = {str(r.get("id")) for r in catalog.get("playthroughs", [])}
        return self.rows

    async def roots(self) -> set[str]:
        """The root session of every playthrough in the catalog."""
        _, catalog = await self._catalog()
        return {
            str(r.get("ext", {}).get("pmpDshTavern", {}).get("rootSessionId"))
            for r in catalog.get("playthroughs", [])
            if isinstance(r, dict)
        }

    async def bare_sessions(self) -> tuple[str, list[tuple[str, str, str]]]:
        """The newest session's ``createdAt`` (``""`` with none), and ``(id, title, createdAt)``
        of every root session with no card bound — what an interrupted import may have left
        (all pages)."""
        newest = ""
        bare: list[tuple[str, str, str]] = []
        cursor: str | None = None
        while True:
            query = urllib.parse.urlencode({"limit": 200, **({"cursor": cursor} if cursor else {})})
            status, doc = await self.backend.request_json("GET", f"/host/api/sessions?{query}")
            if status != 200:
                raise _fail(status, doc, "listing the sessions")
            for row in doc.get("sessions", []):
                header = row.get("header", {})
                created = str(header.get("createdAt") or "")
                newest = max(newest, created)
                tavern = row.get("annotations", {}).get("tavern", {})
                if header.get("parent") is None and not tavern.get("character"):
                    bare.append((str(header.get("id")), str(header.get("title") or ""), created))
            cursor = doc.get("nextCursor")
            if not isinstance(cursor, str) or not cursor:
                return newest, bare

    async def _put(self, path: str, content: str, **extra: Any) -> tuple[int, dict[str, Any]]:
        query = urllib.parse.urlencode({"path": path})
        return await self._v2("PUT", f"/workspace/files?{query}", {"content": content, **extra})

    async def open_session(self, adopt: str | None, title: str) -> tuple[str, bool]:
        """The chat's root session: ``adopt`` (the session an interrupted run created for this
        chat, from the ledger) when it still exists, else a new one; ``(id, adopted)``."""
        if adopt is not None:
            quoted = urllib.parse.quote(adopt, safe="")
            status, _ = await self.backend.request_json("GET", f"/host/api/sessions/{quoted}")
            if status == 200:
                return adopt, True
        status, doc = await self._v2("POST", "/sessions", {"title": title[:200]})
        if status != 201:
            raise _fail(status, doc, "creating the session")
        return str(doc["sessionId"]), False

    async def prepare_chat(
        self,
        session_id: str,
        *,
        playthrough_id: str,
        folder: str,
        title: str,
        card_id: str,
        card_name: str,
        user_id: str | None,
        world_book_ids: list[str],
        context: str,
        original: list[str],
        source_file: str,
    ) -> dict[str, Any]:
        """Bind the card, persona and import context to ``session_id`` and write the
        playthrough's files; returns its catalog row (for :meth:`add_rows`). Every step can be
        repeated, so a re-run finishes an interrupted chat on the same session."""
        await self._select(session_id, "character-selection", "characterCardId", card_id, "card")
        if user_id is not None:
            await self._select(session_id, "user-selection", "userId", user_id, "persona")
        if world_book_ids:  # the chat's own lorebook (ST chat_metadata.world_info)
            await self._select(
                session_id, "world-book-selection", "worldBookIds", world_book_ids, "lorebook"
            )
        base = f"{segment(folder)}/{playthrough_id}"
        for number, part in enumerate(original, start=1):
            status, doc = await self._put(f"{base}/original-{number:03d}.jsonl", part)
            if status != 200:
                raise _fail(status, doc, "writing the original chat")
        status, doc = await self._put(f"{base}/import-context.json", context)
        if status != 200:
            raise _fail(status, doc, "writing import-context.json")
        status, doc = await self._put(
            f"{base}/timeline.json", json.dumps({"nodes": []}), expectedRevision=None
        )
        if status != 200 and doc.get("code") != "PLAY_FILE_REVISION_CONFLICT":
            raise _fail(status, doc, "writing timeline.json")
        status, doc = await self._v2(
            "PUT",
            f"/sessions/{urllib.parse.quote(session_id, safe='')}/import-context",
            {"reference": {"path": f"{base}/import-context.json"}},
        )
        if status == 413 and doc.get("code") == "PLAY_STORAGE_LIMIT":
            raise BindingsFull(
                "PLAY_STORAGE_LIMIT: the server's import-context bindings are full (65,536 "
                "imported chats per data directory)"
            )
        if status != 200:
            raise _fail(status, doc, "binding the import context")
        return {
            "id": playthrough_id,
            "path": f"{base}/timeline.json",
            "title": title[:200],
            "ext": {
                "pmpDshTavern": {
                    "characterId": card_id,
                    "characterName": card_name[:200],
                    "rootSessionId": session_id,
                    "importContextPath": f"{base}/import-context.json",
                },
                "innkeeperImport": {"source": source_file, "originalParts": len(original)},
            },
        }

    async def _select(self, session_id: str, route: str, field: str, value: Any, what: str) -> None:
        body = {"sessionId": session_id, field: value}
        status, doc = await self.backend.request_json("POST", f"{V1_PREFIX}/{route}", body)
        if status != 200:
            raise _fail(status, doc, f"binding the {what}")

    async def add_rows(self, rows: list[dict[str, Any]]) -> None:
        """Append the playthroughs' catalog rows in one write (rows already there are kept)."""
        if rows:
            await self._append_rows(rows)

    async def _append_rows(self, new: list[dict[str, Any]]) -> None:
        for _ in range(8):  # replay the intent on a CAS conflict
            revision, catalog = await self._catalog()
            rows = catalog.setdefault("playthroughs", [])
            have = {r.get("id") for r in rows}
            missing = [row for row in new if row["id"] not in have]
            if not missing:
                return
            rows.extend(missing)
            catalog.setdefault("ext", {})
            content = json.dumps(catalog, ensure_ascii=False)
            status, doc = await self._put("catalog.json", content, expectedRevision=revision)
            if status == 200:
                if self.rows is not None:
                    self.rows.update(row["id"] for row in missing)
                sent = hashlib.sha256(content.encode()).hexdigest()
                answered = doc.get("revision")
                self._cached = (answered if isinstance(answered, str) else sent, catalog)
                return
            self._cached = None
            if doc.get("code") != "PLAY_FILE_REVISION_CONFLICT":
                raise _fail(status, doc, "writing catalog.json")
        raise CommandError("PLAY_FILE_REVISION_CONFLICT: catalog.json keeps changing")
