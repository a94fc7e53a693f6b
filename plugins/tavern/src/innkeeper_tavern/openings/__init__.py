"""Card openings (issue "Openings and card execution"): sessionless opening drafts under
``/pmp-dsh-tavern/api/v2/drafts`` with each greeting's opening variables.

:func:`install_openings` wires it into the plugin over the play workspace (catalog CAS,
sessions, operation log) and the MVU service's card templates.
"""

from __future__ import annotations

import asyncio
from typing import Any

from innkeeper_hostapi import PluginContext
from innkeeper_tavern.mvu import MvuError
from innkeeper_tavern.mvu_service import MvuService
from innkeeper_tavern.mvu_service.templates import opening
from innkeeper_tavern.play import Play
from innkeeper_tavern.play.errors import PlayError
from innkeeper_tavern.play.routes import register

from .drafts import Drafts
from .records import DraftStore
from .routes import draft_routes

__all__ = ["Drafts", "install_openings"]

#: The opening could not be initialized (invalid path or schema violation).
OPENING_REJECTED = "MVU_OPENING_REJECTED"


async def install_openings(ctx: PluginContext, play: Play, mvu: MvuService) -> Drafts:
    """Register the draft routes."""

    async def openings(character_id: str, greeting_index: int) -> tuple[dict[str, Any], str] | None:
        template = await mvu.character_template(character_id)
        if template is None:
            return None
        try:
            variables = await asyncio.to_thread(opening, template, greeting_index)
        except MvuError as exc:
            raise PlayError(409, exc.code, exc.message) from None
        return variables, template.version_key

    drafts = Drafts(
        DraftStore(ctx.data_dir),
        play.playthroughs,
        play.sessions,
        openings=openings,
        logger=ctx.logger,
    )
    register(ctx, draft_routes(drafts, play.oplog))
    return drafts
