"""The session views of committed opening books: the loader's matcher hook, the
``tavernMemorySources`` items, and the usage decisions that may suppress a book
(`docs/contract/openings.md#opening-world-books`: while a manager is registered, a missing
decision or a denial leaves the book out; removing the manager restores the source's defaults).

A book applies only in its own session and only while the session's current selection matches
its identity: the same card, the same greeting index and the same greeting text hash.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from innkeeper_tavern.features.prompt_profile.adapters import ResolvedCharacter, WorldBookRequest
from innkeeper_tavern.features.prompt_render import Diagnostic
from innkeeper_tavern.pure.formats.worldbook import WorldBook
from innkeeper_tavern.pure.worldbook import BookInput, BookSource
from innkeeper_tavern.state.resources import TavernResources
from innkeeper_tavern.state.session_bindings.model import Selection

from . import model as m
from .manifest import opening_book
from .store import OpeningBookStore, StoredBook

__all__ = ["MANAGER_PROVIDER_ID", "RESOURCE_TYPE", "SessionViews", "UsageHandler"]

#: The provider id that makes opening books managed (as for ``tavernMvu.registerUsage``).
MANAGER_PROVIDER_ID: Final = "dsh-memory-manager"
RESOURCE_TYPE: Final = "session-opening-world-book"
SUPPRESSED: Final = "OPENING_WORLDBOOK_SUPPRESSED"

#: ``None`` (no decision) or ``{enabled, reason?}``.
UsageHandler = Callable[[Mapping[str, Any]], Awaitable[Mapping[str, Any] | None]]
SessionBooks = tuple[list[BookInput], list[dict[str, Any]], list[Diagnostic]]


class SessionViews:
    """Usage handlers and the per-session projections of one plugin load."""

    def __init__(
        self, resources: TavernResources, store: OpeningBookStore, logger: logging.Logger
    ) -> None:
        self._resources = resources
        self._store = store
        self._log = logger
        self._usage: dict[int, tuple[UsageHandler, str | None]] = {}
        self._counter = itertools.count(1)
        self._books: dict[str, WorldBook] = {}
        self.closed = False

    # ------------------------------------------------------------------ managers

    def register_usage(
        self, handler: UsageHandler, *, provider_id: str | None = None
    ) -> Callable[[], None]:
        """Register a prompt-use decision handler; ``provider_id='dsh-memory-manager'`` makes
        opening books managed until the returned disposer runs."""
        token = next(self._counter)
        self._usage[token] = (handler, provider_id)
        return lambda: self._usage.pop(token, None) and None

    @property
    def managed(self) -> bool:
        """Whether a manager is registered (actual ownership follows the registration)."""
        return any(p == MANAGER_PROVIDER_ID for _, p in self._usage.values())

    async def _decision(self, book: StoredBook) -> str | None:
        """``None`` to use the book, or why it is suppressed. A registered manager must allow
        it (no decision or a deny suppresses); other handlers may abstain but a deny counts.
        Without handlers the source default (use) applies."""
        request = {
            "id": book.resource_id,
            "adapterId": "world-book",
            "type": RESOURCE_TYPE,
            "trigger": "before_model_request",
            "scope": {"authority": "local", "sessionId": book.session_id},
            "sourceDefaults": {"retrieve": True},
        }
        for handler, provider in list(self._usage.values()):
            try:
                decision = await handler(request)
            except Exception:
                self._log.exception("an opening world-book usage handler failed")
                return "handler-failed"
            if decision is None:
                if provider == MANAGER_PROVIDER_ID:
                    return "missing-decision"
                continue
            if decision.get("enabled") is not True:
                return "denied"
        return None

    # ------------------------------------------------------------------ session views

    def _matching(
        self, session_id: str, selection: Selection, greeting_sha: Callable[[int], str | None]
    ) -> list[StoredBook]:
        index = selection.character.greeting_index or 0
        card_id = selection.character_card_id
        out = []
        for book in self._store.session_books(session_id):
            identity = book.source_identity
            if identity["characterId"] != card_id or identity["greetingIndex"] != index:
                continue
            if greeting_sha(index) == identity["greetingSha256"]:
                out.append(book)
        return out

    def _world_book(self, book: StoredBook) -> WorldBook:
        cached = self._books.get(book.entries_hash)
        if cached is None:
            cached = opening_book(book.name, tuple(book.entries))
            self._books[book.entries_hash] = cached
        return cached

    async def session_books(self, request: WorldBookRequest) -> SessionBooks:
        """The loader hook: the session's books for its current card and greeting, unless a
        usage decision suppresses them (then only a summary and an info diagnostic)."""
        inputs: list[BookInput] = []
        summaries: list[dict[str, Any]] = []
        diagnostics: list[Diagnostic] = []
        character = request.character
        if self.closed or request.session_id is None or character is None:
            return inputs, summaries, diagnostics
        if request.selection.character_card_id != character.id:
            return inputs, summaries, diagnostics
        sha = _greeting_hasher(character)
        for book in self._matching(request.session_id, request.selection, sha):
            summary: dict[str, Any] = {
                "id": book.resource_id,
                "kind": RESOURCE_TYPE,
                "name": book.name,
                "bindingSources": ["session-opening"],
                "entryCount": len(book.entries),
            }
            reason = await self._decision(book)
            if reason is not None:
                summary["suppressed"] = reason
                diagnostics.append(
                    Diagnostic(
                        SUPPRESSED,
                        "a usage decision suppressed the session's opening world book",
                        "info",
                        details={"resourceId": book.resource_id, "reason": reason},
                    )
                )
            else:
                inputs.append(
                    BookInput(
                        resource_id=book.resource_id,
                        book=self._world_book(book),
                        source=BookSource.SESSION,
                        revision=book.entries_hash[:32],
                        name=book.name,
                    )
                )
            summaries.append(summary)
        return inputs, summaries, diagnostics

    async def bound_items(self, session_id: str, selection: Selection) -> list[dict[str, Any]]:
        """``tavernMemorySources`` items of the session's current opening books (no content)."""
        card_id = selection.character_card_id
        if self.closed or card_id is None or self._resources.characters.entry(card_id) is None:
            return []
        card = (await self._resources.characters.get(card_id)).body
        greetings = (card.data.first_message, *card.data.alternate_greetings)

        def sha(index: int) -> str | None:
            return m.sha256_hex(greetings[index]) if index < len(greetings) else None

        mode = "managed" if self.managed else "native"
        return [
            {
                "id": book.resource_id,
                "adapterId": "world-book",
                "name": book.name,
                "type": RESOURCE_TYPE,
                "revision": str(book.revision),
                "managementMode": mode,
                "binding": {
                    "sessionId": session_id,
                    "characterId": card_id,
                    "greetingIndex": book.source_identity["greetingIndex"],
                    "origins": ["session-opening"],
                },
            }
            for book in self._matching(session_id, selection, sha)
        ]

    async def read_bound(
        self, session_id: str, selection: Selection, resource_id: str
    ) -> dict[str, Any] | None:
        """``resource_id`` with its ``content`` (``{name, entries}``) when it is one of the
        session's current opening books, else ``None``."""
        if not resource_id.startswith(m.RESOURCE_PREFIX):
            return None
        for item in await self.bound_items(session_id, selection):
            book = self._store.book(resource_id)
            if item["id"] == resource_id and book is not None:
                return {**item, "content": {"name": book.name, "entries": book.entries}}
        return None

    @property
    def revision(self) -> tuple[int, bool]:
        """What a bound listing depends on here (store publications, manager registration)."""
        return self._store.revision, self.managed


def _greeting_hasher(character: ResolvedCharacter) -> Callable[[int], str | None]:
    data = character.card.data
    greetings = (data.first_message, *data.alternate_greetings)
    memo: dict[int, str | None] = {}

    def sha(index: int) -> str | None:
        if index not in memo:
            memo[index] = m.sha256_hex(greetings[index]) if index < len(greetings) else None
        return memo[index]

    return sha
