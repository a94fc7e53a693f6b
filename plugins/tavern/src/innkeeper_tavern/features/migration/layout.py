"""Recognize a SillyTavern user data folder (``SillyTavern/data/<user>/``).

What is read: ``characters/`` (PNG/JSON cards), ``chats/<card file stem>/*.jsonl``,
``worlds/*.json``, ``OpenAI Settings/*.json`` (Chat Completion presets), ``settings.json``
(personas, global regex scripts), ``regex/*.json`` (exported regex scripts, taken as global),
``User Avatars/`` (persona avatars) and persona backups (``*.json`` with ``personas`` at the top
of the folder or in ``backups/``). What is noted but not imported: ``group chats/`` and
``groups/`` (group chats), the other API's preset folders and ``themes/`` (ignored).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

#: Folders SillyTavern keeps that Innkeeper does not import, with the reason shown.
UNSUPPORTED_DIRS: Final = {
    "group chats": "group chats are not supported yet",
    "groups": "group definitions are not supported yet",
    "KoboldAI Settings": "KoboldAI presets (only Chat Completion presets are imported)",
    "NovelAI Settings": "NovelAI presets (only Chat Completion presets are imported)",
    "TextGen Settings": "Text Completion presets (only Chat Completion presets are imported)",
    "instruct": "instruct templates are Text Completion only",
    "context": "context templates are Text Completion only",
    "sysprompt": "system prompt presets are Text Completion only",
    "QuickReplies": "Quick Replies are a SillyTavern UI extension",
    "themes": "themes are ignored",
    "backgrounds": "backgrounds are ignored",
}
#: Largest ``settings.json`` read (ST's own grows with extension settings; 32 MiB is generous).
MAX_SETTINGS_BYTES: Final = 32 << 20


@dataclass(slots=True)
class StFolder:
    """The files of one SillyTavern user folder, sorted."""

    root: Path
    cards: list[Path] = field(default_factory=list)
    worlds: list[Path] = field(default_factory=list)
    presets: list[Path] = field(default_factory=list)
    chats: list[Path] = field(default_factory=list)
    persona_backups: list[Path] = field(default_factory=list)
    regex_files: list[Path] = field(default_factory=list)
    avatars_dir: Path | None = None
    settings: Path | None = None
    unsupported: list[tuple[Path, str]] = field(default_factory=list)

    def chat_owner(self, chat: Path) -> str:
        """The card file stem a chat belongs to (its folder under ``chats/``)."""
        return chat.parent.name


def is_st_folder(path: Path) -> bool:
    """Whether ``path`` looks like a SillyTavern user data folder."""
    if not path.is_dir():
        return False
    names = ("characters", "chats", "worlds", "OpenAI Settings", "User Avatars")
    marks = [(path / name).is_dir() for name in names]
    return ((path / "settings.json").is_file() and any(marks)) or sum(marks) >= 2


def _files(folder: Path, suffixes: tuple[str, ...], *, recursive: bool = False) -> list[Path]:
    if not folder.is_dir():
        return []
    found = folder.rglob("*") if recursive else folder.iterdir()
    return sorted(
        p
        for p in found
        if p.is_file() and p.name.lower().endswith(suffixes) and not p.name.startswith(".")
    )


def _is_persona_backup(path: Path) -> bool:
    try:
        if path.stat().st_size > MAX_SETTINGS_BYTES:
            return False
        doc = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and isinstance(doc.get("personas"), dict)


def scan(root: Path) -> StFolder:
    """Every file of ``root`` that an import reads or reports."""
    folder = StFolder(root=root)
    folder.cards = _files(root / "characters", (".png", ".json"))
    folder.worlds = _files(root / "worlds", (".json",))
    folder.presets = _files(root / "OpenAI Settings", (".json",))
    folder.regex_files = _files(root / "regex", (".json",))
    folder.chats = [
        p for p in _files(root / "chats", (".jsonl",), recursive=True) if p.parent != root / "chats"
    ]
    if (root / "settings.json").is_file():
        folder.settings = root / "settings.json"
    if (root / "User Avatars").is_dir():
        folder.avatars_dir = root / "User Avatars"
    candidates = _files(root, (".json",)) + _files(root / "backups", (".json",))
    folder.persona_backups = [
        p for p in candidates if p.name != "settings.json" and _is_persona_backup(p)
    ]
    for name, reason in UNSUPPORTED_DIRS.items():
        path = root / name
        if path.is_dir():
            count = sum(1 for p in path.rglob("*") if p.is_file())
            if count:
                folder.unsupported.append((path, f"{reason} ({count} file(s))"))
    return folder


def read_settings(path: Path) -> dict[str, Any]:
    """``settings.json`` as an object (``{}`` when unreadable; the caller reports it)."""
    if path.stat().st_size > MAX_SETTINGS_BYTES:
        raise ValueError(f"settings.json is larger than {MAX_SETTINGS_BYTES} bytes")
    doc = json.loads(path.read_bytes())
    if not isinstance(doc, dict):
        raise ValueError("settings.json is not a JSON object")
    return doc
