"""A SillyTavern-shaped user folder built from the corpus plus generated chats (test helper)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

CORPUS = Path(__file__).resolve().parents[4] / "shared" / "sillytavern-corpus"
REPO = CORPUS / "sillytavern-repo"
#: A 1×1 PNG (a persona avatar).
TINY_PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c63f8ffff3f0005fe02fea7d6a4f10000000049454e44ae426082"
)


def _line(doc: dict[str, Any]) -> str:
    return json.dumps(doc, ensure_ascii=False)


def chat_lines(character: str, turns: int, *, cjk: bool = False) -> list[str]:
    """A chat: header, a greeting with swipes, ``turns`` QA pairs with swipes and a system note."""
    lines = [
        _line(
            {
                "user_name": "Mira",
                "character_name": character,
                "create_date": "2024-05-01@10h00m00s",
                "chat_metadata": {"note_prompt": "", "future_field": {"x": 1}},
            }
        ),
        _line(
            {
                "name": character,
                "is_user": False,
                "mes": f"Welcome, traveller. I am {character}.",
                "swipes": [f"Welcome, traveller. I am {character}.", "Another greeting."],
                "swipe_id": 0,
            }
        ),
    ]
    for n in range(turns):
        text = f"第{n}回：你好，{character}！" if cjk else f"question {n}"
        lines.append(_line({"name": "Mira", "is_user": True, "mes": text, "send_date": "x"}))
        lines.append(
            _line(
                {
                    "name": character,
                    "is_user": False,
                    "mes": f"answer {n}",
                    "swipes": [f"discarded {n}", f"answer {n}"],
                    "swipe_id": 1,
                    "unknown_field_from_an_extension": {"keep": True},
                }
            )
        )
        if n == 1:
            lines.append(_line({"name": "System", "is_system": True, "mes": "narrator note"}))
    return lines


#: The two cards of :func:`build` as a SillyTavern group names them (avatar file, name).
GROUP_CAST = (("default_Seraphina.png", "Seraphina"), ("default_CodingSensei.png", "Coding Sensei"))


def group_chat_lines(cast: tuple[tuple[str, str], ...], messages: int) -> list[str]:
    """A SillyTavern group chat (no header line): greetings, then the player and the members
    by turns; every third reply has two swipes, with ``swipe_id`` on the second."""
    lines: list[str] = []
    for at in range(messages):
        if at % 3 == 1:
            lines.append(
                _line(
                    {
                        "name": "Mira",
                        "is_user": True,
                        "send_date": f"2024-05-01@10h{at % 60:02d}m00s",
                        "mes": f"player line {at}",
                        "extra": {},
                    }
                )
            )
            continue
        avatar, name = cast[at % len(cast)]
        doc: dict[str, Any] = {
            "name": name,
            "is_user": False,
            "send_date": f"2024-05-01@10h{at % 60:02d}m00s",
            "mes": f"{name} says {at}",
            "original_avatar": avatar,
            "force_avatar": f"/thumbnail?type=avatar&file={avatar}",
            "extra": {"gen_id": 1700000000000 + at, "api": "openai", "model": "m"},
        }
        if at % 9 == 0:
            doc["swipe_id"] = 1
            doc["swipes"] = [f"{name} first try {at}", doc["mes"]]
            doc["swipe_info"] = [{"send_date": doc["send_date"], "extra": {}}] * 2
        lines.append(_line(doc))
    return lines


def group_file(group_id: str, cast: tuple[str, ...], chats: list[str], **fields: Any) -> str:
    """A SillyTavern group file as ST 1.12 writes it (``/api/groups/create`` then ``/edit``)."""
    doc: dict[str, Any] = {
        "id": group_id,
        "name": "Tea Party",
        "members": list(cast),
        "avatar_url": "",
        "allow_self_responses": False,
        "activation_strategy": 0,
        "generation_mode": 0,
        "disabled_members": [],
        "chat_metadata": {"note_prompt": "keep it short", "note_depth": 4},
        "fav": False,
        "chat_id": chats[0] if chats else group_id,
        "chats": chats,
        "auto_mode_delay": 5,
        "generation_mode_join_prefix": "",
        "generation_mode_join_suffix": "",
        "hideMutedSprites": False,
        "past_metadata": {},
        "date_added": 1700000000000,
        **fields,
    }
    return json.dumps(doc, indent=4)


def build(root: Path, *, big_chat: int = 5000) -> Path:
    """``root`` as ``SillyTavern/data/default-user``; returns it."""
    (root / "characters").mkdir(parents=True)
    shutil.copy(REPO / "staging-1ac6780" / "default_Seraphina.png", root / "characters")
    shutil.copy(CORPUS / "sillytavern-content" / "default_CodingSensei.png", root / "characters")
    (root / "worlds").mkdir()
    shutil.copy(REPO / "staging-1ac6780" / "Eldoria.json", root / "worlds")
    shutil.copy(REPO / "tag-1.0.0" / "Toaru.json", root / "worlds")
    (root / "OpenAI Settings").mkdir()
    shutil.copy(REPO / "tag-1.9.7" / "OpenAI_Default.settings.json", root / "OpenAI Settings")
    shutil.copy(
        CORPUS / "prolix-oc-st-presets" / "presets" / "StoryWeaver v1.1.json",
        root / "OpenAI Settings",
    )
    settings = json.loads((REPO / "staging-1ac6780" / "settings.json").read_text())
    power = settings.setdefault("power_user", {})
    power["personas"] = {"mira.png": "Mira", "scholar.png": "李 Scholar"}
    power["persona_descriptions"] = {
        "mira.png": {"description": "A wandering herbalist.", "position": 0, "lorebook": "Toaru"},
        "scholar.png": {"description": "读书人。", "position": 0},
    }
    power["default_persona"] = "mira.png"
    settings.setdefault("extension_settings", {})["regex"] = [
        {"scriptName": "trim", "findRegex": "/x/g", "replaceString": "", "placement": [2]}
    ]
    (root / "settings.json").write_text(json.dumps(settings))
    (root / "regex").mkdir()
    shutil.copy(
        CORPUS / "prolix-oc-st-presets" / "regex" / "regex-trim_sim_blocks.json", root / "regex"
    )
    (root / "User Avatars").mkdir()
    (root / "User Avatars" / "mira.png").write_bytes(TINY_PNG)
    chats = root / "chats"
    (chats / "default_Seraphina").mkdir(parents=True)
    (chats / "default_CodingSensei").mkdir(parents=True)
    seraphina = chat_lines("Seraphina", 3)
    seraphina.insert(3, "{broken line, not json")
    (chats / "default_Seraphina" / "Seraphina - 2024-05-01@10h00m00s.jsonl").write_text(
        "\n".join(seraphina) + "\n"
    )
    (chats / "default_Seraphina" / "CJK 中文.jsonl").write_text(
        "\n".join(chat_lines("Seraphina", 4, cjk=True)) + "\n"
    )
    (chats / "default_CodingSensei" / "long.jsonl").write_text(
        "\n".join(chat_lines("Coding Sensei", big_chat // 2)) + "\n"
    )
    (root / "groups").mkdir()
    avatars = tuple(a for a, _ in GROUP_CAST)
    (root / "groups" / "1700000000.json").write_text(
        group_file("1700000000", avatars, ["1700000000"], disabled_members=[avatars[1]])
    )
    (root / "group chats").mkdir()
    (root / "group chats" / "1700000000.jsonl").write_text(
        "\n".join(group_chat_lines(GROUP_CAST, 12))
    )
    (root / "themes").mkdir()
    (root / "themes" / "Dark.json").write_text("{}")
    return root


def card_json(name: str, world: str = "") -> bytes:
    """A small V2 JSON card."""
    data = {
        "name": name,
        "description": f"{name} is a test character.",
        "first_mes": f"Hello, I am {name}.",
        "extensions": {"world": world} if world else {},
    }
    return json.dumps({"spec": "chara_card_v2", "spec_version": "2.0", "data": data}).encode()


def many_cards(root: Path, count: int) -> Path:
    """A SillyTavern folder with ``count`` distinct cards, one world and ``settings.json``."""
    (root / "characters").mkdir(parents=True)
    for i in range(count):
        (root / "characters" / f"card{i:04d}.json").write_bytes(card_json(f"Card {i}", "Eldoria"))
    (root / "worlds").mkdir()
    shutil.copy(REPO / "staging-1ac6780" / "Eldoria.json", root / "worlds")
    (root / "settings.json").write_text("{}")
    return root
