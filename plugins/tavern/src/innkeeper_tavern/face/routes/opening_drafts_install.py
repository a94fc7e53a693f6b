"""Card openings (issue "Openings and card execution"): sessionless opening drafts under
``/pmp-dsh-tavern/api/v2/drafts`` with each greeting's opening variables.

:func:`install_openings` wires it into the plugin over the play workspace (catalog CAS,
sessions, operation log) and the MVU service's card templates.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from innkeeper_hostapi import PluginContext
from innkeeper_hostapi.mvu import MvuServiceError
from innkeeper_tavern.face.routes.opening_drafts import draft_routes, register_card_routes
from innkeeper_tavern.face.routes.play import register
from innkeeper_tavern.features.mvu_service import MvuService
from innkeeper_tavern.features.mvu_service.instances import edited_candidate
from innkeeper_tavern.features.mvu_service.templates import Template, opening
from innkeeper_tavern.features.opening_drafts.cards import CardBindings
from innkeeper_tavern.features.opening_drafts.drafts import Drafts
from innkeeper_tavern.features.opening_drafts.grants import (
    TAVERN_RENDERING_AUTHORITY,
    RenderingAuthority,
)
from innkeeper_tavern.features.opening_drafts.prompt import draft_prompt
from innkeeper_tavern.features.opening_drafts.records import (
    DraftRecord,
    DraftStore,
    OpeningValue,
    remember_within,
)
from innkeeper_tavern.features.opening_drafts.snapshots import OpeningSnapshots
from innkeeper_tavern.features.play import Play
from innkeeper_tavern.features.play.errors import PlayError
from innkeeper_tavern.pure.mvu import MvuError
from innkeeper_tavern.state.session_bindings.model import Selection

__all__ = ["Drafts", "install_openings"]

#: Bytes of generated openings' JSON kept in memory (8 greetings of 2 MiB, twice).
OPENING_CACHE_BYTES = 32 << 20
#: Variables were sent for a card that carries no MVU data.
OPENING_UNAVAILABLE = "DRAFT_VARIABLES_UNAVAILABLE"


async def install_openings(
    ctx: PluginContext,
    play: Play,
    mvu: MvuService,
    *,
    follow_character: Callable[[], bool] = lambda: True,
) -> Drafts:
    """Register the draft routes (``follow_character``: whether binding a card enters RP, so
    the first send carries the RP policy)."""

    #: Generated openings (with their JSON) by (card, template version, greeting): recent ones.
    cache: OrderedDict[tuple[str, str, int], OpeningValue] = OrderedDict()

    def generate(template: Template, greeting_index: int) -> OpeningValue:
        return OpeningValue.of(opening(template, greeting_index))

    async def openings(character_id: str, greeting_index: int) -> tuple[OpeningValue, str] | None:
        template = await mvu.character_template(character_id)
        if template is None:
            return None
        key = (character_id, template.version_key, greeting_index)
        value = cache.get(key)
        if value is None:
            try:
                value = await asyncio.to_thread(generate, template, greeting_index)
            except MvuError as exc:
                raise PlayError(409, exc.code, exc.message) from None
            cache[key] = value
        cache.move_to_end(key)
        remember_within(cache, OPENING_CACHE_BYTES)
        return value, template.version_key

    async def check(
        character_id: str, greeting_index: int, variables: dict[str, Any]
    ) -> dict[str, Any]:
        template = await mvu.character_template(character_id)
        if template is None:
            raise PlayError(409, OPENING_UNAVAILABLE, "the card carries no MVU variables")
        generated = await openings(character_id, greeting_index)
        assert generated is not None
        try:
            base = generated[0]
            return await asyncio.to_thread(lambda: edited_candidate(base.variables, variables))
        except MvuError as exc:
            raise PlayError(409, exc.code, exc.message) from None
        except MvuServiceError as exc:
            raise PlayError(exc.status, exc.code, exc.message) from None

    async def transfer(record: DraftRecord, session_id: str) -> None:
        """First send: the selected opening, with the player's edits, starts the session."""
        key = str(record.selection.greeting_index)
        kept = record.openings.get(key)
        if kept is None or not kept.edited:
            return  # the service generates the selected greeting's opening itself
        edited = await drafts.store.load_edit(record.id, key, kept)
        try:
            await mvu.install_opening(session_id=session_id, content=edited.variables)
        except MvuServiceError as exc:
            if exc.code != "MVU_OPENING_INSTALLED":  # an interrupted materialize resumed
                raise PlayError(exc.status, exc.code, exc.message) from None

    drafts = Drafts(
        DraftStore(ctx.data_dir),
        play.playthroughs,
        play.sessions,
        openings=openings,
        check=check,
        logger=ctx.logger,
    )
    drafts.prepare_hooks.append(transfer)

    async def prompt(selection: Selection, variables: Any) -> dict[str, Any]:
        return await draft_prompt(ctx, selection, variables, rp=follow_character())

    drafts.prompt = prompt
    snapshots = OpeningSnapshots(play, mvu)
    snapshots.drafts = drafts
    mvu.opening_snapshots = snapshots.snapshot
    mvu.message_membership = snapshots.message_membership

    def unset() -> None:
        mvu.opening_snapshots = None
        mvu.message_membership = None

    ctx.on_dispose(unset)
    authority = RenderingAuthority()
    ctx.provide(TAVERN_RENDERING_AUTHORITY, lambda: authority)
    cards = CardBindings(play, mvu, authority, snapshots)
    ctx.on_dispose(authority.close)
    ctx.on_dispose(cards.close)
    register_card_routes(ctx, authority, cards)
    register(ctx, draft_routes(drafts, play.oplog))
    return drafts
