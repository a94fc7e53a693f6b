"""SillyTavern personas as Tavern users.

ST keeps personas in ``settings.json`` under ``power_user``: ``personas`` maps an avatar file name
(in ``User Avatars/``) to the persona's name, ``persona_descriptions`` maps the same key to
``{description, position, depth, role, lorebook, …}`` and ``default_persona`` names the default
avatar. A persona backup (ST's "Backup" button) is the same three keys at the top of a JSON file.
Each persona becomes one portable Tavern user JSON (``formats/user.py``) with its avatar as a
data URI when the image is a raster of at most the user avatar limit; a larger or missing avatar
is noted and the persona imported without it.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from innkeeper_tavern.pure.formats.user import (
    MAX_AVATAR_CHARS,
    MAX_USER_DESCRIPTION_CHARS,
    MAX_USER_NAME_CHARS,
    USER_FORMAT,
    USER_FORMAT_VERSION,
    USER_RESOURCE_TYPE,
)

_MIME = {".png": "png", ".jpg": "jpeg", ".jpeg": "jpeg", ".gif": "gif", ".webp": "webp"}


@dataclass(frozen=True, slots=True)
class Persona:
    """One persona to import: its ST avatar key, the user JSON and a note for the report."""

    key: str
    name: str
    body: bytes
    is_default: bool
    note: str
    lorebook: str = ""


def personas_of(doc: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], str | None]:
    """``(personas, descriptions, default)`` of a settings document or a persona backup."""
    holder = doc.get("power_user") if isinstance(doc.get("power_user"), dict) else doc
    assert isinstance(holder, dict)
    names = holder.get("personas")
    descriptions = holder.get("persona_descriptions")
    default = holder.get("default_persona")
    return (
        names if isinstance(names, dict) else {},
        descriptions if isinstance(descriptions, dict) else {},
        default if isinstance(default, str) else None,
    )


def _avatar(avatars: Path | None, key: str) -> tuple[str | None, str]:
    if avatars is None:
        return None, "no User Avatars folder"
    path = avatars / key
    mime = _MIME.get(path.suffix.lower())
    if mime is None or "/" in key or "\\" in key or not path.is_file():
        return None, f"avatar {key} not found"
    data = path.read_bytes()
    uri = f"data:image/{mime};base64,{base64.b64encode(data).decode()}"
    if len(uri) > MAX_AVATAR_CHARS:
        return None, f"avatar {key} is larger than {MAX_AVATAR_CHARS} bytes as a data URI, left out"
    return uri, ""


def build_personas(doc: dict[str, Any], avatars: Path | None) -> list[Persona]:
    """Every persona of ``doc`` as a Tavern user import body, in ST's order."""
    names, descriptions, default = personas_of(doc)
    out: list[Persona] = []
    for key, raw_name in names.items():
        name = (raw_name if isinstance(raw_name, str) else "").strip() or Path(key).stem or "User"
        info = descriptions.get(key)
        description = info.get("description", "") if isinstance(info, dict) else ""
        if not isinstance(description, str):
            description = ""
        avatar, note = _avatar(avatars, key)
        data: dict[str, Any] = {
            "name": name[:MAX_USER_NAME_CHARS],
            "description": description[:MAX_USER_DESCRIPTION_CHARS],
        }
        if avatar is not None:
            data["avatar"] = avatar
        envelope = {
            "format": USER_FORMAT,
            "version": USER_FORMAT_VERSION,
            "resourceType": USER_RESOURCE_TYPE,
            "data": data,
        }
        body = json.dumps(envelope, ensure_ascii=False).encode()
        lorebook = info.get("lorebook", "") if isinstance(info, dict) else ""
        lorebook = lorebook if isinstance(lorebook, str) else ""
        out.append(Persona(key, data["name"], body, key == default, note, lorebook))
    return out


def persona_backup(
    users: list[tuple[str, str, str | None, str | None]], default: str | None
) -> bytes:
    """An ST persona backup of ``(avatar key, name, description, lorebook)`` rows (the lorebook
    is the name of a world in ``worlds/``, as ST's ``persona_descriptions[key].lorebook``)."""
    descriptions: dict[str, dict[str, Any]] = {}
    for key, _, description, lorebook in users:
        descriptions[key] = {"description": description or "", "position": 0}
        if lorebook:
            descriptions[key]["lorebook"] = lorebook
    doc = {
        "personas": {key: name for key, name, _, _ in users},
        "persona_descriptions": descriptions,
        "default_persona": default,
    }
    return json.dumps(doc, ensure_ascii=False, indent=2).encode()
