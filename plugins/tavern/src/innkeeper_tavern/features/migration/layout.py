"""Recognize a SillyTavern user data folder (``SillyTavern/data/<user>/``).

What is read: ``characters/`` (PNG/JSON cards), ``chats/<card file stem>/*.jsonl``,
``worlds/*.json``, ``OpenAI Settings/*.json`` (Chat Completion presets), ``settings.json``
(personas, global regex scripts), ``regex/*.json`` (exported regex scripts, taken as global),
``User Avatars/`` (persona avatars), persona backups (``*.json`` with ``personas`` at the top
of the folder or in ``backups/``), ``groups/*.json`` and ``group chats/*.jsonl``. What is noted
but not imported: the other API's preset folders and ``themes/`` (ignored).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from innkeeper_tavern.pure.formats.errors import FormatError, decode_json
from innkeeper_tavern.pure.formats.guards import StructureLimits

#: Folders SillyTavern keeps that Innkeeper does not import, with the reason shown.
UNSUPPORTED_DIRS: Final = {
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
#: ``settings.json`` (or a persona backup) is not a JSON object, or is too large.
ST_SETTINGS_INVALID: Final = "ST_SETTINGS_INVALID"
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
    groups: list[Path] = field(default_factory=list)
    group_chats: list[Path] = field(default_factory=list)
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
    names = ("characters", "chats", "worlds", "OpenAI Settings", "User Avatars", "groups")
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
        # The guarded decoder: json.loads raises RecursionError on deep nesting, not ValueError.
        doc = decode_json(path.read_bytes(), what=path.name, limits=SETTINGS_LIMITS)
    except (OSError, FormatError):
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
    folder.groups = _files(root / "groups", (".json",))
    folder.group_chats = _files(root / "group chats", (".jsonl",))
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


#: The guard of ``settings.json`` and persona backups: SillyTavern keeps every extension's
#: settings there, so far more values and longer strings than a preset, but still bounded (the
#: nesting bound is what keeps the decoder's recursion safe).
SETTINGS_LIMITS: Final = StructureLimits(
    max_nodes=4_000_000, max_string_bytes=MAX_SETTINGS_BYTES, max_int_abs=None
)


def read_settings(path: Path) -> dict[str, Any]:
    """``settings.json`` (or a persona backup) as an object.

    Raises ``FormatError`` naming what is wrong, as every format does (``INVALID_JSON`` for bytes
    that are not UTF-8 JSON, a structure code, ``ST_SETTINGS_INVALID`` at ``$`` for another root
    or a file over :data:`MAX_SETTINGS_BYTES`); the caller reports it.
    """
    if path.stat().st_size > MAX_SETTINGS_BYTES:
        raise FormatError(
            ST_SETTINGS_INVALID, f"{path.name} is larger than {MAX_SETTINGS_BYTES} bytes", 413
        )
    doc = decode_json(path.read_bytes(), what=path.name, limits=SETTINGS_LIMITS)
    if not isinstance(doc, dict):
        raise FormatError(ST_SETTINGS_INVALID, f"{path.name} is not a JSON object")
    return doc
