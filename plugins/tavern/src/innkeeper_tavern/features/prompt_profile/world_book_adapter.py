"""The default world-book adapter: standalone books from the store plus the card's embedded book.

`docs/contract/world-info.md#composition-order` and `docs/contract/loader.md#integration-invariants`
(3): standalone and embedded books share one parser, matcher and activation projection. The loader
hands this adapter the composed selection
(:func:`~innkeeper_tavern.features.prompt_profile.adapters.compose_world_books`); the card's
embedded book enters the same activation after the standalone books, once (a standalone twin of it
is scanned instead). The slots, request/result models and the other store-backed adapters are in
:mod:`.adapters`.
"""

from __future__ import annotations

import asyncio
import collections
import functools
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, Final

import msgspec

from innkeeper_tavern.features.prompt_render import (
    CharacterFields,
    Diagnostic,
    LoreEntry,
    LorePosition,
    PromptRole,
)
from innkeeper_tavern.pure.formats.card import card_world_book
from innkeeper_tavern.pure.formats.errors import FormatError
from innkeeper_tavern.pure.formats.macros import MacroEnv, MacroSession
from innkeeper_tavern.pure.formats.worldbook import Position, Role, WorldBook
from innkeeper_tavern.pure.worldbook import (
    ActivationContext,
    ActivationRequest,
    ActivationResult,
    ActivationSettings,
    ActivationSources,
    BookInput,
    BookSource,
    CharacterIdentity,
    HostLimits,
    MatcherCache,
    ScanLimits,
    TimedEffectsState,
    activate,
    audit_books,
)
from innkeeper_tavern.state.resources import TavernResources
from innkeeper_tavern.state.resources.kinds import WorldBookDocument

from . import mvu_macro
from .adapters import (
    RECORD_CACHE_SIZE,
    RecordCache,
    ResolvedCharacter,
    WorldBookRequest,
    WorldBookResolution,
    embedded_book_id,
)
from .book_memo import BookMemo
from .book_twins import book_fingerprint, fingerprint_update, own_book_twin
from .initvar_notice import initvar_entries, initvar_update, unused_initvar
from .limits import AUDIT_MAX_BOOKS, AUDIT_MAX_DECISIONS

__all__ = [
    "EMBEDDED_WORLD_BOOK_DUPLICATE",
    "EMBEDDED_WORLD_BOOK_INVALID",
    "WORLD_BOOK_NOT_FOUND",
    "StoreWorldBookAdapter",
    "lore_entries",
]

WORLD_BOOK_NOT_FOUND: Final = "WORLD_BOOK_NOT_FOUND"
EMBEDDED_WORLD_BOOK_INVALID: Final = "EMBEDDED_WORLD_BOOK_INVALID"
EMBEDDED_WORLD_BOOK_DUPLICATE: Final = "EMBEDDED_WORLD_BOOK_DUPLICATE"

_POSITIONS: Final[dict[Position, LorePosition]] = {
    Position.BEFORE_CHAR: "before",
    Position.AFTER_CHAR: "after",
    Position.AN_TOP: "an_top",
    Position.AN_BOTTOM: "an_bottom",
    Position.AT_DEPTH: "at_depth",
    Position.EM_TOP: "em_top",
    Position.EM_BOTTOM: "em_bottom",
    Position.OUTLET: "outlet",
}
_ROLES: Final[dict[Role, PromptRole]] = {
    Role.SYSTEM: "system",
    Role.USER: "user",
    Role.ASSISTANT: "assistant",
}
_SOURCE_OF: Final[dict[str, BookSource]] = {
    "session": BookSource.SESSION,
    "user": BookSource.USER,
    "preset": BookSource.PRESET,
    "character": BookSource.CHARACTER,
}


def lore_entries(result: ActivationResult) -> tuple[LoreEntry, ...]:
    """Activated entries with their rank and their slot inside the position bucket."""
    rank = {e.lore_id: i for i, e in enumerate(result.activated)}
    activated = {e.lore_id: e for e in result.activated}
    positions = result.positions
    out: list[LoreEntry] = []

    def emit(lore_id: str, content: str, slot: int, **extra: Any) -> None:
        entry = activated.get(lore_id)
        if entry is None:
            return
        out.append(
            LoreEntry(
                lore_id=lore_id,
                content=content,
                position=_POSITIONS.get(entry.position, "before"),
                rank=rank[lore_id],
                slot=slot,
                depth=entry.depth,
                role=_ROLES.get(entry.role, "system"),
                outlet=entry.outlet_name,
                resource_id=entry.resource_id,
                **extra,
            )
        )

    for bucket in (
        positions.before,
        positions.after,
        positions.an_top,
        positions.an_bottom,
        positions.em_top,
        positions.em_bottom,
    ):
        for slot, item in enumerate(bucket):
            emit(item.lore_id, item.content, slot)
    slot = 0
    for group in positions.at_depth:
        for item in group.entries:
            emit(item.lore_id, item.content, slot)
            slot += 1
    for items in positions.outlets.values():
        for item in items:
            emit(item.lore_id, item.content, slot)
            slot += 1
    out.sort(key=lambda e: e.rank)
    return tuple(out)


#: A hook adding session-scoped books (the opening world books) to the default adapter's
#: matcher: ``(inputs, resource summaries, diagnostics)`` for one request.
SessionBooks = Callable[
    [WorldBookRequest],
    Awaitable[tuple[list[BookInput], list[dict[str, Any]], list[Diagnostic]]],
]


class StoreWorldBookAdapter:
    """The default world-book adapter: standalone books from the store plus the card's embedded
    book, activated by :func:`innkeeper_tavern.pure.worldbook.activate` (off the event loop)."""

    def __init__(self, resources: TavernResources, cache: MatcherCache | None = None) -> None:
        self.books: RecordCache[WorldBookDocument] = RecordCache(resources.world_books)
        self.matchers = cache or MatcherCache()
        self._embedded: collections.OrderedDict[str, tuple[WorldBook | None, str | None]] = (
            collections.OrderedDict()
        )
        #: Whole-book scans answered once per revision (a turn over unchanged books costs none).
        #: After an edit they are updated by the entries that changed, not rescanned.
        self.fingerprints: BookMemo[str] = BookMemo(
            book_fingerprint, RECORD_CACHE_SIZE, fingerprint_update
        )
        self.initvars: BookMemo[int] = BookMemo(initvar_entries, RECORD_CACHE_SIZE, initvar_update)
        #: Session-scoped books joining the standalone ones, in registration order.
        self.session_books: list[SessionBooks] = []

    def _embedded_book(self, character: ResolvedCharacter) -> tuple[WorldBook | None, str | None]:
        key = f"{character.id}:{character.revision}"
        cached = self._embedded.get(key)
        if cached is not None:
            return cached
        try:
            value: tuple[WorldBook | None, str | None] = (card_world_book(character.card), None)
        except FormatError as exc:
            value = (None, exc.message)
        self._embedded[key] = value
        while len(self._embedded) > RECORD_CACHE_SIZE:
            self._embedded.popitem(last=False)
        return value

    async def resolve(self, request: WorldBookRequest) -> WorldBookResolution:
        """Load the composed books, run activation and project it for the renderer."""
        diagnostics: list[Diagnostic] = []
        inputs: list[BookInput] = []
        summaries: list[dict[str, Any]] = []
        selection = request.world_books
        loaded: list[tuple[str, WorldBookDocument]] = []
        revisions: dict[str, str] = {}
        for book_id in selection.effective_ids:
            sources = selection.binding_sources.get(book_id, ())
            found = await self.books.get(book_id)
            if found is None:
                diagnostics.append(
                    Diagnostic(
                        WORLD_BOOK_NOT_FOUND,
                        "a bound world book does not exist",
                        details={"id": book_id},
                    )
                )
                summaries.append({"id": book_id, "missing": True, "bindingSources": list(sources)})
                continue
            record, revision = found
            loaded.append((book_id, record.body))
            revisions[book_id] = revision
            notice = unused_initvar(
                book_id,
                record.body.name,
                record.body.book,
                sources,
                count=functools.partial(self.initvars.get, book_id, revision),
            )
            if notice is not None:
                diagnostics.append(notice)
            source = _SOURCE_OF[sources[0]] if sources else BookSource.SESSION
            inputs.append(
                BookInput(
                    resource_id=book_id,
                    book=record.body.book,
                    source=source,
                    revision=revision,
                    name=record.body.name,
                )
            )
            summaries.append(
                {
                    "id": book_id,
                    "kind": "world-book",
                    "name": record.body.name,
                    "updatedAt": record.updated_at,
                    "bindingSources": list(sources),
                    "entryCount": len(record.body.book.entries),
                }
            )
        for hook in list(self.session_books):
            extra, extra_summaries, extra_diagnostics = await hook(request)
            inputs.extend(extra)
            summaries.extend(extra_summaries)
            diagnostics.extend(extra_diagnostics)
        character = request.character
        if character is not None:
            book, problem = self._embedded_book(character)
            resource_id = embedded_book_id(character.id)
            if problem is not None:
                diagnostics.append(
                    Diagnostic(
                        EMBEDDED_WORLD_BOOK_INVALID,
                        "the card's embedded world book cannot be used",
                        details={"characterCardId": character.id},
                    )
                )
            elif book is not None:
                summary: dict[str, Any] = {
                    "id": resource_id,
                    "kind": "embedded-world-book",
                    "name": book.name or character.name,
                    "characterCardId": character.id,
                    "bindingSources": ["embedded"],
                    "entryCount": len(book.entries),
                }
                revisions[resource_id] = character.revision
                twin = own_book_twin(
                    character.card,
                    book,
                    loaded,
                    embedded_id=resource_id,
                    fingerprint=lambda rid, b: self.fingerprints.get(rid, revisions[rid], b),
                )
                if twin is None:
                    inputs.append(
                        BookInput(
                            resource_id=resource_id,
                            book=book,
                            source=BookSource.EMBEDDED,
                            revision=character.revision,
                            name=summary["name"],
                        )
                    )
                else:
                    summary.update(scanned=False, sameBookAs=twin[0], sameBookReason=twin[1])
                    diagnostics.append(
                        Diagnostic(
                            EMBEDDED_WORLD_BOOK_DUPLICATE,
                            "the card's embedded world book is also bound as a standalone book; "
                            "it is scanned once, as the standalone copy (as SillyTavern does)",
                            "info",
                            details={
                                "embeddedId": resource_id,
                                "usedId": twin[0],
                                "reason": twin[1],
                            },
                        )
                    )
                summaries.append(summary)
        if not inputs:
            return WorldBookResolution(resources=tuple(summaries), diagnostics=tuple(diagnostics))
        activation_request = self._request(request, inputs)
        result = await asyncio.to_thread(activate, activation_request, self.matchers)
        for item in result.diagnostics:
            details: dict[str, Any] = {}
            if item.resource_id:
                details["resourceId"] = item.resource_id
            if item.uid is not None:
                details["uid"] = item.uid
            diagnostics.append(Diagnostic(item.code, item.message, item.severity, details))
        activated_by_book: dict[str, int] = {}
        for entry in result.activated:
            activated_by_book[entry.resource_id] = activated_by_book.get(entry.resource_id, 0) + 1
        for summary in summaries:
            if not summary.get("missing"):
                summary["activatedCount"] = activated_by_book.get(summary["id"], 0)
        books = audit_books(
            inputs, result, max_books=AUDIT_MAX_BOOKS, max_decisions=AUDIT_MAX_DECISIONS
        )
        return WorldBookResolution(
            lore_entries=lore_entries(result),
            resources=tuple(summaries),
            diagnostics=tuple(diagnostics),
            books=tuple(books),
            timed_state=result.timed_state,
            activation={
                "loops": result.loops,
                "seed": result.seed,
                "activatedEntries": len(result.activated),
                "budget": msgspec.to_builtins(result.budget),
                "scan": msgspec.to_builtins(result.scan),
            },
        )

    def _request(self, request: WorldBookRequest, inputs: list[BookInput]) -> ActivationRequest:
        context = request.context
        character = request.character
        user = request.user
        char_name = context.get("char_name", "")
        user_name = user.name if user is not None else context.get("user_name", "User")
        messages = tuple(
            msgspec.structs.replace(
                m,
                name=user_name if m.role == "user" else char_name if m.role == "assistant" else "",
            )
            for m in request.activation.messages
        )
        fields: CharacterFields | None = context.get("character_fields")
        sources = ActivationSources(
            persona_description=user.description if user is not None else "",
            character_description=fields.description if fields else "",
            character_personality=fields.personality if fields else "",
            character_depth_prompt=fields.depth_prompt if fields else "",
            scenario=fields.scenario if fields else "",
            creator_notes=character.card.data.creator_notes if character else "",
        )
        env: MacroEnv = context.get("macro_env", MacroEnv())
        # Lore may show MVU variables: the macro leaves a marker the loader fills after
        # activation, so only activated entries that use it ever read MVU.
        env = replace(env, extra={**env.extra, mvu_macro.MACRO_NAME: mvu_macro.marker})
        session = MacroSession(env, local_variables=context.get("local_variables"))
        settings: ActivationSettings = context.get("activation_settings", ActivationSettings())
        substitute: Callable[[str], str] = session.expand
        return ActivationRequest(
            books=inputs,
            context=ActivationContext(
                messages=messages, sources=sources, chat_length=request.activation.chat_length
            ),
            settings=settings,
            seed=int(context.get("seed", 0)),
            timed_state=context.get("timed_state") or TimedEffectsState(),
            character=CharacterIdentity(name=char_name) if character is not None else None,
            substitute=substitute,
            host_limits=context.get("host_limits", HostLimits()),
            scan_limits=context.get("scan_limits", ScanLimits()),
            dry_run=bool(context.get("dry_run", False)),
        )
