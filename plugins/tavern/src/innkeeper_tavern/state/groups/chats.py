"""``GroupChatStore``: a group's SillyTavern group chats, kept as their files.

``<plugin data>/group-chats/<group id>/<chat name, percent-encoded>.jsonl``, bytes as imported,
so an export gives every line back as it was (unknown fields, swipes, broken lines). Writes go
through a temp file and a rename; a chat is at most :data:`MAX_GROUP_CHAT_BYTES` and a group has
at most :data:`MAX_CHATS_PER_GROUP`. Deleting a group deletes its chats.
"""

from __future__ import annotations

import asyncio
import shutil
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from innkeeper_tavern.pure.groups.model import GROUP_INVALID, GroupError
from innkeeper_tavern.pure.groups.st_format import summarize_chat
from innkeeper_tavern.state.session_bindings.files import FileTooLarge, atomic_write, read_limited

CHATS_DIR: Final = "group-chats"
#: Largest group chat kept (a 10,000-message chat with long swipes stays far below it).
MAX_GROUP_CHAT_BYTES: Final = 64 << 20
MAX_CHATS_PER_GROUP: Final = 1000
MAX_CHAT_NAME_CHARS: Final = 200
#: Group chat too large (413), and a chat name that is not stored (404).
GROUP_CHAT_TOO_LARGE: Final = "GROUP_CHAT_TOO_LARGE"
GROUP_CHAT_NOT_FOUND: Final = "GROUP_CHAT_NOT_FOUND"
GROUP_CHAT_LIMIT_REACHED: Final = "GROUP_CHAT_LIMIT_REACHED"
_SAFE: Final = " @-_.()[],+"
#: Longest file name written (most file systems stop at 255 bytes).
MAX_FILE_NAME_BYTES: Final = 240


@dataclass(frozen=True, slots=True)
class ChatInfo:
    """A stored group chat: its name, size, messages, swipes and speakers' avatars."""

    name: str
    size: int
    messages: int
    swipes: int
    speakers: list[str]

    def wire(self) -> dict[str, object]:
        """The JSON the routes answer."""
        return {
            "name": self.name,
            "sizeBytes": self.size,
            "messageCount": self.messages,
            "swipeCount": self.swipes,
            "speakers": self.speakers,
        }


def check_chat_name(name: str) -> str:
    """A chat name: 1–200 characters, no control characters, not ``.``-led."""
    if (
        not name
        or len(name) > MAX_CHAT_NAME_CHARS
        or name.startswith(".")
        or any(ord(ch) < 32 or ch in "/\\" for ch in name)
    ):
        raise GroupError(400, GROUP_INVALID, "a chat name is 1-200 characters without / or \\")
    if len(_file(name).encode()) > MAX_FILE_NAME_BYTES:
        raise GroupError(400, GROUP_INVALID, "the chat name is too long to be a file name")
    return name


def _file(name: str) -> str:
    return urllib.parse.quote(name, safe=_SAFE) + ".jsonl"


class GroupChatStore:
    """Group chats under ``<root>/group-chats/``; ``exists(group_id)`` says a group is stored."""

    def __init__(self, root: Path) -> None:
        self.root = root / CHATS_DIR
        self.lock = asyncio.Lock()

    def _folder(self, group_id: str) -> Path:
        return self.root / group_id

    def _info(self, path: Path, data: bytes) -> ChatInfo:
        summary = summarize_chat(data.decode("utf-8", "replace"))
        return ChatInfo(
            name=urllib.parse.unquote(path.name[: -len(".jsonl")]),
            size=len(data),
            messages=summary.messages,
            swipes=summary.swipes,
            speakers=sorted(summary.speakers),
        )

    def _list(self, group_id: str) -> list[ChatInfo]:
        folder = self._folder(group_id)
        if not folder.is_dir():
            return []
        out = []
        for path in sorted(folder.glob("*.jsonl")):
            if path.name.startswith("."):
                continue
            data = read_limited(path, MAX_GROUP_CHAT_BYTES)
            if data is not None:
                out.append(self._info(path, data))
        return out

    async def list(self, group_id: str) -> list[ChatInfo]:
        """The group's chats, by name."""
        return await asyncio.to_thread(self._list, group_id)

    async def read(self, group_id: str, name: str) -> bytes:
        """A chat's bytes as stored; 404 ``GROUP_CHAT_NOT_FOUND`` when there is none."""
        path = self._folder(group_id) / _file(check_chat_name(name))
        try:
            data = await asyncio.to_thread(read_limited, path, MAX_GROUP_CHAT_BYTES)
        except FileTooLarge:
            data = None
        if data is None:
            raise GroupError(404, GROUP_CHAT_NOT_FOUND, f"group chat {name[:100]!r} does not exist")
        return data

    async def put(self, group_id: str, name: str, data: bytes) -> tuple[ChatInfo, bool]:
        """Store (or replace) a chat; ``True`` when it is new. The text must be UTF-8."""
        check_chat_name(name)
        if len(data) > MAX_GROUP_CHAT_BYTES:
            raise GroupError(
                413, GROUP_CHAT_TOO_LARGE, f"a group chat is at most {MAX_GROUP_CHAT_BYTES} bytes"
            )
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            raise GroupError(400, GROUP_INVALID, "a group chat must be UTF-8 text") from None
        folder = self._folder(group_id)
        path = folder / _file(name)
        async with self.lock:
            fresh = not path.exists()
            if fresh and len(await self.list(group_id)) >= MAX_CHATS_PER_GROUP:
                raise GroupError(
                    409,
                    GROUP_CHAT_LIMIT_REACHED,
                    f"a group has at most {MAX_CHATS_PER_GROUP} chats",
                )
            await asyncio.to_thread(folder.mkdir, parents=True, exist_ok=True)
            await asyncio.to_thread(atomic_write, path, data)
        return self._info(path, data), fresh

    async def delete(self, group_id: str, name: str) -> None:
        """Remove one chat (404 when there is none)."""
        path = self._folder(group_id) / _file(check_chat_name(name))
        if not path.is_file():
            raise GroupError(404, GROUP_CHAT_NOT_FOUND, f"group chat {name[:100]!r} does not exist")
        await asyncio.to_thread(path.unlink)

    async def drop_group(self, group_id: str) -> None:
        """Remove every chat of a deleted group."""
        folder = self._folder(group_id)
        if folder.is_dir():
            await asyncio.to_thread(shutil.rmtree, folder, True)


__all__ = [
    "CHATS_DIR",
    "GROUP_CHAT_LIMIT_REACHED",
    "GROUP_CHAT_NOT_FOUND",
    "GROUP_CHAT_TOO_LARGE",
    "MAX_GROUP_CHAT_BYTES",
    "ChatInfo",
    "GroupChatStore",
    "check_chat_name",
]
