"""``POST /pmp-dsh-tavern/api/v1/preset-admission``: what a preset's samplers become in a request.

The preset editor asks it while the player moves a slider: the answer runs the turn's own
proposal and admission (`docs/prompt-assembly.md#call-config`) against the configured provider,
over the stored preset with the unsaved sampling edit applied (validated as ``PUT /presets/{id}``
validates it). It reads; it never writes (a POST only because it carries the edit).
"""

from __future__ import annotations

from typing import Final

from aiohttp import web

from innkeeper_hostapi import HttpProblem, PluginContext
from innkeeper_hostapi.agents import PROVIDER
from innkeeper_tavern.features.prompt_profile.admission_view import explain_admission
from innkeeper_tavern.pure.api_paths import V1_PREFIX
from innkeeper_tavern.pure.formats.preset import PRESET_INVALID, blank_preset, edit_preset
from innkeeper_tavern.state.resources import TavernResources
from innkeeper_tavern.state.resources.errors import PRESET_NOT_FOUND
from innkeeper_tavern.state.resources.library import valid_id

from .common import bad_request, handler, json_object, ok

__all__ = ["install_preset_admission"]

#: ``{presetId?, sampling?}``: a sampling object of at most 14 fields fits easily.
ADMISSION_BODY_LIMIT: Final = 16 << 10


def install_preset_admission(ctx: PluginContext, res: TavernResources) -> None:
    """Register the route (one call from the plugin setup)."""

    @handler
    async def preset_admission(request: web.Request) -> web.StreamResponse:
        body = await json_object(request)
        unknown = sorted(set(body) - {"presetId", "sampling"})
        if unknown:
            raise bad_request(
                f"unknown field {unknown[0]!r}; the body is {{presetId?, sampling?}}",
                PRESET_INVALID,
            )
        preset_id = body.get("presetId")
        if preset_id is None:
            preset = blank_preset("draft")
        elif not isinstance(preset_id, str) or not valid_id(preset_id):
            raise HttpProblem(404, PRESET_NOT_FOUND, "presetId names no preset")
        else:
            preset = (await res.presets.get(preset_id)).body
        if "sampling" in body:
            preset = edit_preset(preset, {"sampling": body["sampling"]})
        return ok(admission=explain_admission(preset, ctx.get_optional(PROVIDER)))

    ctx.add_route(
        "POST",
        V1_PREFIX + "/preset-admission",
        preset_admission,
        name="tavern.v1.preset-admission",
        max_body=ADMISSION_BODY_LIMIT,
    )
