"""Session selection routes of the v1 bundled UI contract.

`docs/contract/http-api.md#prefixes`:

========  ===========================  ===================================================
GET       ``/presets?sessionId=``      preset catalog and the session's (or global) selectedId
POST      ``/select``                  ``{id, sessionId?}``: select/clear a preset; no
                                       ``sessionId`` sets the global default
GET/POST  ``/character-selection``     card binding and options (greeting index)
GET/POST  ``/user-selection``          user binding and the user document; no ``sessionId``
                                       reads/sets the global default persona
GET/POST  ``/world-book-selection``    explicit session world books and their summaries
GET/POST  ``/authors-note``            the chat's Author's Note (text, depth, role, interval)
========  ===========================  ===================================================

Write rule (`docs/contract/loader.md#running-agent`): a session-scoped write
asks the host whether that session's agent is running a turn and answers 409
``PRESET_AGENT_RUNNING`` / ``CHARACTER_AGENT_RUNNING`` / ``USER_AGENT_RUNNING`` /
``WORLD_BOOK_AGENT_RUNNING`` without writing. The global default (``POST /select`` without a
session) is not session-scoped and never 409s. Template apply and resource deletion are the
documented indirect paths and do not pass through here.

A write to a session that has no selection yet starts from what its agent would freeze (its
parent's selection for a fork or a delegated session, else the current defaults), so binding a
card before the first message does not lose the inherited preset. Writes need an existing host
session (404 ``SESSION_NOT_FOUND``): the store never evicts, so it must not fill up with ids of
sessions that do not exist. Reads of an unknown or absent session answer the defaults.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Final, Literal

import msgspec
from aiohttp import web

from innkeeper_hostapi import HttpProblem, PluginContext, json_response
from innkeeper_hostapi.agents import AGENTS, SESSIONS
from innkeeper_hostapi.http import read_struct
from innkeeper_hostapi.sessions import SessionController
from innkeeper_tavern.pure.api_paths import V1_PREFIX
from innkeeper_tavern.state.resources import TavernResources
from innkeeper_tavern.state.session_bindings import setup_session_selections
from innkeeper_tavern.state.session_bindings.lifecycle import pending_selection, session_known
from innkeeper_tavern.state.session_bindings.model import (
    MAX_AUTHORS_NOTE_CHARS,
    MAX_SAFE_INTEGER,
    MAX_WORLD_BOOKS_PER_SESSION,
    AuthorsNote,
    CharacterOptions,
    Selection,
    SelectionInvalid,
    check_session_id,
    note_of,
    valid_resource_id,
)
from innkeeper_tavern.state.session_bindings.store import SelectionStoreError, SessionSelectionStore

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

#: `docs/contract/http-api.md#prefixes`: prefix of every v1 route.
#: Selection bodies are a session id and at most 100 ids of ≤ 200 characters: 64 KiB is ample
#: (`docs/contract/http-api.md#v1-limits`: small configuration writes).
SELECTION_BODY_LIMIT: Final = 64 << 10

# Running-agent rejections (`docs/contract/loader.md#running-agent`).
PRESET_AGENT_RUNNING: Final = "PRESET_AGENT_RUNNING"
CHARACTER_AGENT_RUNNING: Final = "CHARACTER_AGENT_RUNNING"
USER_AGENT_RUNNING: Final = "USER_AGENT_RUNNING"
WORLD_BOOK_AGENT_RUNNING: Final = "WORLD_BOOK_AGENT_RUNNING"
AUTHORS_NOTE_AGENT_RUNNING: Final = "AUTHORS_NOTE_AGENT_RUNNING"
#: A write names a session the host does not know (404).
SESSION_NOT_FOUND: Final = "SESSION_NOT_FOUND"
#: A bound resource does not exist (404), as the resource routes answer.
PRESET_NOT_FOUND: Final = "PRESET_NOT_FOUND"
CHARACTER_NOT_FOUND: Final = "CHARACTER_NOT_FOUND"
USER_NOT_FOUND: Final = "USER_NOT_FOUND"
WORLD_BOOK_NOT_FOUND: Final = "WORLD_BOOK_NOT_FOUND"
#: ``character.greetingIndex`` is outside the card's greetings (400).
CHARACTER_SELECTION_INVALID: Final = "CHARACTER_SELECTION_INVALID"
#: More than 100 world books, or a bad id (400).
WORLD_BOOK_SELECTION_INVALID: Final = "WORLD_BOOK_SELECTION_INVALID"

GreetingIndex = Annotated[int, msgspec.Meta(ge=0, le=MAX_SAFE_INTEGER)]


class _SelectBody(msgspec.Struct, forbid_unknown_fields=True, rename="camel"):
    id: str | None
    session_id: str | None = None


class _CharacterOptionsBody(msgspec.Struct, forbid_unknown_fields=True, rename="camel"):
    greeting_index: GreetingIndex = 0
    prefer_character_system_prompt: bool = True
    prefer_character_post_history: bool = True


class _CharacterBody(msgspec.Struct, forbid_unknown_fields=True, rename="camel"):
    session_id: str
    character_card_id: str | None
    character: _CharacterOptionsBody | None = None


class _UserBody(msgspec.Struct, forbid_unknown_fields=True, rename="camel"):
    user_id: str | None
    #: Omitted (or null): the global default persona of new sessions.
    session_id: str | None = None


class _WorldBookBody(msgspec.Struct, forbid_unknown_fields=True, rename="camel"):
    session_id: str
    world_book_ids: list[str]


class _NoteBody(msgspec.Struct, forbid_unknown_fields=True, rename="camel"):
    text: Annotated[str, msgspec.Meta(max_length=MAX_AUTHORS_NOTE_CHARS)]
    depth: Annotated[int, msgspec.Meta(ge=0, le=10_000)] = 4
    role: Literal["system", "user", "assistant"] = "system"
    interval: Annotated[int, msgspec.Meta(ge=0, le=10_000)] = 1


class _AuthorsNoteBody(msgspec.Struct, forbid_unknown_fields=True, rename="camel"):
    session_id: str
    authors_note: _NoteBody | None


def _note_wire(note: AuthorsNote | None) -> dict[str, Any] | None:
    return None if note is None else msgspec.to_builtins(note)


def _handler(fn: Handler) -> Handler:
    """Answer store errors in the spec's shape ``{ok:false, error, code}``."""

    @functools.wraps(fn)
    async def wrapped(request: web.Request) -> web.StreamResponse:
        try:
            return await fn(request)
        except SelectionInvalid as exc:
            raise HttpProblem(400, exc.code, exc.message) from None
        except SelectionStoreError as exc:
            raise HttpProblem(exc.status, exc.code, exc.message) from None

    return wrapped


def _ok(**fields: Any) -> web.Response:
    return json_response({"ok": True, **fields})


def _query_session(request: web.Request) -> str | None:
    """``?sessionId=``: absent or empty means "no session"; anything else must be valid."""
    value = request.query.get("sessionId", "")
    return check_session_id(value) if value else None


def _character_view(
    selection: Selection, resources: TavernResources
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """``(selection, character)`` of ``/character-selection``; both ``None`` when no live card
    is bound. A stored greeting index past the card's greetings reads as the last one."""
    card_id = selection.character_card_id
    entry = resources.characters.entry(card_id) if card_id is not None else None
    if card_id is None or entry is None:
        return None, None
    options = selection.character
    greetings = entry.summary.get("greetingCount", 1)
    last = max(0, greetings - 1) if isinstance(greetings, int) else 0
    wire = {
        "characterCardId": card_id,
        "character": {
            "greetingIndex": min(options.greeting_index or 0, last),
            "preferCharacterSystemPrompt": options.prefer_character_system_prompt is not False,
            "preferCharacterPostHistory": options.prefer_character_post_history is not False,
        },
    }
    summary = {
        "id": entry.id,
        "name": entry.name,
        "sourceFormat": entry.summary.get("format"),
        "specVersion": entry.summary.get("specVersion"),
    }
    return wire, summary


def register_selection_routes(
    ctx: PluginContext,
    store: SessionSelectionStore,
    resources: TavernResources,
    *,
    preset_catalog: bool = True,
) -> None:
    """Register the selection routes under :data:`V1_PREFIX` through ``ctx``.

    ``preset_catalog=False`` leaves ``GET /presets`` to another module (it then reads the
    selected id with :func:`selected_preset_id`).
    """

    def sessions_service() -> SessionController | None:
        return ctx.get_optional(SESSIONS)

    async def current(session_id: str | None) -> Selection:
        if session_id is None:
            return store.defaults()
        return await pending_selection(store, session_id, sessions_service())

    async def writable(session_id: str, running_code: str, what: str) -> Selection:
        """Check a session write may proceed; returns the session's starting selection."""
        check_session_id(session_id)
        sessions = sessions_service()
        if not await session_known(store, session_id, sessions):
            raise HttpProblem(404, SESSION_NOT_FOUND, f"session {session_id} does not exist")
        if ctx.get(AGENTS).is_running(session_id):
            raise HttpProblem(
                409,
                running_code,
                f"the session's agent is running; change the {what} after the current turn "
                "finishes",
            )
        return await pending_selection(store, session_id, sessions)

    # ------------------------------------------------------------------ presets

    @_handler
    async def list_presets(request: web.Request) -> web.StreamResponse:
        session_id = _query_session(request)
        selection = await current(session_id)
        return _ok(presets=resources.list_presets(), selectedId=selection.preset_id)

    @_handler
    async def select_preset(request: web.Request) -> web.StreamResponse:
        body = await read_struct(request, _SelectBody)
        preset_id = body.id
        entry = None
        if preset_id is not None:
            entry = resources.presets.entry(preset_id) if valid_resource_id(preset_id) else None
            if entry is None:
                raise HttpProblem(
                    404, PRESET_NOT_FOUND, f"preset {preset_id[:100]!r} does not exist"
                )
        if body.session_id:
            base = await writable(body.session_id, PRESET_AGENT_RUNNING, "preset")
            await store.update(
                body.session_id,
                lambda s: msgspec.structs.replace(s, preset_id=preset_id),
                base=base,
            )
        else:
            await store.global_preset.select(preset_id)
        selected = None if entry is None else {"id": entry.id, "name": entry.name}
        return _ok(selected=selected)

    # ------------------------------------------------------------------ character

    async def character_payload(session_id: str | None) -> web.Response:
        if session_id is None:
            return _ok(selection=None, character=None)
        wire, summary = _character_view(await current(session_id), resources)
        return _ok(selection=wire, character=summary)

    @_handler
    async def get_character(request: web.Request) -> web.StreamResponse:
        return await character_payload(_query_session(request))

    @_handler
    async def post_character(request: web.Request) -> web.StreamResponse:
        body = await read_struct(request, _CharacterBody)
        card_id = body.character_card_id
        base = await writable(body.session_id, CHARACTER_AGENT_RUNNING, "character")
        if card_id is None:
            options = CharacterOptions()
        else:
            entry = resources.characters.entry(card_id) if valid_resource_id(card_id) else None
            if entry is None:
                raise HttpProblem(
                    404, CHARACTER_NOT_FOUND, f"character {card_id[:100]!r} does not exist"
                )
            requested = body.character or _CharacterOptionsBody()
            greetings = entry.summary.get("greetingCount", 1)
            last = max(0, greetings - 1) if isinstance(greetings, int) else 0
            if requested.greeting_index > last:
                raise HttpProblem(
                    400,
                    CHARACTER_SELECTION_INVALID,
                    f"greetingIndex must be between 0 and {last}",
                )
            options = CharacterOptions(
                greeting_index=requested.greeting_index,
                prefer_character_system_prompt=requested.prefer_character_system_prompt,
                prefer_character_post_history=requested.prefer_character_post_history,
            )
        for guard in list(store.character_guards):
            await guard(body.session_id, card_id)
        await store.update(
            body.session_id,
            lambda s: msgspec.structs.replace(s, character_card_id=card_id, character=options),
            base=base,
        )
        if base.character_card_id != card_id:
            for listener in list(store.character_listeners):
                await listener(body.session_id, base.character_card_id, card_id)
        return await character_payload(body.session_id)

    # ------------------------------------------------------------------ user

    async def user_payload(session_id: str | None) -> web.Response:
        # Without a session: the global default persona (what a new session freezes).
        user_id = (await current(session_id)).user_id
        if user_id is None or not resources.users.exists(user_id):
            return _ok(selection=None, user=None)
        record = await resources.users.get(user_id)
        user: dict[str, Any] = {
            "id": record.id,
            "name": record.body.name,
            "description": record.body.description,
        }
        if record.body.avatar is not None:
            user["avatar"] = record.body.avatar
        return _ok(selection={"userId": user_id}, user=user)

    @_handler
    async def get_user(request: web.Request) -> web.StreamResponse:
        return await user_payload(_query_session(request))

    @_handler
    async def post_user(request: web.Request) -> web.StreamResponse:
        body = await read_struct(request, _UserBody)
        user_id = body.user_id
        base = None
        if body.session_id:
            base = await writable(body.session_id, USER_AGENT_RUNNING, "user")
        if user_id is not None and not (
            valid_resource_id(user_id) and resources.users.exists(user_id)
        ):
            raise HttpProblem(404, USER_NOT_FOUND, f"user {user_id[:100]!r} does not exist")
        if not body.session_id or base is None:
            await store.global_user.select(user_id)
            return await user_payload(None)
        await store.update(
            body.session_id, lambda s: msgspec.structs.replace(s, user_id=user_id), base=base
        )
        return await user_payload(body.session_id)

    # ------------------------------------------------------------------ world books

    def world_book_payload(ids: tuple[str, ...]) -> web.Response:
        books: list[dict[str, Any]] = []
        for book_id in ids:
            entry = resources.world_books.entry(book_id)
            if entry is None:
                books.append({"id": book_id, "missing": True})
            else:
                books.append(
                    {
                        "id": entry.id,
                        "name": entry.name,
                        "createdAt": entry.created_at,
                        "updatedAt": entry.updated_at,
                        **entry.summary,
                    }
                )
        return _ok(selection={"worldBookIds": list(ids)}, worldBooks=books)

    @_handler
    async def get_world_books(request: web.Request) -> web.StreamResponse:
        session_id = _query_session(request)
        if session_id is None:
            return world_book_payload(())
        return world_book_payload((await current(session_id)).world_book_ids)

    @_handler
    async def post_world_books(request: web.Request) -> web.StreamResponse:
        body = await read_struct(request, _WorldBookBody)
        base = await writable(body.session_id, WORLD_BOOK_AGENT_RUNNING, "world books")
        ids = tuple(dict.fromkeys(body.world_book_ids))  # de-duplicated, first occurrence wins
        if len(ids) > MAX_WORLD_BOOKS_PER_SESSION:
            raise HttpProblem(
                400,
                WORLD_BOOK_SELECTION_INVALID,
                f"a session can bind at most {MAX_WORLD_BOOKS_PER_SESSION} world books",
            )
        for book_id in ids:
            if not valid_resource_id(book_id):
                raise HttpProblem(
                    400, WORLD_BOOK_SELECTION_INVALID, "every worldBookId must be a non-empty id"
                )
            if not resources.world_books.exists(book_id):
                raise HttpProblem(
                    404, WORLD_BOOK_NOT_FOUND, f"world book {book_id[:100]!r} does not exist"
                )
        selection = await store.update(
            body.session_id,
            lambda s: msgspec.structs.replace(s, world_book_ids=ids),
            base=base,
        )
        return world_book_payload(selection.world_book_ids)

    # ------------------------------------------------------------------ author's note

    @_handler
    async def get_note(request: web.Request) -> web.StreamResponse:
        session_id = _query_session(request)
        note = note_of(await current(session_id)) if session_id is not None else None
        return _ok(authorsNote=_note_wire(note))

    @_handler
    async def post_note(request: web.Request) -> web.StreamResponse:
        body = await read_struct(request, _AuthorsNoteBody)
        base = await writable(body.session_id, AUTHORS_NOTE_AGENT_RUNNING, "Author's Note")
        given = body.authors_note
        note = (
            None
            if given is None
            else AuthorsNote(
                text=given.text, depth=given.depth, role=given.role, interval=given.interval
            )
        )
        selection = await store.update(
            body.session_id,
            lambda s: msgspec.structs.replace(s, authors_note=note or msgspec.UNSET),
            base=base,
        )
        return _ok(authorsNote=_note_wire(note_of(selection)))

    # ------------------------------------------------------------------ registration

    limit = SELECTION_BODY_LIMIT
    rows: list[tuple[str, str, Handler, str]] = [
        ("POST", "/select", select_preset, "tavern.v1.presets.select"),
        ("GET", "/character-selection", get_character, "tavern.v1.character_selection.get"),
        ("POST", "/character-selection", post_character, "tavern.v1.character_selection.post"),
        ("GET", "/user-selection", get_user, "tavern.v1.user_selection.get"),
        ("POST", "/user-selection", post_user, "tavern.v1.user_selection.post"),
        ("GET", "/world-book-selection", get_world_books, "tavern.v1.world_book_selection.get"),
        ("POST", "/world-book-selection", post_world_books, "tavern.v1.world_book_selection.post"),
        ("GET", "/authors-note", get_note, "tavern.v1.authors_note.get"),
        ("POST", "/authors-note", post_note, "tavern.v1.authors_note.post"),
    ]
    if preset_catalog:
        rows.insert(0, ("GET", "/presets", list_presets, "tavern.v1.presets.list"))
    for method, path, handler, name in rows:
        ctx.add_route(
            method,
            V1_PREFIX + path,
            handler,
            name=name,
            max_body=limit if method == "POST" else None,
        )


async def install_session_selections(
    ctx: PluginContext, resources: TavernResources, *, preset_catalog: bool = True
) -> SessionSelectionStore:
    """The whole selection feature in one call for the plugin's setup: open the store, provide
    it, freeze selections at ``agent/created`` and register the selection routes."""
    store = await setup_session_selections(ctx)
    register_selection_routes(ctx, store, resources, preset_catalog=preset_catalog)
    return store


async def selected_preset_id(
    ctx: PluginContext, store: SessionSelectionStore, session_id: str | None
) -> str | None:
    """``selectedId`` of ``GET /presets?sessionId=``: the session's preset (what it has or
    would freeze), or the global default without a session. Raises
    :class:`~innkeeper_tavern.state.session_bindings.model.SelectionInvalid` for a malformed
    session id."""
    if not session_id:
        return store.defaults().preset_id
    check_session_id(session_id)
    selection = await pending_selection(store, session_id, ctx.get_optional(SESSIONS))
    return selection.preset_id


__all__ = [
    "CHARACTER_AGENT_RUNNING",
    "PRESET_AGENT_RUNNING",
    "SELECTION_BODY_LIMIT",
    "USER_AGENT_RUNNING",
    "V1_PREFIX",
    "WORLD_BOOK_AGENT_RUNNING",
    "install_session_selections",
    "register_selection_routes",
    "selected_preset_id",
]
