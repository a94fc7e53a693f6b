"""SillyTavern groups and group chats in ``innkeeper import`` and ``innkeeper export
sillytavern``.

Import (after the cards, so members can be matched): each ``groups/<id>.json`` becomes a group
(``POST /groups/import``) whose members are the imported cards with the same file name
(``"Alice.png"`` is the card imported from ``characters/Alice.png``); a member without one is
reported by name and kept in the group for the export. Each ``group chats/<name>.jsonl`` is
stored with the group whose ``chats`` lists it (``PUT /groups/{id}/chats/{name}``), as its bytes.
Both are looked up in the ledger first, like every other item, so a second run imports nothing.

Export: each group as ``groups/<ST id>.json`` naming the exported card files, and its chats as
``group chats/<name>.jsonl``; a speaker whose card file is now named differently has its
``original_avatar`` rewritten, every other line is written back as it was imported.
"""

from __future__ import annotations

import asyncio
import json
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from innkeeper_tavern.features.migration.backends import Backend, CommandError, OnlineBackend
from innkeeper_tavern.features.migration.output import safe_file_name
from innkeeper_tavern.pure.api_paths import V1_PREFIX
from innkeeper_tavern.pure.groups.st_format import avatar_stem, rename_speakers, summarize_chat

from .export_chats import Reader
from .group_export import GroupChat, group_chat, group_rows
from .group_play_import import play_on
from .ledger import content_key
from .report import Item

if TYPE_CHECKING:
    from .run import Migration

#: Largest group file read.
MAX_GROUP_FILE_BYTES: Final = 4 << 20
GROUPS: Final = V1_PREFIX + "/groups"


def _q(text: str) -> str:
    return urllib.parse.quote(text, safe="")


async def _existing(backend: OnlineBackend) -> set[str]:
    status, doc = await backend.request_json("GET", GROUPS)
    if status != 200:
        raise CommandError(f"listing groups failed: {doc.get('code', status)}")
    return {str(g.get("id")) for g in doc.get("groups", [])}


def _read_json(path: Path) -> tuple[bytes, dict[str, Any]]:
    if path.stat().st_size > MAX_GROUP_FILE_BYTES:
        raise ValueError(f"larger than {MAX_GROUP_FILE_BYTES} bytes")
    data = path.read_bytes()
    doc = json.loads(data)
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")
    return data, doc


async def import_groups(run: Migration) -> None:
    """Import the folder's groups, then its group chats (see the module docstring)."""
    folder = run.folder
    if not folder.groups and not folder.group_chats:
        return
    backend = run.backend
    if not isinstance(backend, OnlineBackend):
        reason = "groups need a host and this command could not start one: start innkeeper serve"
        for kind, paths in (("group", folder.groups), ("group-chat", folder.group_chats)):
            for path in paths:
                run.add(Item(kind, run.rel(path), "refused", reason + " and run again"))
        return
    existing = await _existing(backend) if not run.dry_run else set()
    #: chat name (file stem) -> (our group id or None in a dry run, its members' avatars).
    owners: dict[str, tuple[str | None, set[str]]] = {}
    for path in folder.groups:
        await _group(run, backend, path, existing, owners)
    for path in folder.group_chats:
        await _group_chat(run, backend, path, owners)


async def _group(
    run: Migration,
    backend: OnlineBackend,
    path: Path,
    existing: set[str],
    owners: dict[str, tuple[str | None, set[str]]],
) -> None:
    source = run.rel(path)
    try:
        data, doc = await asyncio.to_thread(_read_json, path)
    except (OSError, ValueError) as exc:
        run.add(Item("group", source, "refused", f"unreadable: {exc}"))
        return
    avatars = [m for m in doc.get("members", []) if isinstance(m, str)]
    chats = [c for c in doc.get("chats", []) if isinstance(c, str)]
    key = content_key("group", data)
    entry = run.ledger.get(key)
    if entry is not None and entry.get("kind") == "group" and str(entry.get("id")) in existing:
        gid = str(entry["id"])
        for chat in chats:
            owners[chat] = (gid, set(avatars))
        added = [] if run.dry_run else await _complete(run, backend, gid, doc)
        if added:
            detail = f"{gid}: now with {', '.join(added)} (their cards are imported now)"
            run.add(Item("group", source, "imported", detail, gid))
        else:
            run.add(Item("group", source, "duplicate", f"already {gid}", gid))
        return
    members: dict[str, str] = {}
    for avatar in avatars:
        card = run.cards.get(avatar_stem(avatar))
        if card is not None and not card[0].startswith("("):
            members[avatar] = card[0]
    missing = [a for a in avatars if a not in members and avatar_stem(a) not in run.cards]
    if run.dry_run:
        for chat in chats:
            owners[chat] = (None, set(avatars))
        run.add(Item("group", source, "imported", f"would import {len(avatars)} members"))
        _report_missing(run, source, missing)
        return
    run.ledger.begin(key, "group", None)
    status, answer = await backend.request_json(
        "POST", GROUPS + "/import", {"group": doc, "members": members}
    )
    if status != 201:
        run.ledger.abandon(key)
        reason = f"{answer.get('code', status)}: {answer.get('error', 'refused')}"
        run.add(Item("group", source, "refused", reason))
        return
    group = answer["group"]
    gid = str(group["id"])
    run.ledger.record(key, kind="group", id=gid, name=group["name"], source=source)
    for chat in chats:
        owners[chat] = (gid, set(avatars))
    detail = f"{gid} ({group['name']}), {len(group['members'])} members"
    run.add(Item("group", source, "imported", detail, gid))
    _report_missing(run, source, [str(a) for a in answer.get("missingMembers", [])])


async def _complete(
    run: Migration, backend: OnlineBackend, gid: str, doc: dict[str, Any]
) -> list[str]:
    """Add to an imported group the members whose cards were missing then and are imported
    now (a run interrupted before the cards); their names."""
    status, exported = await backend.request_json("GET", f"{GROUPS}/{_q(gid)}/export")
    if status != 200:
        return []
    pairs = zip(exported["group"]["members"], exported["memberCharacterIds"], strict=True)
    disabled = {m for m in doc.get("disabled_members", []) if isinstance(m, str)}
    status, current = await backend.request_json("GET", f"{GROUPS}/{_q(gid)}")
    if status != 200:
        return []
    group = current["group"]
    have = {m["characterId"] for m in group["members"]}
    joining: list[tuple[str, str, bool, str]] = []
    for avatar, cid in pairs:
        card = run.cards.get(avatar_stem(avatar)) if cid is None else None
        if card is not None and not card[0].startswith("(") and card[0] not in have:
            joining.append((card[0], card[1], avatar in disabled, avatar))
    if not joining:
        return []
    members = [{"characterId": m["characterId"], "muted": m["muted"]} for m in group["members"]]
    members += [{"characterId": cid, "muted": muted} for cid, _, muted, _ in joining]
    avatars = {cid: avatar for cid, _, _, avatar in joining}
    body = {"revision": group["revision"], "members": members, "stAvatars": avatars}
    status, _ = await backend.request_json("PATCH", f"{GROUPS}/{_q(gid)}", body)
    return [name for _, name, _, _ in joining] if status == 200 else []


def _report_missing(run: Migration, source: str, missing: list[str]) -> None:
    for avatar in missing:
        reason = (
            f"member {avatar_stem(avatar)!r} ({avatar}) is not among the imported cards; "
            "kept in the group for the export"
        )
        run.add(Item("group-member", source, "refused", reason))


async def _group_chat(
    run: Migration,
    backend: OnlineBackend,
    path: Path,
    owners: dict[str, tuple[str | None, set[str]]],
) -> None:
    source = run.rel(path)
    owner = owners.get(path.stem)
    if owner is None:
        run.add(Item("group-chat", source, "refused", "no group in groups/ lists this chat"))
        return
    try:
        data = await asyncio.to_thread(path.read_bytes)
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        run.add(Item("group-chat", source, "refused", f"unreadable: {exc}"))
        return
    summary = summarize_chat(text)
    gid, avatars = owner
    notes = [f"{summary.messages} messages, {summary.swipes} swipes"]
    strangers = sorted(summary.speakers - avatars)
    if strangers:
        notes.append("speakers not in the group: " + ", ".join(strangers[:5]))
    if summary.broken_lines:
        notes.append(f"{summary.broken_lines} unreadable line(s) kept as they are")
    if gid is None:
        run.add(Item("group-chat", source, "imported", "would import " + "; ".join(notes)))
        return
    key = content_key("group-chat", data, gid.encode(), path.stem.encode())
    entry = run.ledger.get(key)
    if entry is not None and entry.get("kind") == "group-chat":
        status, listed = await backend.request_json("GET", f"{GROUPS}/{_q(gid)}/chats")
        names = {c.get("name") for c in listed.get("chats", [])} if status == 200 else set()
        if path.stem in names:
            run.add(Item("group-chat", source, "duplicate", f"already in {gid}", gid))
            return
    try:
        status, body = await _put_chat(backend, gid, path.stem, data)
    except CommandError as exc:
        run.add(Item("group-chat", source, "refused", str(exc)))
        return
    if status not in (200, 201):
        reason = f"{body.get('code', status)}: {body.get('error', 'refused')}"
        run.add(Item("group-chat", source, "refused", reason))
        return
    try:  # the chat plays on as a group playthrough (group_play_import.py)
        session = await play_on(backend, gid, path.stem, text)
    except CommandError as exc:
        run.add(Item("group-chat", source, "refused", f"stored, not playable: {exc}"))
        return
    notes.append(f"playthrough session {session}")
    run.ledger.record(key, kind="group-chat", id=gid, name=path.stem, source=source)
    run.add(Item("group-chat", source, "imported", f"{gid}: " + "; ".join(notes), gid))


async def _put_chat(
    backend: OnlineBackend, gid: str, name: str, data: bytes
) -> tuple[int, dict[str, Any]]:
    path = f"{GROUPS}/{_q(gid)}/chats/{_q(name)}"
    resp = await backend.request_raw("PUT", path, data, "application/x-ndjson")
    try:
        doc = json.loads(resp.body)
    except ValueError:
        doc = {}
    return resp.status, doc if isinstance(doc, dict) else {}


async def export_groups(backend: Backend, out: Path, stems: dict[str, str]) -> list[Item]:
    """Write every group and its chats into ``out`` (``stems``: card id → exported file stem)."""
    if not isinstance(backend, OnlineBackend):
        return []
    status, listed = await backend.request_json("GET", GROUPS)
    groups = listed.get("groups", []) if status == 200 else []
    items: list[Item] = []
    used: tuple[set[str], set[str]] = (set(), set())
    reader = Reader(backend)
    rows = await group_rows(reader)
    for group in groups:
        gid = str(group.get("id"))
        try:
            items.extend(await _export_one(reader, out, gid, rows.get(gid, []), stems, used))
        except CommandError as exc:
            items.append(Item("group", gid, "refused", str(exc), gid))
    return items


async def _export_one(
    reader: Reader,
    out: Path,
    gid: str,
    rows: list[dict[str, Any]],
    stems: dict[str, str],
    used: tuple[set[str], set[str]],
) -> list[Item]:
    backend = reader.backend
    used_groups, used_chats = used
    status, answer = await backend.request_json("GET", f"{GROUPS}/{_q(gid)}/export")
    if status != 200:
        raise CommandError(f"{answer.get('code', status)}: {answer.get('error', 'failed')}")
    doc: dict[str, Any] = answer["group"]
    renamed: dict[str, str] = {}
    members: list[str] = []
    for avatar, cid in zip(doc["members"], answer["memberCharacterIds"], strict=True):
        now = f"{stems[cid]}.png" if cid is not None and cid in stems else avatar
        if now != avatar:
            renamed[avatar] = now
        members.append(now)
    doc["members"] = members
    doc["disabled_members"] = [renamed.get(a, a) for a in doc["disabled_members"]]
    items: list[Item] = []
    chats_dir = out / "group chats"
    avatars = dict(zip(answer["memberCharacterIds"], members, strict=True))
    played: dict[str, GroupChat] = {}
    taken = {f"{name}.jsonl".lower() for name in doc["chats"]}
    for chat in await _played(reader, rows, avatars, stems, renamed, items):
        kept = chat.continues
        if kept is not None and kept in doc["chats"] and kept not in played:
            played[kept] = chat  # an imported chat, played on
            continue
        name = safe_file_name(f"{chat.name}.jsonl", taken)[: -len(".jsonl")]
        doc["chats"].append(name)  # a new chat
        played[name] = chat
    written: dict[str, str] = {}
    for name in list(doc["chats"]):
        mine = played.get(name)
        if mine is not None:
            text, source = mine.text, mine.playthrough_id
        else:
            resp = await backend.request_raw("GET", f"{GROUPS}/{_q(gid)}/chats/{_q(name)}")
            if resp.status == 404:
                continue  # listed by the group file but never imported (ST had no such file)
            if resp.status != 200:
                reason = f"HTTP {resp.status}"
                items.append(Item("group-chat", f"{gid}/{name}", "refused", reason))
                continue
            text, source = rename_speakers(resp.body.decode("utf-8"), renamed), f"{gid}/{name}"
        file_name = safe_file_name(f"{name}.jsonl", used_chats)
        chats_dir.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread((chats_dir / file_name).write_text, text, "utf-8")
        written[name] = file_name[: -len(".jsonl")]
        items.append(Item("group-chat", source, "imported", str(chats_dir / file_name), gid))
    # The group file names the files ST will find; its current chat is the one opened last.
    doc["chats"] = [written.get(c, c) for c in doc["chats"]]
    newest = max(played, key=lambda n: played[n].last_opened, default=None)
    current = newest if newest is not None else doc.get("chat_id")
    doc["chat_id"] = written.get(str(current), current)
    target = out / "groups"
    target.mkdir(parents=True, exist_ok=True)
    path = target / safe_file_name(f"{doc['id']}.json", used_groups)
    data = json.dumps(doc, ensure_ascii=False, indent=4).encode()
    await asyncio.to_thread(path.write_bytes, data)
    items.insert(0, Item("group", gid, "imported", str(path), gid))
    return items


async def _played(
    reader: Reader,
    rows: list[dict[str, Any]],
    avatars: dict[str | None, str],
    stems: dict[str, str],
    renamed: dict[str, str],
    items: list[Item],
) -> list[GroupChat]:
    """The group's playthroughs as group chats (a playthrough that cannot be read is
    reported)."""

    def avatar_of(cid: str) -> str:
        return avatars.get(cid) or f"{stems.get(cid, cid)}.png"

    out: list[GroupChat] = []
    for row in rows:
        try:
            out.append(
                await group_chat(reader, row, avatar_of, lambda t: rename_speakers(t, renamed))
            )
        except (CommandError, ValueError, TypeError, KeyError) as exc:
            pid = str(row.get("id"))
            items.append(Item("group-chat", pid, "refused", str(exc), pid))
    return out


__all__ = ["export_groups", "import_groups"]
