"""Session configurations: preview and apply a selection projection, with diagnostics.

`docs/contract/loader.md#templates` and `docs/contract/loader.md#templates`:

- a *source* is ``{mode: "current", sessionId}`` (what that session has, or would freeze if its
  agent ran now) or ``{mode: "template", templateId}``;
- :meth:`SessionConfigurations.preview` answers ``{selection, contents, diagnostics,
  available}`` from the resource indexes only: no prompt assembly, no resource body, no write;
- :meth:`SessionConfigurations.apply` refuses a configuration with dangling ids (409
  ``SESSION_CONFIGURATION_UNAVAILABLE`` with the diagnostics: they "block create"), then
  commits the complete selection with one atomic ``SessionSelectionStore.set`` — a failed write
  changes nothing; a template's apply is then recorded in :mod:`.bindings` (the ``template``
  memory source lists it as bound to the session).

Apply does **not** check whether the target session's agent is running
(`docs/contract/loader.md#running-agent`: applying a configuration or a template is one of the
paths the running-turn check does not cover). A finished system assembly is a snapshot, so the
overwrite only affects later requests; the answer says so with ``agentRunning``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Literal

import msgspec

from innkeeper_hostapi.sessions import SessionController
from innkeeper_tavern.state.resources import TavernResources
from innkeeper_tavern.state.resources.library import DocumentLibrary
from innkeeper_tavern.state.session_bindings.lifecycle import pending_selection, session_known
from innkeeper_tavern.state.session_bindings.model import ResourceKind, Selection, check_session_id
from innkeeper_tavern.state.session_bindings.store import SessionSelectionStore

from .bindings import TemplateBindings
from .errors import (
    INVALID_SESSION_TEMPLATE_REQUEST,
    SESSION_CONFIGURATION_CHARACTER_MISSING_OR_INVALID,
    SESSION_CONFIGURATION_PRESET_MISSING,
    SESSION_CONFIGURATION_UNAVAILABLE,
    SESSION_CONFIGURATION_USER_MISSING,
    SESSION_CONFIGURATION_WORLD_BOOK_MISSING,
    TemplateError,
)
from .model import selection_to_wire
from .store import SessionTemplateStore

#: A source or target session the host does not know (404), as the selection routes answer.
SESSION_NOT_FOUND: Final = "SESSION_NOT_FOUND"

SessionsLookup = Callable[[], SessionController | None]
RunningCheck = Callable[[str], bool]


@dataclass(frozen=True, slots=True)
class Source:
    """Where a configuration comes from: a session's current selection or a template."""

    mode: Literal["current", "template"]
    key: str


def parse_source(value: Any) -> Source:
    """``{mode:"current", sessionId}`` or ``{mode:"template", templateId}``, nothing else."""
    if not isinstance(value, dict):
        raise TemplateError(
            400, INVALID_SESSION_TEMPLATE_REQUEST, "source must be an object with a mode"
        )
    mode = value.get("mode")
    field = {"current": "sessionId", "template": "templateId"}.get(
        mode if isinstance(mode, str) else ""
    )
    if field is None:
        raise TemplateError(
            400,
            INVALID_SESSION_TEMPLATE_REQUEST,
            "source.mode must be 'current' or 'template'",
        )
    extra = sorted(k for k in value if k not in ("mode", field))
    if extra:
        raise TemplateError(
            400, INVALID_SESSION_TEMPLATE_REQUEST, f"unsupported source field {extra[0][:60]!r}"
        )
    key = value.get(field)
    if not isinstance(key, str) or not key:
        raise TemplateError(
            400, INVALID_SESSION_TEMPLATE_REQUEST, f"source.{field} must be a non-empty string"
        )
    return Source("current" if mode == "current" else "template", key)


def _diagnostic(code: str, field: str, resource_id: str, message: str) -> dict[str, Any]:
    return {"code": code, "field": field, "resourceId": resource_id, "message": message}


def _reference(library: DocumentLibrary[Any], resource_id: str | None) -> dict[str, Any] | None:
    if resource_id is None:
        return None
    entry = library.entry(resource_id)
    if entry is None:
        return {"id": resource_id, "name": resource_id, "missing": True}
    return {"id": resource_id, "name": entry.name or resource_id, "missing": False}


class SessionConfigurations:
    """Preview, apply and capture selection projections (the templates' service side)."""

    def __init__(
        self,
        resources: TavernResources,
        selections: SessionSelectionStore,
        templates: SessionTemplateStore,
        *,
        sessions: SessionsLookup,
        is_running: RunningCheck,
        bindings: TemplateBindings | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        self.resources = resources
        self.selections = selections
        self.templates = templates
        #: Which template each session's configuration was applied from (``None``: not kept).
        self.bindings = bindings
        self._sessions = sessions
        self._is_running = is_running
        self._logger = logger or logging.getLogger("innkeeper.plugin.tavern.templates")

    # ------------------------------------------------------------------ reads

    def _greeting_count(self, card_id: str) -> int | None:
        entry = self.resources.characters.entry(card_id)
        if entry is None:
            return None
        count = entry.summary.get("greetingCount", 1)
        return count if isinstance(count, int) and not isinstance(count, bool) else 1

    def missing(self, selection: Selection) -> list[tuple[ResourceKind, str]]:
        """Every ``(kind, id)`` the selection names that is not stored."""
        res = self.resources
        out: list[tuple[ResourceKind, str]] = []
        if selection.preset_id is not None and not res.presets.exists(selection.preset_id):
            out.append(("preset", selection.preset_id))
        card = selection.character_card_id
        if card is not None and not res.characters.exists(card):
            out.append(("character-card", card))
        if selection.user_id is not None and not res.users.exists(selection.user_id):
            out.append(("user", selection.user_id))
        out.extend(
            ("world-book", b) for b in selection.world_book_ids if not res.world_books.exists(b)
        )
        return out

    def diagnostics(self, selection: Selection) -> list[dict[str, Any]]:
        """Structured diagnostics for every dangling reference (empty: applicable).

        A card whose greeting index is past its greetings counts as invalid: the card or greeting
        is dangling (`docs/contract/loader.md#templates`).
        """
        out: list[dict[str, Any]] = []
        res = self.resources
        preset = selection.preset_id
        if preset is not None and not res.presets.exists(preset):
            out.append(
                _diagnostic(
                    SESSION_CONFIGURATION_PRESET_MISSING,
                    "presetId",
                    preset,
                    f"preset {preset} is missing or was deleted",
                )
            )
        card = selection.character_card_id
        if card is not None:
            greetings = self._greeting_count(card)
            index = selection.character.greeting_index
            if greetings is None:
                message = f"character card {card} is missing or was deleted"
            elif index is not None and index >= max(1, greetings):
                message = (
                    f"character card {card} has {greetings} greetings; greetingIndex {index} "
                    "no longer exists"
                )
            else:
                message = ""
            if message:
                out.append(
                    _diagnostic(
                        SESSION_CONFIGURATION_CHARACTER_MISSING_OR_INVALID,
                        "characterCardId",
                        card,
                        message,
                    )
                )
        user = selection.user_id
        if user is not None and not res.users.exists(user):
            out.append(
                _diagnostic(
                    SESSION_CONFIGURATION_USER_MISSING,
                    "userId",
                    user,
                    f"user {user} is missing or was deleted",
                )
            )
        for book in selection.world_book_ids:
            if not res.world_books.exists(book):
                out.append(
                    _diagnostic(
                        SESSION_CONFIGURATION_WORLD_BOOK_MISSING,
                        "worldBookIds",
                        book,
                        f"world book {book} is missing or was deleted",
                    )
                )
        return out

    def contents(self, selection: Selection) -> dict[str, Any]:
        """Resource references (``{id, name, missing}``) and character options; no bodies."""
        res = self.resources
        return {
            "preset": _reference(res.presets, selection.preset_id),
            "characterCard": _reference(res.characters, selection.character_card_id),
            "user": _reference(res.users, selection.user_id),
            "worldBooks": [_reference(res.world_books, b) for b in selection.world_book_ids],
            "character": msgspec.to_builtins(selection.character),
        }

    async def require_session(self, session_id: str) -> None:
        """``session_id`` must be a valid id of a session the host (or the store) knows."""
        check_session_id(session_id)
        if not await session_known(self.selections, session_id, self._sessions()):
            raise TemplateError(404, SESSION_NOT_FOUND, f"session {session_id} does not exist")

    async def session_selection(self, session_id: str) -> Selection:
        """What ``session_id`` has, or would freeze now (the "current settings"); no write."""
        await self.require_session(session_id)
        return await pending_selection(self.selections, session_id, self._sessions())

    async def resolve(self, source: Source) -> Selection:
        """The selection ``source`` names."""
        if source.mode == "current":
            return await self.session_selection(source.key)
        return self.templates.get(source.key).selection

    async def preview(self, source: Source) -> dict[str, Any]:
        """``{selection, contents, diagnostics, available}``; reads indexes only."""
        selection = await self.resolve(source)
        diagnostics = self.diagnostics(selection)
        return {
            "selection": selection_to_wire(selection),
            "contents": self.contents(selection),
            "diagnostics": diagnostics,
            "available": not diagnostics,
        }

    # ------------------------------------------------------------------ apply

    async def apply(self, target_session_id: str, source: Source) -> dict[str, Any]:
        """Validate, then write the complete selection to the target in one atomic write.

        Raises :class:`TemplateError` 409 ``SESSION_CONFIGURATION_UNAVAILABLE`` (with
        ``diagnostics``) when a reference dangles; nothing is written then. The character it
        would bind is checked by the store's ``character_guards`` exactly as
        ``POST /character-selection`` checks it: a target that belongs to a playthrough of
        another card answers 409 ``CHARACTER_PLAYTHROUGH_DETACH_REQUIRED`` with
        ``details.conflicts`` (docs/play.md "Playthroughs"), nothing written.
        Store errors
        (``SelectionStoreError``: full store, storage limit, failed write) propagate and leave
        the previous selection in place.
        """
        await self.require_session(target_session_id)
        selection = await self.resolve(source)
        diagnostics = self.diagnostics(selection)
        if diagnostics:
            raise TemplateError(
                409,
                SESSION_CONFIGURATION_UNAVAILABLE,
                "the session configuration refers to missing or invalid Tavern resources",
                extra={"diagnostics": diagnostics},
            )
        # The whole selection replaces the target's, its card included: a playthrough's session
        # must not silently change card under it (the play workspace's guard refuses).
        for guard in list(self.selections.character_guards):
            await guard(target_session_id, selection.character_card_id)
        running = self._is_running(target_session_id)
        applied = await self.selections.set(target_session_id, selection)
        # A resource deleted between the check and the write would be cleared by its deletion
        # listener *before* our write landed; clear it again so no dangling id stays bound.
        for kind, resource_id in self.missing(applied):
            await self.selections.clear_resource(kind, resource_id)
        stored = self.selections.stored(target_session_id) or applied
        if source.mode == "template" and self.bindings is not None:
            try:
                await self.bindings.record(target_session_id, source.key, stored)
            except OSError as exc:  # provenance only: the applied selection stands
                self._logger.warning(
                    "template binding of %s not recorded: %s", target_session_id, exc
                )
        self._logger.info(
            "session %s: configuration applied from %s %s%s",
            target_session_id,
            source.mode,
            source.key,
            " (its agent is running; later requests use it)" if running else "",
        )
        return {
            "selection": selection_to_wire(stored),
            "diagnostics": [],
            "targetSessionId": target_session_id,
            "agentRunning": running,
        }


__all__ = [
    "SESSION_NOT_FOUND",
    "SessionConfigurations",
    "Source",
    "parse_source",
]
