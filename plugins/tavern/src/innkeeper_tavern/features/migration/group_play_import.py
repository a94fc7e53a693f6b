"""An imported SillyTavern group chat becomes a group playthrough that plays on
(docs/migration.md, docs/groups.md "Group playthroughs").

After the chat file is stored with its group, ``POST /groups/{id}/playthroughs`` starts a group
playthrough titled after the chat, and the chat goes in as the playthrough's import context
(docs/play.md "Import context"), built like a single chat's: each member's message keeps its
speaker as ``Name: text`` (how SillyTavern sends another member's message to the model), so
the first turn reads who said what. The chat file itself stays byte for byte with the group
for the export.
"""

from __future__ import annotations

import urllib.parse
from typing import Any

from innkeeper_tavern.features.migration.backends import CommandError, OnlineBackend
from innkeeper_tavern.pure.api_paths import V2_PREFIX

from .chats import context_document, encode_context, parse_chat


def _q(text: str) -> str:
    return urllib.parse.quote(text, safe="")


def group_context(text: str, chat_name: str) -> str:
    """The import-context document of a group chat (speakers kept in each reply)."""
    chat = parse_chat(text)
    for message in chat.messages:
        name = message.get("name")
        if message.get("is_user") is True or message.get("is_system") is True:
            continue
        if isinstance(name, str) and name and isinstance(message.get("mes"), str):
            message["mes"] = f"{name}: {message['mes']}"
    doc = context_document(chat, chat_name=chat_name, original_parts=0)
    doc["source"]["kind"] = "sillytavern-group-chat"
    return encode_context(doc)


async def play_on(backend: OnlineBackend, group_id: str, chat_name: str, text: str) -> str:
    """Start the group playthrough of one imported chat; its session id."""
    status, doc = await backend.request_json(
        "POST", f"{V2_PREFIX}/groups/{_q(group_id)}/playthroughs", {"title": chat_name[:200]}
    )
    if status != 201:
        raise CommandError(f"{doc.get('code', status)}: starting the group playthrough")
    session_id = str(doc["sessionId"])
    folder = str(doc["playthrough"]["path"]).rsplit("/", 1)[0]
    path = f"{folder}/import-context.json"
    query = urllib.parse.urlencode({"path": path})
    body: dict[str, Any] = {"content": group_context(text, chat_name)}
    status, doc = await backend.request_json("PUT", f"{V2_PREFIX}/workspace/files?{query}", body)
    if status != 200:
        raise CommandError(f"{doc.get('code', status)}: writing {path}")
    status, doc = await backend.request_json(
        "PUT",
        f"{V2_PREFIX}/sessions/{_q(session_id)}/import-context",
        {"reference": {"path": path}},
    )
    if status != 200:
        raise CommandError(f"{doc.get('code', status)}: binding the import context")
    return session_id


__all__ = ["group_context", "play_on"]
