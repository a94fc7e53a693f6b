"""The Tavern plugin's only contact with the host: ``innkeeper_plugin_setup(ctx)``.

Setup opens the resource libraries and the session-selection store in ``ctx.data_dir`` (off the
event loop), takes the data directory's writer lock (so ``innkeeper import`` never writes behind
a running server's back), provides the libraries as the ``tavern.resources`` service and
registers the v1 routes of `docs/contract/http-api.md#prefixes` under
``/pmp-dsh-tavern/api/v1``. Everything is registered through ``ctx``, so unloading takes all of it
back.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from innkeeper_hostapi import HostInfo, PluginContext, ServiceKey, hookimpl
from innkeeper_hostapi.agents import SESSION_ANNOTATIONS
from innkeeper_tavern.face.routes import v1_routes
from innkeeper_tavern.face.routes.group_play import install_group_play
from innkeeper_tavern.face.routes.groups import install_groups
from innkeeper_tavern.face.routes.mvu_install import install_mvu
from innkeeper_tavern.face.routes.opening_books import configured_manifest, install_opening_books
from innkeeper_tavern.face.routes.opening_drafts_install import install_openings
from innkeeper_tavern.face.routes.opening_rendering_cache import install_rendering_cache
from innkeeper_tavern.face.routes.play_install import install_play
from innkeeper_tavern.face.routes.preset_admission import install_preset_admission
from innkeeper_tavern.face.routes.prompt_profile import install_loader
from innkeeper_tavern.face.routes.rp import install_rp
from innkeeper_tavern.face.routes.session_bindings import install_session_selections
from innkeeper_tavern.face.routes.session_templates import install_session_templates
from innkeeper_tavern.face.routes.settings import install_settings
from innkeeper_tavern.face.routes.trace import install_traces
from innkeeper_tavern.features.catalogs.install import bound_consumer_check, install_catalogs
from innkeeper_tavern.features.prompt_sources.default import install_default_strategy
from innkeeper_tavern.features.prompt_sources.link import link_assembler
from innkeeper_tavern.pure.api_paths import V1_PREFIX
from innkeeper_tavern.state.resources import TavernResources
from innkeeper_tavern.state.resources.lock import (
    DataDirLock,
    DataDirLockedError,
    forget_server,
    record_server,
)
from innkeeper_tavern.state.session_bindings.cleared import ClearedBindings
from innkeeper_tavern.state.session_bindings.model import ResourceKind
from innkeeper_tavern.state.trace.capture import TurnReads

#: Seconds setup waits for the data directory's writer lock (an offline ``innkeeper import`` may
#: hold it briefly) before failing the load with the reason.
LOCK_WAIT_SECONDS: Final = 30.0
_LOCK_POLL_SECONDS: Final = 0.25

#: The resource libraries, for other Tavern parts and plugins (resolve at call time).
TAVERN_RESOURCES: ServiceKey[TavernResources] = ServiceKey("tavern.resources", TavernResources)


class _Serving:
    """The data directories this process serves and the address it listens on."""

    def __init__(self) -> None:
        self.roots: set[Path] = set()
        self.base_url: str | None = None


_SERVING: Final = _Serving()


@hookimpl
def innkeeper_host_started(info: HostInfo) -> None:
    """The host listens: record its address beside every lock this plugin holds (the hook is
    replayed to a plugin loaded later, before its setup; setup then records it)."""
    _SERVING.base_url = info.base_url
    for root in _SERVING.roots:
        record_server(root, info.base_url, os.getpid())


@hookimpl
async def innkeeper_plugin_setup(ctx: PluginContext) -> None:
    """Open the stores and register every v1 resource route."""
    link_assembler(ctx)  # Assembler ~1.1.3 check (refuses to mount), Tavern sources
    install_default_strategy(ctx)  # new sessions get the default RP strategy
    root = ctx.data_dir
    lock = DataDirLock(root)
    await _acquire(lock, ctx)
    ctx.on_dispose(lock.release)
    # Record where this server listens beside the lock, so `innkeeper import` finds it.
    _SERVING.roots.add(root)
    if _SERVING.base_url is not None:
        await asyncio.to_thread(record_server, root, _SERVING.base_url, os.getpid())

    def stop_serving() -> None:
        _SERVING.roots.discard(root)
        forget_server(root)

    ctx.on_dispose(stop_serving)
    resources = TavernResources(root, logger=ctx.logger)
    await resources.open()
    ctx.provide(TAVERN_RESOURCES, lambda: resources)
    # Session selections own GET /presets (its selectedId is per session), POST /select and the
    # selection routes, and freeze selections when an agent is created.
    selections = await install_session_selections(ctx, resources)
    # A deletion clears the id from every selection and notes it, so /active and the audit can
    # say the bound card (book, persona, preset) is gone instead of running without it silently.
    cleared = ClearedBindings(root, logger=ctx.logger)
    await cleared.open()
    on_deleted = cleared.deletion_listener(
        selections, lambda kind, rid: _name_of(resources, kind, rid)
    )
    resources.deletion_listeners.append(on_deleted)
    ctx.on_dispose(lambda: resources.deletion_listeners.remove(on_deleted))

    # The host's session list shows each session's bound character.
    async def annotate(session_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for session_id in session_ids:
            stored = selections.stored(session_id)
            card_id = stored.character_card_id if stored is not None else None
            entry = resources.characters.entry(card_id) if card_id is not None else None
            character = {"id": card_id, "name": entry.name} if entry is not None else None
            out[session_id] = {"character": character}
        return out

    ctx.get(SESSION_ANNOTATIONS).annotate(ctx, "tavern", annotate)
    # tavernScopeCatalog: paged character/preset/user identities and scope leases.
    _, memory_sources = install_catalogs(ctx, resources, selections)
    # MVU variable state (tavernMvu): instances per session, turns, v1 /mvu/* routes.
    mvu = await install_mvu(ctx, resources, selections)
    mvu.consumer_bound = bound_consumer_check(memory_sources)  # resolvePromptDependency callers
    # The profile loader: the order-10 profile section, rp:policy, call config, GET /active.
    # The turn's events, read back once at turn end for the loader and the assembly recorder.
    reads = TurnReads()
    loader = await install_loader(ctx, resources, selections, cleared=cleared, reads=reads)
    # What the preset's samplers become against the provider (v1 /preset-admission).
    install_preset_admission(ctx, resources)
    # The assembly audit (after the loader: it reads the loader's audit at turn end).
    await install_traces(ctx, reads=reads)
    # Session templates and configuration preview/apply (v1 /session-templates*, …).
    await install_session_templates(ctx, resources, selections)
    # Group chats' groups (v1 /groups*): members are character ids of the library.
    groups = await install_groups(ctx, resources)
    # The bundled UI's settings (v1 /ui-settings, /conversation-settings).
    settings = await install_settings(ctx)
    # RP secure mode (v1 /rp-mode, /rp-alert, /rp, the tool guard, the read-only pin); its
    # agent/created listener runs after the selection freeze registered above.
    await install_rp(ctx, selections, lambda: settings.follow_character)
    # The v2 play workspace: files, play sessions, playthroughs, operation logs, chrome.
    play = await install_play(ctx, resources, selections)
    mvu.context_lease = play.context_lease  # prompt-read leases of play sessions
    mvu.context_lease_now = play.context_lease_now
    # Group playthroughs (v2 /groups/:id/playthroughs, /sessions/:id/group*): each group
    # turn is assembled as its speaker.
    await install_group_play(ctx, resources, groups, play, loader)
    # Opening drafts: a new playthrough's opening before its first send (v2 /drafts*).
    await install_openings(ctx, play, mvu, follow_character=lambda: settings.follow_character)
    # The opening manifest (shipped + openingManifestPath) serves both features below.
    manifest = await configured_manifest(ctx)
    # Rendering cache storage: inert graphs, sources, the opening snapshot (v1 /rendering-cache).
    await install_rendering_cache(ctx, manifest)
    # Session opening world books (tavernOpeningWorldBooks, v1 /sessions/:id/opening-worldbook).
    await install_opening_books(ctx, resources, selections, loader, memory_sources, manifest)
    for route in v1_routes(resources):
        ctx.add_route(
            route.method,
            V1_PREFIX + route.path,
            route.handler,
            name=route.name,
            max_body=route.max_body,
            accepts=route.accepts,
            json_limits=route.json_limits,
        )


def _name_of(resources: TavernResources, kind: ResourceKind, resource_id: str) -> str | None:
    """A deleted resource's display name, where one survives the deletion (a card's tombstone)."""
    if kind != "character-card":
        return None
    missing = resources.character_state.state.missing_characters
    return next((t.name for t in missing if t.id == resource_id), None)


async def _acquire(lock: DataDirLock, ctx: PluginContext) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + LOCK_WAIT_SECONDS
    warned = False
    while True:
        try:
            await asyncio.to_thread(lock.acquire)
            return
        except DataDirLockedError:
            if loop.time() >= deadline:
                raise
            if not warned:
                ctx.logger.warning("waiting for %s (an offline import is running)", lock.path)
                warned = True
            await asyncio.sleep(_LOCK_POLL_SECONDS)
