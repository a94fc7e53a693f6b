"""Playthroughs back to SillyTavern chats: ``chats/<card file>/<title>.jsonl``.

A chat file is a header line (``user_name``, ``character_name``, ``create_date``,
``chat_metadata``) and one line per message. Each playthrough of the bound workspace becomes
one (a group playthrough is written with its group: group_export.py):

* a playthrough imported from SillyTavern starts with its original chat, verbatim (the pieces
  ``original-NNN.jsonl`` joined), so unknown fields, swipes and broken lines come back as they
  were; any other playthrough starts with a header and the card's greeting;
* then the playthrough's **active path**: from the timeline's ``head`` back through each node's
  parent variant (a flat timeline: every node's adopted variant, in order). Each node is the
  user's message and the reply, whose ``swipes`` are the replies of all the node's variants (the
  alternatives Innkeeper keeps as branches) with ``swipe_id`` pointing at the one on the path —
  the way SillyTavern stores a message's swipes.

The chat folder is named after the card's exported file (SillyTavern finds a character's chats by
its avatar's file name), else after the card's name.
"""

from __future__ import annotations

import asyncio
import json
import posixpath
import urllib.parse
from pathlib import Path
from typing import Any, Final

from innkeeper_tavern.features.migration.backends import Backend, CommandError, OnlineBackend
from innkeeper_tavern.features.migration.output import safe_file_name
from innkeeper_tavern.pure.api_paths import V1_PREFIX, V2_PREFIX

from .play_import import segment
from .report import Item

#: What a header says when Innkeeper knows no date (ST's own ``create_date`` format).
_NO_DATE: Final = "1970-01-01@00h00m00s"


def _line(doc: dict[str, Any]) -> str:
    return json.dumps(doc, ensure_ascii=False)


def active_path(timeline: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """``(node, variant)`` of every node on the timeline's active path, oldest first."""
    nodes = [n for n in timeline.get("nodes", []) if isinstance(n, dict)]
    owner: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
    for node in nodes:
        for variant in node.get("variants", []):
            if isinstance(variant, dict):
                owner[str(variant.get("id"))] = (node, variant)

    def adopted(node: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]] | None:
        return owner.get(str(node.get("adoptedVariantId")))

    head = timeline.get("head")
    tree = isinstance(head, dict) or any(n.get("parentVariantId") for n in nodes)
    if not tree:
        return [pair for pair in (adopted(n) for n in nodes) if pair is not None]
    start = owner.get(str(head.get("variantId"))) if isinstance(head, dict) else None
    if start is None and nodes:
        start = adopted(nodes[-1])
    path: list[tuple[dict[str, Any], dict[str, Any]]] = []
    seen: set[str] = set()
    while start is not None and str(start[1].get("id")) not in seen:
        seen.add(str(start[1].get("id")))
        path.append(start)
        parent = start[0].get("parentVariantId")
        start = owner.get(str(parent)) if parent else None
    return path[::-1]


class Reader:
    """Reads the workspace and sessions through one host, caching each session's messages."""

    def __init__(self, backend: OnlineBackend) -> None:
        self.backend = backend
        self._messages: dict[str, list[dict[str, Any]]] = {}

    async def file(self, path: str) -> str | None:
        query = urllib.parse.urlencode({"path": path})
        status, doc = await self.backend.request_json("GET", f"{V2_PREFIX}/workspace/files?{query}")
        return str(doc["content"]) if status == 200 else None

    async def messages(self, session_id: str) -> list[dict[str, Any]]:
        if session_id not in self._messages:
            quoted = urllib.parse.quote(session_id, safe="")
            status, doc = await self.backend.request_json(
                "GET", f"{V2_PREFIX}/sessions/{quoted}/messages"
            )
            if status != 200:
                raise CommandError(f"{doc.get('code')}: reading session {session_id}")
            self._messages[session_id] = list(doc.get("messages", []))
        return self._messages[session_id]

    async def turn(self, variant: dict[str, Any]) -> tuple[str, str]:
        """The user's text and the reply of one variant (its event range in its session)."""
        low, high = int(variant.get("startEventId", 0)), int(variant.get("endEventId", -1))
        inside = [
            m
            for m in await self.messages(str(variant.get("sessionId")))
            if low <= int(m.get("seq", -1)) <= high
        ]
        user = next((m for m in inside if m.get("role") == "user"), None)
        replies = [
            str(m.get("text", ""))
            for m in inside
            if m.get("role") == "assistant" and not m.get("incompleteTurn")
        ]
        return (str(user.get("text", "")) if user else ""), "\n\n".join(replies)

    async def json_of(self, path: str) -> Any:
        status, doc = await self.backend.request_json("GET", path)
        return doc if status == 200 else {}


async def persona_name(reader: Reader, session_id: object) -> str:
    """The name of the persona ``session_id`` plays as (``"User"`` when it has none)."""
    if isinstance(session_id, str):
        query = urllib.parse.urlencode({"sessionId": session_id})
        persona = (await reader.json_of(f"{V1_PREFIX}/user-selection?{query}")).get("user")
        if isinstance(persona, dict) and persona.get("name"):
            return str(persona["name"])
    return "User"


async def _opening(reader: Reader, row: dict[str, Any], names: tuple[str, str]) -> str:
    """The chat's first lines: the imported original, else a header and the card's greeting."""
    ext = row.get("ext", {})
    parts = ext.get("innkeeperImport", {}).get("originalParts")
    if isinstance(parts, int) and parts > 0:
        base = posixpath.dirname(str(row.get("path", "")))
        pieces = [await reader.file(f"{base}/original-{n:03d}.jsonl") for n in range(1, parts + 1)]
        if all(p is not None for p in pieces):
            text = "".join(p for p in pieces if p is not None)
            return text if text.endswith("\n") or not text else text + "\n"
    user_name, character_name = names
    header = {
        "user_name": user_name,
        "character_name": character_name,
        "create_date": _NO_DATE,
        "chat_metadata": {},
    }
    lines = [_line(header)]
    card_id = ext.get("pmpDshTavern", {}).get("characterId")
    if isinstance(card_id, str):
        card = (await reader.json_of(f"{V1_PREFIX}/characters/{card_id}")).get("character", {})
        data = card.get("data", {}) if isinstance(card, dict) else {}
        greeting = data.get("firstMessage")  # the card as GET /characters/:id serves it
        if isinstance(greeting, str) and greeting:
            message = {"name": character_name, "is_user": False, "mes": greeting}
            lines.append(_line({**message, "swipes": [greeting], "swipe_id": 0}))
    return "\n".join(lines) + "\n"


async def chat_text(reader: Reader, row: dict[str, Any]) -> str:
    """One playthrough as the text of a SillyTavern chat file (module docstring)."""
    tavern = row.get("ext", {}).get("pmpDshTavern", {})
    character_name = str(tavern.get("characterName") or row.get("title") or "Character")
    user_name = await persona_name(reader, tavern.get("rootSessionId"))
    text = await _opening(reader, row, (user_name, character_name))
    timeline_text = await reader.file(str(row.get("path", "")))
    timeline = json.loads(timeline_text) if timeline_text else {}
    lines: list[str] = []
    for node, chosen in active_path(timeline if isinstance(timeline, dict) else {}):
        variants = [v for v in node.get("variants", []) if isinstance(v, dict)]
        user, reply = await reader.turn(chosen)
        swipes = [reply if v is chosen else (await reader.turn(v))[1] for v in variants]
        lines.append(_line({"name": user_name, "is_user": True, "is_system": False, "mes": user}))
        message = {"name": character_name, "is_user": False, "is_system": False, "mes": reply}
        index = next(i for i, v in enumerate(variants) if v is chosen)
        lines.append(_line({**message, "swipes": swipes, "swipe_id": index}))
    return text + "".join(f"{line}\n" for line in lines)


async def export_chats(backend: Backend, out: Path, stems: dict[str, str]) -> list[Item]:
    """Write every playthrough of the bound workspace; one item per playthrough."""
    if not isinstance(backend, OnlineBackend):
        reason = "playthroughs are exported through a host (this command could not start one)"
        return [Item("chat", "playthroughs", "unsupported", reason)]
    reader = Reader(backend)
    catalog_text = await reader.file("catalog.json")
    if catalog_text is None:
        return []  # no workspace bound, or no playthrough yet
    rows = [r for r in json.loads(catalog_text).get("playthroughs", []) if isinstance(r, dict)]
    items: list[Item] = []
    used: dict[Path, set[str]] = {}
    for row in rows:
        playthrough_id = str(row.get("id"))
        tavern = row.get("ext", {}).get("pmpDshTavern", {})
        if "groupId" in tavern:
            continue  # a group chat: exported with its group (groups.py)
        card_id = str(tavern.get("characterId"))
        folder = out / "chats" / stems.get(card_id, segment(str(tavern.get("characterName", ""))))
        try:
            text = await chat_text(reader, row)
        except (CommandError, ValueError, TypeError) as exc:
            items.append(Item("chat", playthrough_id, "refused", str(exc), playthrough_id))
            continue
        folder.mkdir(parents=True, exist_ok=True)
        names = used.setdefault(folder, {p.name.lower() for p in folder.iterdir()})
        path = folder / safe_file_name(f"{row.get('title') or playthrough_id}.jsonl", names)
        await asyncio.to_thread(path.write_text, text, encoding="utf-8")
        items.append(Item("chat", playthrough_id, "imported", str(path), playthrough_id))
    return items
