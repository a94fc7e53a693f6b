"""SillyTavern chat files (``chats/<card>/<name>.jsonl``) as import-context documents.

A chat file is one JSON object per line: a header (``user_name``, ``character_name``,
``create_date``, ``chat_metadata``) and then one message per line (``name``, ``is_user``,
``is_system``, ``send_date``, ``mes``, ``swipes``, ``swipe_id``, ``extra``, and whatever else a
SillyTavern version or extension wrote). The active path is the ``mes`` of every message; swipe
alternatives are the other entries of ``swipes``.

The import-context document (`docs/contract/play.md#import-context`, ``schemaVersion: 1``) holds
the greeting (the assistant's messages before the first user message), one ``qa`` item per user
message with the assistant replies that follow it, and in ``source`` what the prompt never sees:
the chat's name, create date, names, system messages, swipe alternatives and the lines that were
not JSON. The original file is kept verbatim beside it in chunks of at most
:data:`MAX_WORKSPACE_FILE_BYTES`, so nothing of the original is lost even when the context file
has to drop its oldest QA to fit the workspace's file limit.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Final

from innkeeper_tavern.pure.formats.errors import FormatError, decode_json
from innkeeper_tavern.pure.formats.guards import StructureLimits

#: The workspace's file limit (docs/play.md "Workspace").
MAX_WORKSPACE_FILE_BYTES: Final = 1 << 20
#: Room left for JSON escaping when a chunk of the original is sent as a JSON string.
CHUNK_BYTES: Final = 512 << 10
#: The guard of one chat line: a message may be long and carry extension data, but its nesting
#: is bounded (a line past it is an unreadable line, kept in the original like any other).
CHAT_LINE_LIMITS: Final = StructureLimits(
    max_nodes=1_000_000, max_string_bytes=MAX_WORKSPACE_FILE_BYTES * 32, max_int_abs=None
)


@dataclass(slots=True)
class ParsedChat:
    """One chat file: header, messages in order, and the lines that were not JSON objects."""

    header: dict[str, Any]
    messages: list[dict[str, Any]] = field(default_factory=list)
    broken_lines: list[int] = field(default_factory=list)


def parse_chat(text: str) -> ParsedChat:
    """Split a chat ``.jsonl``; a line that is not a JSON object is noted, never fatal."""
    chat = ParsedChat(header={})
    first = True
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            doc = decode_json(line, what=f"chat line {number}", limits=CHAT_LINE_LIMITS)
        except FormatError:  # not JSON, or nested past the guard (json.loads would recurse out)
            doc = None
        if not isinstance(doc, dict):
            chat.broken_lines.append(number)
            continue
        if first and "mes" not in doc and ("chat_metadata" in doc or "user_name" in doc):
            chat.header = doc
        else:
            chat.messages.append(doc)
        first = False
    return chat


def _text(message: dict[str, Any]) -> str:
    value = message.get("mes")
    return value if isinstance(value, str) else ""


def _alternatives(message: dict[str, Any]) -> list[str]:
    """The swipes of ``message`` other than the one on the active path."""
    swipes = message.get("swipes")
    if not isinstance(swipes, list):
        return []
    active = _text(message)
    chosen = message.get("swipe_id")
    out: list[str] = []
    skipped = False
    for i, swipe in enumerate(swipes):
        if not isinstance(swipe, str):
            continue
        if not skipped and (i == chosen or (not isinstance(chosen, int) and swipe == active)):
            skipped = True
            continue
        out.append(swipe)
    return out


def context_document(chat: ParsedChat, *, chat_name: str, original_parts: int) -> dict[str, Any]:
    """The import-context document of ``chat`` (see the module docstring)."""
    greeting: list[str] = []
    greeting_swipes: list[str] = []
    qa: list[dict[str, Any]] = []
    system: list[dict[str, Any]] = []
    for index, message in enumerate(chat.messages):
        text = _text(message)
        if message.get("is_system") is True:
            system.append({"index": index, "name": str(message.get("name", "")), "text": text})
            continue
        if message.get("is_user") is True:
            qa.append({"user": text, "assistant": "", "messageIndex": index})
            continue
        alternatives = _alternatives(message)
        if not qa:
            greeting.append(text)
            greeting_swipes.extend(alternatives)
            continue
        item = qa[-1]
        item["assistant"] = f"{item['assistant']}\n\n{text}" if item["assistant"] else text
        if alternatives:
            item.setdefault("swipes", []).extend(alternatives)
        if isinstance(message.get("send_date"), str):
            item["sendDate"] = message["send_date"]
    header = chat.header
    source: dict[str, Any] = {
        "kind": "sillytavern-chat",
        "chatName": chat_name,
        "createDate": header.get("create_date"),
        "userName": header.get("user_name"),
        "characterName": header.get("character_name"),
        "messageCount": len(chat.messages),
        "systemMessages": system,
        "greetingSwipes": greeting_swipes,
        "brokenLines": chat.broken_lines,
        "originalParts": original_parts,
        "omittedQa": 0,
    }
    doc: dict[str, Any] = {"schemaVersion": 1, "source": source, "qa": qa}
    if greeting:
        doc["greeting"] = "\n\n".join(greeting)
    return doc


def encode_context(doc: dict[str, Any]) -> str:
    """``doc`` as JSON within the workspace file limit, dropping the oldest QA when needed.

    The number dropped is ``source.omittedQa``; the original file beside it keeps them.
    """
    text = json.dumps(doc, ensure_ascii=False)
    if len(text.encode()) <= MAX_WORKSPACE_FILE_BYTES:
        return text
    qa: list[dict[str, Any]] = doc["qa"]
    source: dict[str, Any] = doc["source"]
    low, high = 0, len(qa)
    # Binary search the fewest oldest items to drop (sizes are monotonic in the count dropped).
    while low < high:
        mid = (low + high) // 2
        trial = {**doc, "qa": qa[mid:], "source": {**source, "omittedQa": mid}}
        if len(json.dumps(trial, ensure_ascii=False).encode()) <= MAX_WORKSPACE_FILE_BYTES:
            high = mid
        else:
            low = mid + 1
    trimmed = {**doc, "qa": qa[low:], "source": {**source, "omittedQa": low}}
    for key in ("systemMessages", "greetingSwipes"):
        candidate = json.dumps(trimmed, ensure_ascii=False)
        if len(candidate.encode()) <= MAX_WORKSPACE_FILE_BYTES:
            break
        trimmed["source"][key] = []
    return json.dumps(trimmed, ensure_ascii=False)


def split_original(text: str) -> list[str]:
    """The chat's text in pieces of at most :data:`CHUNK_BYTES` UTF-8 bytes (joined = ``text``)."""
    parts: list[str] = []
    current: list[str] = []
    size = 0
    for line in text.splitlines(keepends=True):
        encoded = len(line.encode())
        if current and size + encoded > CHUNK_BYTES:
            parts.append("".join(current))
            current, size = [], 0
        while encoded > CHUNK_BYTES:  # one huge line: cut it on character boundaries
            cut = CHUNK_BYTES // 4
            parts.append(line[:cut])
            line = line[cut:]
            encoded = len(line.encode())
        current.append(line)
        size += encoded
    if current:
        parts.append("".join(current))
    return parts or [""]
