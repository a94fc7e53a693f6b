"""Group playthroughs back to SillyTavern group chats (docs/migration.md "Going back: export a
SillyTavern folder").

Each playthrough of a group (a catalog row whose ``ext.pmpDshTavern`` names ``groupId``) is one
group chat of that group, in SillyTavern's own format (:mod:`innkeeper_tavern.pure.groups.st_chat`):

* its opening: a playthrough imported from a SillyTavern group chat (its ``import-context.json``
  says ``sillytavern-group-chat`` and names the chat) starts with that chat as it was stored,
  byte for byte but for the speakers' renamed card files; any other starts with each member's
  greeting, as its prompt did;
* then every turn of the playthrough's head session (the timeline's ``head``, else its root
  session), oldest first: the player's message, if the turn had one, and the reply under the
  member who spoke it. A reply whose timeline node holds several variants (the swipes made in
  Innkeeper) has them all as its ``swipes``, ``swipe_id`` on the one on the path.

The chat takes the imported chat's name, so the group file lists it where it was; a new
playthrough is named by its title.
"""

from __future__ import annotations

import json
import posixpath
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from innkeeper_tavern.features.migration.backends import CommandError
from innkeeper_tavern.pure.api_paths import V1_PREFIX, V2_PREFIX
from innkeeper_tavern.pure.groups.st_chat import (
    join_chat,
    member_message,
    st_send_date,
    user_message,
)

from .export_chats import Reader, active_path, persona_name

#: The import-context ``source.kind`` of an imported group chat (group_play_import.py).
GROUP_CHAT_SOURCE: Final = "sillytavern-group-chat"
#: Pages of history read for the messages' dates, at most.
MAX_HISTORY_PAGES: Final = 256


@dataclass(frozen=True, slots=True)
class GroupChat:
    """One group playthrough as a SillyTavern group chat."""

    playthrough_id: str
    #: The chat's name: the imported chat's, else the playthrough's title.
    name: str
    #: The stored (imported) chat this one continues, if any.
    continues: str | None
    text: str
    last_opened: str


def _q(text: str) -> str:
    return urllib.parse.quote(text, safe="")


async def _times(reader: Reader, session_id: str) -> dict[int, int]:
    """seq → epoch ms of every event of ``session_id``'s history."""
    out: dict[int, int] = {}
    before: int | None = None
    through: int | None = None
    for _ in range(MAX_HISTORY_PAGES):
        query: dict[str, int] = {"limit": 1000}
        if before is not None:
            query["beforeSeq"] = before
        if through is not None:
            query["throughSeq"] = through
        page = await reader.json_of(
            f"/host/api/sessions/{_q(session_id)}/history?{urllib.parse.urlencode(query)}"
        )
        for event in page.get("events", []):
            if isinstance(event, dict) and isinstance(event.get("at"), int):
                out[int(event.get("seq", -1))] = event["at"]
        through = page.get("throughSeq", through)
        nxt = page.get("nextBeforeSeq")
        if not page.get("hasMore") or not isinstance(nxt, int) or (before and nxt >= before):
            break
        before = nxt
    return out


def _turns(messages: list[dict[str, Any]]) -> list[tuple[str | None, dict[str, Any]]]:
    """``(the player's text or None, the reply)`` of every completed turn, oldest first; a
    continuation is folded into the reply it extends."""
    order: list[int] = []
    users: dict[int, list[str]] = {}
    replies: dict[int, dict[str, Any]] = {}
    by_id: dict[str, dict[str, Any]] = {}
    for m in messages:
        turn = m.get("turn")
        if not isinstance(turn, int):
            continue
        kind = (m.get("origin") or {}).get("kind")
        if m.get("role") == "user" and kind == "user":
            users.setdefault(turn, []).append(str(m.get("text", "")))
        if m.get("role") != "assistant" or kind != "assistant":
            continue
        if m.get("incompleteTurn") or m.get("toolCalls"):
            continue
        root = by_id.get(str(m.get("continues"))) if m.get("continues") else None
        if root is not None:
            root["text"] += str(m.get("text", ""))
            continue
        reply = {**m, "text": str(m.get("text", ""))}
        by_id[str(m.get("id"))] = reply
        if turn not in replies:
            order.append(turn)
        replies[turn] = reply
    return [("\n".join(users[t]) if t in users else None, replies[t]) for t in order]


async def _stored_chat(reader: Reader, gid: str, name: str) -> str | None:
    resp = await reader.backend.request_raw("GET", f"{V1_PREFIX}/groups/{_q(gid)}/chats/{_q(name)}")
    return resp.body.decode("utf-8") if resp.status == 200 else None


async def _greetings(
    reader: Reader, root: str, avatar_of: Callable[[str], str], date: str
) -> list[dict[str, Any]]:
    state = await reader.json_of(f"{V2_PREFIX}/sessions/{_q(root)}/group")
    out: list[dict[str, Any]] = []
    for member in state.get("members", []):
        cid = member.get("characterId")
        if not isinstance(cid, str) or member.get("missing"):
            continue
        card = (await reader.json_of(f"{V1_PREFIX}/characters/{_q(cid)}")).get("character", {})
        data = card.get("data", {}) if isinstance(card, dict) else {}
        greeting = data.get("firstMessage", data.get("first_mes"))
        if isinstance(greeting, str) and greeting:
            name = str(member.get("name") or data.get("name") or cid)
            out.append(member_message(name, avatar_of(cid), [greeting], 0, date))
    return out


async def group_chat(
    reader: Reader,
    row: dict[str, Any],
    avatar_of: Callable[[str], str],
    renamed: Callable[[str], str],
) -> GroupChat:
    """One group playthrough as a group chat (module docstring). ``avatar_of`` names a
    member's exported card file; ``renamed`` rewrites a stored chat's speakers."""
    playthrough_id = str(row.get("id"))
    tavern = row.get("ext", {}).get("pmpDshTavern", {})
    gid, root = str(tavern.get("groupId")), tavern.get("rootSessionId")
    if not isinstance(root, str):
        raise CommandError(f"playthrough {playthrough_id} has no session")
    timeline_text = await reader.file(str(row.get("path", "")))
    timeline = json.loads(timeline_text) if timeline_text else {}
    timeline = timeline if isinstance(timeline, dict) else {}
    head = timeline.get("head")
    head_sid = root
    if isinstance(head, dict) and isinstance(head.get("sessionId"), str):
        head_sid = head["sessionId"]
    times = await _times(reader, head_sid)
    first = min(times.values(), default=0)
    folder = posixpath.dirname(str(row.get("path", "")))
    context = await reader.file(f"{folder}/import-context.json")
    source = _source(context)
    opening, continues = "", None
    if source is not None:
        stored = await _stored_chat(reader, gid, source)
        if stored is not None:
            opening, continues = renamed(stored), source
    messages: list[dict[str, Any]] = []
    if continues is None:
        messages.extend(await _greetings(reader, root, avatar_of, st_send_date(first)))
    # Each node on the path, by the reply it ends with: its variants are the reply's swipes.
    nodes = {
        int(variant.get("endEventId", -1)): (node, variant)
        for node, variant in active_path(timeline)
    }
    user_name = await persona_name(reader, root)
    for user, reply in _turns(await reader.messages(head_sid)):
        seq = int(reply.get("seq", -1))
        date = st_send_date(times.get(seq, first))
        if user is not None:
            messages.append(user_message(user_name, user, date))
        speaker = reply.get("speaker") or {}
        cid = speaker.get("characterId")
        swipes, index = [reply["text"]], 0
        if seq in nodes:
            node, chosen = nodes[seq]
            variants = [v for v in node.get("variants", []) if isinstance(v, dict)]
            swipes = [reply["text"] if v is chosen else (await reader.turn(v))[1] for v in variants]
            index = next(i for i, v in enumerate(variants) if v is chosen)
        name = str(speaker.get("name") or tavern.get("characterName") or "Character")
        avatar = avatar_of(cid) if isinstance(cid, str) else f"{name}.png"
        messages.append(member_message(name, avatar, swipes, index, date))
    title = str(row.get("title") or continues or playthrough_id)
    return GroupChat(
        playthrough_id=playthrough_id,
        name=continues or title,
        continues=continues,
        text=join_chat(opening, messages),
        last_opened=str(row.get("lastOpenedAt") or ""),
    )


def _source(context: str | None) -> str | None:
    """The name of the imported group chat an import context was made from."""
    try:
        doc = json.loads(context) if context else None
    except ValueError:
        return None
    source = doc.get("source") if isinstance(doc, dict) else None
    if isinstance(source, Mapping) and source.get("kind") == GROUP_CHAT_SOURCE:
        name = source.get("chatName")
        return name if isinstance(name, str) and name else None
    return None


async def group_rows(reader: Reader) -> dict[str, list[dict[str, Any]]]:
    """The catalog's group playthroughs by group id."""
    text = await reader.file("catalog.json")
    rows = json.loads(text).get("playthroughs", []) if text else []
    out: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        tavern = row.get("ext", {}).get("pmpDshTavern", {}) if isinstance(row, dict) else {}
        if isinstance(tavern, dict) and isinstance(tavern.get("groupId"), str):
            out.setdefault(tavern["groupId"], []).append(row)
    return out


__all__ = ["GROUP_CHAT_SOURCE", "GroupChat", "group_chat", "group_rows"]
