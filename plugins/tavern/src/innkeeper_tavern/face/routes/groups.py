"""Group routes (``/pmp-dsh-tavern/api/v1/groups``): list, get, create, update with revision,
delete with revision. docs/resources.md "Groups" documents them."""

from __future__ import annotations

import functools
from typing import Any, Final

from aiohttp import web

from innkeeper_hostapi import HttpProblem, PluginContext, path_params, read_json
from innkeeper_tavern.pure.api_paths import V1_PREFIX
from innkeeper_tavern.pure.groups.model import GROUP_INVALID, Group, GroupError, group_wire
from innkeeper_tavern.state.groups import TAVERN_GROUPS, GroupStore
from innkeeper_tavern.state.resources import TavernResources

from .common import Handler, ok

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


def register_group_routes(ctx: PluginContext, store: GroupStore, res: TavernResources) -> None:
    """Register the five group routes on ``ctx``."""

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
        return ok(id=doomed.id)

    base = V1_PREFIX + "/groups"
    ctx.add_route("GET", base, list_groups, name="tavern.groups.list")
    ctx.add_route("POST", base, create, name="tavern.groups.create", max_body=GROUP_BODY_LIMIT)
    ctx.add_route("GET", base + "/{id}", get_group, name="tavern.groups.get")
    ctx.add_route(
        "PATCH", base + "/{id}", update, name="tavern.groups.update", max_body=GROUP_BODY_LIMIT
    )
    ctx.add_route("DELETE", base + "/{id}", delete, name="tavern.groups.delete")


async def install_groups(ctx: PluginContext, res: TavernResources) -> GroupStore:
    """Open ``groups.json``, provide the store and register its routes."""
    store = GroupStore(ctx.data_dir, known_character=res.characters.exists, logger=ctx.logger)
    await store.open()
    ctx.provide(TAVERN_GROUPS, lambda: store)
    register_group_routes(ctx, store, res)
    return store


__all__ = ["GROUP_BODY_LIMIT", "install_groups", "register_group_routes"]
