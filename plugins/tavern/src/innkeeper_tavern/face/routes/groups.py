"""Group routes (``/pmp-dsh-tavern/api/v1/groups``): list, get, create, update with revision,
delete with revision; SillyTavern group-file import/export and the group's ST group chats.
docs/resources.md "Groups" documents them."""

from __future__ import annotations

import functools
from typing import Any, Final

from aiohttp import web

from innkeeper_hostapi import HttpProblem, PluginContext, path_params, read_body, read_json
from innkeeper_tavern.pure.api_paths import V1_PREFIX
from innkeeper_tavern.pure.groups.model import GROUP_INVALID, Group, GroupError, group_wire
from innkeeper_tavern.pure.groups.st_format import group_from_st, group_to_st
from innkeeper_tavern.state.groups import TAVERN_GROUPS, GroupStore
from innkeeper_tavern.state.groups.chats import MAX_GROUP_CHAT_BYTES, GroupChatStore
from innkeeper_tavern.state.resources import TavernResources

from .common import Handler, attachment, ok

#: An ST group file plus its avatar → character id map (its ``chat_metadata`` may be large).
GROUP_IMPORT_BODY_LIMIT: Final = 4 << 20
#: A group chat upload (the chat store's own bound).
GROUP_CHAT_BODY_LIMIT: Final = MAX_GROUP_CHAT_BYTES
_CHAT_MEDIA: Final = (
    "application/x-ndjson",
    "application/jsonl",
    "text/plain",
    "application/octet-stream",
)

#: A group body: 64 members, a 128 KiB avatar as base64, two 10,000-character affixes.
GROUP_BODY_LIMIT: Final = 512 << 10


def _handler(fn: Handler) -> Handler:
    """Answer group errors as ``{ok:false, error, code}``."""

    @functools.wraps(fn)
    async def wrapped(request: web.Request) -> web.StreamResponse:
        try:
            return await fn(request)
        except GroupError as exc:
            raise HttpProblem(exc.status, exc.code, exc.message, details=exc.details) from None

    return wrapped


def _revision(request: web.Request) -> int:
    raw = request.query.get("revision", "")
    if not raw.isascii() or not raw.isdigit() or len(raw) > 15:
        raise GroupError(400, GROUP_INVALID, "?revision= (the group's current one) is required")
    return int(raw)


def _import_body(body: Any) -> tuple[dict[str, Any], dict[str, str]]:
    if not isinstance(body, dict) or set(body) - {"group", "members"}:
        raise GroupError(400, GROUP_INVALID, "body must be {group, members}")
    doc, members = body.get("group"), body.get("members", {})
    if not isinstance(doc, dict):
        raise GroupError(400, GROUP_INVALID, "group must be a SillyTavern group file object")
    if not isinstance(members, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in members.items()
    ):
        raise GroupError(400, GROUP_INVALID, "members must map avatar file names to character ids")
    return doc, members


def register_group_routes(
    ctx: PluginContext, store: GroupStore, chats: GroupChatStore, res: TavernResources
) -> None:
    """Register the group routes on ``ctx``."""

    def wire(group: Group) -> dict[str, Any]:
        names: dict[str, str | None] = {}
        for member in group.members:
            entry = res.characters.entry(member.character_id)
            names[member.character_id] = entry.name if entry is not None else None
        return group_wire(group, names)

    @_handler
    async def list_groups(request: web.Request) -> web.StreamResponse:
        return ok(groups=[wire(g) for g in store.groups()])

    @_handler
    async def get_group(request: web.Request) -> web.StreamResponse:
        return ok(group=wire(store.get(path_params(request)["id"])))

    @_handler
    async def create(request: web.Request) -> web.StreamResponse:
        return ok(201, group=wire(await store.create(await read_json(request))))

    @_handler
    async def update(request: web.Request) -> web.StreamResponse:
        body = await read_json(request)
        return ok(group=wire(await store.update(path_params(request)["id"], body)))

    @_handler
    async def delete(request: web.Request) -> web.StreamResponse:
        group_id = path_params(request)["id"]
        doomed = await store.delete(group_id, _revision(request))
        await chats.drop_group(doomed.id)
        return ok(id=doomed.id)

    @_handler
    async def import_st(request: web.Request) -> web.StreamResponse:
        doc, members = _import_body(await read_json(request))
        parsed = group_from_st(doc, members.get)
        group = await store.create(parsed.body, st_extra=parsed.st_extra)
        return ok(201, group=wire(group), missingMembers=parsed.missing)

    @_handler
    async def export_st(request: web.Request) -> web.StreamResponse:
        group = store.get(path_params(request)["id"])
        names = [c.name for c in await chats.list(group.id)]

        def card_file(character_id: str) -> str | None:
            entry = res.characters.entry(character_id)
            return f"{entry.name}.png" if entry is not None and entry.name else None

        doc, ids = group_to_st(group, card_file, names)
        return ok(group=doc, memberCharacterIds=ids)

    @_handler
    async def list_chats(request: web.Request) -> web.StreamResponse:
        group = store.get(path_params(request)["id"])
        return ok(chats=[c.wire() for c in await chats.list(group.id)])

    @_handler
    async def put_chat(request: web.Request) -> web.StreamResponse:
        group = store.get(path_params(request)["id"])
        info, fresh = await chats.put(
            group.id, path_params(request)["name"], await read_body(request)
        )
        return ok(201 if fresh else 200, chat=info.wire())

    @_handler
    async def get_chat(request: web.Request) -> web.StreamResponse:
        group = store.get(path_params(request)["id"])
        name = path_params(request)["name"]
        return attachment(await chats.read(group.id, name), f"{name}.jsonl", "application/x-ndjson")

    @_handler
    async def delete_chat(request: web.Request) -> web.StreamResponse:
        group = store.get(path_params(request)["id"])
        name = path_params(request)["name"]
        await chats.delete(group.id, name)
        return ok(name=name)

    base = V1_PREFIX + "/groups"
    ctx.add_route("GET", base, list_groups, name="tavern.groups.list")
    ctx.add_route("POST", base, create, name="tavern.groups.create", max_body=GROUP_BODY_LIMIT)
    ctx.add_route("GET", base + "/{id}", get_group, name="tavern.groups.get")
    ctx.add_route(
        "PATCH", base + "/{id}", update, name="tavern.groups.update", max_body=GROUP_BODY_LIMIT
    )
    ctx.add_route("DELETE", base + "/{id}", delete, name="tavern.groups.delete")
    ctx.add_route(
        "POST",
        base + "/import",
        import_st,
        name="tavern.groups.import",
        max_body=GROUP_IMPORT_BODY_LIMIT,
    )
    ctx.add_route("GET", base + "/{id}/export", export_st, name="tavern.groups.export")
    ctx.add_route("GET", base + "/{id}/chats", list_chats, name="tavern.groups.chats")
    chat = base + "/{id}/chats/{name}"
    ctx.add_route(
        "PUT",
        chat,
        put_chat,
        name="tavern.groups.chat.put",
        max_body=GROUP_CHAT_BODY_LIMIT,
        accepts=_CHAT_MEDIA,
    )
    ctx.add_route("GET", chat, get_chat, name="tavern.groups.chat.get")
    ctx.add_route("DELETE", chat, delete_chat, name="tavern.groups.chat.delete")


async def install_groups(ctx: PluginContext, res: TavernResources) -> GroupStore:
    """Open ``groups.json``, provide the store and register its routes."""
    store = GroupStore(ctx.data_dir, known_character=res.characters.exists, logger=ctx.logger)
    await store.open()
    ctx.provide(TAVERN_GROUPS, lambda: store)
    register_group_routes(ctx, store, GroupChatStore(ctx.data_dir), res)
    return store


__all__ = ["GROUP_BODY_LIMIT", "install_groups", "register_group_routes"]
