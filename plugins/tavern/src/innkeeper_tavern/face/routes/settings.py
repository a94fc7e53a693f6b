"""The bundled UI's settings: ``/v1/ui-settings`` and ``/v1/conversation-settings``.

Each is one small document in one atomic file in the plugin data directory
(``ui-settings.json``, ``conversation-settings.json``): GET reads, PUT fully replaces (unknown
fields refused; a rejected write changes nothing), DELETE restores the defaults. docs/webui.md
documents the shapes. The RP package reads :attr:`TavernSettings.ui` for ``rpFollowCharacter``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from aiohttp import web

from innkeeper_hostapi import HttpProblem, PluginContext, json_response, read_json
from innkeeper_tavern.pure.api_paths import V1_PREFIX
from innkeeper_tavern.state.settings.conversation import (
    CONVERSATION_SETTINGS_FILE,
    CONVERSATION_SETTINGS_MAX_BYTES,
    default_conversation_settings,
    validate_conversation_settings,
)
from innkeeper_tavern.state.settings.store import SettingsInvalid, SettingsStore
from innkeeper_tavern.state.settings.ui import (
    UI_SETTINGS_FILE,
    UI_SETTINGS_MAX_BYTES,
    default_ui_settings,
    validate_ui_settings,
)

__all__ = ["SettingsInvalid", "SettingsStore", "TavernSettings", "install_settings"]

#: A ui-settings body is a handful of fields; the route refuses anything much larger.
UI_SETTINGS_MAX_BODY: Final = 4 * 1024


@dataclass(frozen=True)
class TavernSettings:
    """The two settings stores."""

    ui: SettingsStore
    conversation: SettingsStore

    @property
    def follow_character(self) -> bool:
        """``ui-settings.rpFollowCharacter`` (true by default)."""
        return bool(self.ui.document["rpFollowCharacter"])


async def install_settings(ctx: PluginContext) -> TavernSettings:
    """Open both stores and register their routes (all through ``ctx``)."""
    ui = SettingsStore(
        ctx.data_dir / UI_SETTINGS_FILE,
        defaults=default_ui_settings,
        validate=validate_ui_settings,
        max_bytes=UI_SETTINGS_MAX_BYTES,
        logger=ctx.logger,
    )
    conversation = SettingsStore(
        ctx.data_dir / CONVERSATION_SETTINGS_FILE,
        defaults=default_conversation_settings,
        validate=validate_conversation_settings,
        max_bytes=CONVERSATION_SETTINGS_MAX_BYTES,
        logger=ctx.logger,
    )
    await ui.open()
    await conversation.open()
    _routes(ctx, "ui-settings", ui, UI_SETTINGS_MAX_BODY, with_custom=True)
    _routes(ctx, "conversation-settings", conversation, CONVERSATION_SETTINGS_MAX_BYTES)
    return TavernSettings(ui=ui, conversation=conversation)


def _routes(
    ctx: PluginContext, name: str, store: SettingsStore, max_body: int, *, with_custom: bool = False
) -> None:
    def body(document: dict[str, Any]) -> web.Response:
        out: dict[str, Any] = {"ok": True, "settings": document}
        if with_custom:
            out["custom"] = store.custom
        return json_response(out)

    async def get(request: web.Request) -> web.StreamResponse:
        return body(store.document)

    async def put(request: web.Request) -> web.StreamResponse:
        candidate = await read_json(request)
        try:
            document = await store.replace(candidate)
        except SettingsInvalid as exc:
            status = 413 if exc.code == "SETTINGS_TOO_LARGE" else 400
            raise HttpProblem(status, exc.code, exc.message) from None
        return body(document)

    async def delete(request: web.Request) -> web.StreamResponse:
        return body(await store.reset())

    path = f"{V1_PREFIX}/{name}"
    ctx.add_route("GET", path, get, name=f"tavern.{name}.get")
    ctx.add_route("PUT", path, put, name=f"tavern.{name}.put", max_body=max_body)
    ctx.add_route("DELETE", path, delete, name=f"tavern.{name}.delete")
