"""``innkeeper export sillytavern --out DIR``: the library as a folder SillyTavern can read.

Layout (the same one ``innkeeper import DIR`` reads back): ``characters/<name>.png`` (PNG cards
with ``chara`` and ``ccv3``), ``worlds/<name>.json`` (ST world-book JSON), ``OpenAI
Settings/<name>.json`` (Chat Completion presets) and ``personas.json``, an ST persona backup of
every Tavern user (restore it with ST's persona "Restore" button; a persona's first world-book
relation is its ``lorebook``, by the name of its file in ``worlds/``), with the avatars in ``User
Avatars/``, every playthrough as a chat ``chats/<card file>/<title>.jsonl``
(``export_chats``), and every group as ``groups/<id>.json`` with its chats in ``group
chats/<name>.jsonl`` (``groups``). Names are made safe and unique per folder (``name (2).ext``).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import re
from pathlib import Path
from typing import Final

from innkeeper_tavern.features.migration.backends import Backend, CommandError, ExportKind
from innkeeper_tavern.features.migration.output import safe_file_name

from .export_chats import export_chats
from .groups import export_groups
from .personas import persona_backup
from .report import Item
from .run import book_ids

FOLDERS: Final[tuple[tuple[ExportKind, str, str], ...]] = (
    ("characters", "characters", "png"),
    ("world-books", "worlds", "json"),
    ("presets", "OpenAI Settings", "json"),
)
_DATA_URI: Final = re.compile(r"^data:image/(png|jpeg|gif|webp|avif|bmp);base64,(.*)$", re.S)
_EXT: Final = {"jpeg": "jpg"}


async def export_folder(backend: Backend, out: Path) -> list[Item]:
    """Write the library into ``out``; one item per exported (or failed) resource."""
    items: list[Item] = []
    #: Resource id → the stem of the file it was written to (ST names worlds and a card's chat
    #: folder by file name).
    stems: dict[str, str] = {}
    for kind, folder, fmt in FOLDERS:
        target = out / folder
        target.mkdir(parents=True, exist_ok=True)
        used = {p.name.lower() for p in target.iterdir()}
        for resource_id in await backend.list_ids(kind):
            try:
                data, name = await backend.export(kind, resource_id, fmt)
            except CommandError as exc:
                items.append(Item(kind, resource_id, "refused", str(exc), resource_id))
                continue
            path = target / safe_file_name(name, used)
            await asyncio.to_thread(path.write_bytes, data)
            stems[resource_id] = path.stem
            items.append(Item(kind, resource_id, "imported", str(path), resource_id))
    items.extend(await _personas(backend, out, stems))
    items.extend(await export_chats(backend, out, stems))
    items.extend(await export_groups(backend, out, stems))
    return items


async def _personas(backend: Backend, out: Path, stems: dict[str, str]) -> list[Item]:
    rows: list[tuple[str, str, str | None, str | None]] = []
    items: list[Item] = []
    used: set[str] = set()
    avatars = out / "User Avatars"
    for user_id in await backend.list_ids("users"):
        try:
            data, _ = await backend.export("users", user_id, "json")
            user = json.loads(data)["data"]
        except (CommandError, ValueError, KeyError, TypeError) as exc:
            items.append(Item("persona", user_id, "refused", str(exc), user_id))
            continue
        name = str(user.get("name", "User"))
        match = _DATA_URI.match(str(user.get("avatar") or ""))
        ext = _EXT.get(match.group(1), match.group(1)) if match else "png"
        key = safe_file_name(f"{name}.{ext}", used)
        if match:
            try:
                image = base64.b64decode(match.group(2), validate=True)
            except binascii.Error:
                image = b""
            if image:
                avatars.mkdir(parents=True, exist_ok=True)
                await asyncio.to_thread((avatars / key).write_bytes, image)
        books = [stems[b] for b in await book_ids(backend, "user", user_id) if b in stems]
        rows.append((key, name, str(user.get("description", "")), books[0] if books else None))
        items.append(Item("persona", user_id, "imported", f"personas.json: {key}", user_id))
    if rows:
        path = out / "personas.json"
        await asyncio.to_thread(path.write_bytes, persona_backup(rows, rows[0][0]))
    return items
