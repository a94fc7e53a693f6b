"""``tavernOpeningWorldBooks``: prepare and commit a session's opening world book
(`docs/contract/openings.md#opening-world-books`).

``prepare`` verifies the ``sourceIdentity`` against the host (the session exists, its selected
card is ``characterId``, its selected greeting is ``greetingIndex`` and hashes to
``greetingSha256``), verifies the snapshots against the opening manifest, and answers a
proposal: the entries the opening would write, their hash and the target's current revision.
At most :data:`MAX_PROPOSALS` proposals are live, each for :data:`PROPOSAL_TTL_SECONDS`; a
change of the card, of the session's selection (its generation: A→B→A included), of the session
instance, or an unload revokes them. ``commit`` (``reviewed`` and ``write`` both ``true``)
replays a known operation's receipt, then checks the proposal and the target's revision (CAS)
and only then persists the book and its receipt in one atomic write.

Committed books are ``world-book:session-opening-<digest>`` resources of their session only;
:class:`~.views.SessionViews` hands the matching ones to the loader's world-book matcher and
lists them for ``tavernMemorySources``.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from innkeeper_hostapi import HttpProblem, ServiceKey
from innkeeper_hostapi.sessions import SessionController, SessionNotFound
from innkeeper_tavern.state.resources import TavernResources
from innkeeper_tavern.state.resources.errors import ResourceError
from innkeeper_tavern.state.session_bindings.lifecycle import pending_selection
from innkeeper_tavern.state.session_bindings.model import Selection
from innkeeper_tavern.state.session_bindings.store import SessionSelectionStore

from . import model as m
from .manifest import Manifest, Opening, Snapshot
from .store import (
    MAX_BOOKS,
    MAX_BOOKS_PER_SESSION,
    MAX_RECEIPTS,
    OpeningBookState,
    OpeningBookStore,
    StoredBook,
    StoredReceipt,
    receipt_key,
)
from .views import MANAGER_PROVIDER_ID, SessionViews, UsageHandler

__all__ = [
    "MANAGER_PROVIDER_ID",
    "MAX_PROPOSALS",
    "PROPOSAL_TTL_SECONDS",
    "TAVERN_OPENING_WORLD_BOOKS",
    "OpeningWorldBooks",
]

#: Live proposals at once (the next is refused, never an eviction).
MAX_PROPOSALS: Final = 64
PROPOSAL_TTL_SECONDS: Final = 600.0
#: Skip receipts kept in memory (they are never persisted).
MAX_SKIP_RECEIPTS: Final = 1024
_PREPARE_KEYS: Final = frozenset({"sourceIdentity", "openingId", "identitySource"})
_COMMIT_KEYS: Final = frozenset(
    {"proposalId", "expectedRevision", "operationId", "sourceIdentity", "reviewed", "write"}
)


def _iso(seconds: float) -> str:
    moment = datetime.fromtimestamp(seconds, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class Proposal:
    """A prepared, not yet committed opening: what it writes and what it was read from."""

    proposal_id: str
    session_id: str
    session_created_at: str
    generation: int
    card_sha: str
    identity: dict[str, Any]
    opening: Opening
    resource_id: str | None
    expected_revision: int
    entries_hash: str
    expires_at: float


class OpeningWorldBooks:
    """The service of one plugin load (its proposals die with it)."""

    def __init__(
        self,
        resources: TavernResources,
        selections: SessionSelectionStore,
        sessions: Callable[[], SessionController | None],
        manifest: Manifest,
        store: OpeningBookStore,
        *,
        clock: Callable[[], float] = time.time,
        logger: logging.Logger | None = None,
    ) -> None:
        self._resources = resources
        self._selections = selections
        self._sessions = sessions
        self._manifest = manifest
        self._store = store
        self._log = logger or logging.getLogger("innkeeper.plugin.tavern.opening_books")
        #: Seconds since the epoch (injected; expiry is measured with it).
        self.clock = clock
        self._proposals: dict[str, Proposal] = {}
        self._skips: dict[str, StoredReceipt] = {}
        #: The loader hook, the bound listing and the usage decisions.
        self.views = SessionViews(resources, store, self._log)
        self._lock = asyncio.Lock()
        self._closed = False

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Unload: every proposal is revoked and later calls are refused."""
        self._closed = True
        self.views.closed = True
        self._proposals.clear()
        self._skips.clear()

    def _alive(self) -> None:
        if self._closed:
            raise m.fail(503, m.UNAVAILABLE, "the opening world books were unloaded")

    @property
    def live_proposals(self) -> int:
        """Proposals neither expired nor visibly revoked (what counts toward the limit)."""
        self._sweep()
        return len(self._proposals)

    def _sweep(self) -> None:
        now = self.clock()
        for pid, proposal in list(self._proposals.items()):
            if proposal.expires_at <= now or self._stale(proposal) is not None:
                del self._proposals[pid]

    def _stale(self, proposal: Proposal) -> str | None:
        """Why a proposal no longer holds (synchronously visible changes), or ``None``."""
        if self._selections.generation(proposal.session_id) != proposal.generation:
            return "the session's selection changed"
        entry = self._resources.characters.entry(proposal.identity["characterId"])
        if entry is None or entry.sha256 != proposal.card_sha:
            return "the character card changed"
        return None

    # ------------------------------------------------------------------ source checks

    async def _session(self, session_id: str) -> str:
        """The session instance (``createdAt``); 404 when the host does not know it."""
        sessions = self._sessions()
        if sessions is None:
            raise m.fail(503, m.UNAVAILABLE, "the host sessions service is absent")
        try:
            return (await sessions.inspect(session_id)).header.created_at
        except SessionNotFound:
            raise m.fail(404, m.SESSION_NOT_FOUND, "the session does not exist") from None

    async def _verify(self, identity: Mapping[str, Any]) -> tuple[str, int, str, Selection]:
        """Check ``identity`` against the session, its selection and its card; answers the
        session instance, the selection generation, the card fingerprint and the selection."""
        session_id = identity["sessionId"]
        created_at = await self._session(session_id)
        generation = self._selections.generation(session_id)
        sessions = self._sessions()
        selection = await pending_selection(self._selections, session_id, sessions)
        card_id = identity["characterId"]
        if selection.character_card_id != card_id:
            raise m.fail(409, m.IDENTITY_MISMATCH, "characterId is not the session's card")
        index = selection.character.greeting_index or 0
        if identity["greetingIndex"] != index:
            raise m.fail(409, m.IDENTITY_MISMATCH, "greetingIndex is not the selected greeting")
        entry = self._resources.characters.entry(card_id)
        if entry is None:
            raise m.fail(409, m.IDENTITY_MISMATCH, "the selected character card does not exist")
        card = (await self._resources.characters.get(card_id)).body
        greetings = (card.data.first_message, *card.data.alternate_greetings)
        if index >= len(greetings) or m.sha256_hex(greetings[index]) != identity["greetingSha256"]:
            raise m.fail(409, m.IDENTITY_MISMATCH, "greetingSha256 is not the selected greeting's")
        return created_at, generation, entry.sha256, selection

    def _snapshot(self, value: object, where: str) -> Snapshot:
        given = m.parse_snapshot(value, where)
        found = self._manifest.find(given.url, given.sha256, given.size)
        if found is None:
            raise m.fail(400, m.SOURCE_UNREGISTERED, f"{where} is not an accepted snapshot")
        return found

    def _opening(self, body: Mapping[str, Any], identity: Mapping[str, Any]) -> Opening:
        primary = self._snapshot(body.get("identitySource"), "identitySource")
        if primary.sha256 != identity["identitySha256"]:
            raise m.fail(409, m.IDENTITY_MISMATCH, "identitySha256 is not identitySource's")
        candidates = [primary]
        if "source" in body:
            sibling = self._snapshot(body["source"], "source")
            if sibling.key != primary.key and (
                primary.family is None or sibling.family != primary.family
            ):
                raise m.fail(400, m.SOURCE_UNREGISTERED, "source is not identitySource's sibling")
            candidates.insert(0, sibling)
        opening_id = m.opening_id_field(body)
        for snapshot in candidates:
            found = snapshot.openings.get(opening_id)
            if found is not None:
                return found
        raise m.fail(400, m.OPENING_UNKNOWN, "the snapshots map no such openingId")

    # ------------------------------------------------------------------ prepare / commit

    async def prepare(self, request: object, *, session_id: str | None = None) -> dict[str, Any]:
        """``prepare({sourceIdentity, openingId, identitySource, source?})`` → a proposal
        (``session_id``: the route's session, which the identity must name)."""
        self._alive()
        body = m.object_body(request, _PREPARE_KEYS, frozenset({"source"}))
        identity = _for_session(m.check_identity(body["sourceIdentity"]), session_id)
        opening = self._opening(body, identity)
        created_at, generation, card_sha, _ = await self._verify(identity)
        self._alive()
        entries = [dict(e) for e in opening.entries]
        rid = None if opening.skip else m.resource_id(identity, opening.opening_id)
        stored = self._store.book(rid) if rid is not None else None
        self._sweep()
        if len(self._proposals) >= MAX_PROPOSALS:
            raise m.fail(409, m.PROPOSALS_FULL, f"at most {MAX_PROPOSALS} proposals are live")
        proposal = Proposal(
            proposal_id="owbp-" + secrets.token_hex(16),
            session_id=identity["sessionId"],
            session_created_at=created_at,
            generation=generation,
            card_sha=card_sha,
            identity=identity,
            opening=opening,
            resource_id=rid,
            expected_revision=stored.revision if stored is not None else 0,
            entries_hash=m.canonical_hash(entries),
            expires_at=self.clock() + PROPOSAL_TTL_SECONDS,
        )
        self._proposals[proposal.proposal_id] = proposal
        return {
            "ok": True,
            "proposalId": proposal.proposal_id,
            "expectedRevision": proposal.expected_revision,
            "entriesHash": proposal.entries_hash,
            "entries": entries,
            "openingId": opening.opening_id,
            "entryCount": len(entries),
            "expiresAt": _iso(proposal.expires_at),
            "sourceIdentity": dict(identity),
            "resourceId": rid,
        }

    async def commit(self, request: object, *, session_id: str | None = None) -> dict[str, Any]:
        """``commit({proposalId, expectedRevision, operationId, sourceIdentity, reviewed:true,
        write:true})`` → the receipt (a replayed operation answers its first receipt)."""
        self._alive()
        body = m.object_body(request, _COMMIT_KEYS, frozenset())
        proposal_id = m.text_field(body, "proposalId")
        operation_id = m.text_field(body, "operationId")
        expected = body["expectedRevision"]
        if isinstance(expected, bool) or not isinstance(expected, int) or expected < 0:
            raise m.fail(400, m.INVALID, "expectedRevision must be a non-negative integer")
        identity = _for_session(m.check_identity(body["sourceIdentity"]), session_id)
        if body["reviewed"] is not True or body["write"] is not True:
            raise m.fail(
                400, m.CONFIRMATION_REQUIRED, "commit needs reviewed: true and write: true"
            )
        session = identity["sessionId"]
        fingerprint = m.canonical_hash([proposal_id, expected, identity])
        async with self._lock:
            self._alive()
            key = receipt_key(session, operation_id)
            known = self._store.state.receipts.get(key) or self._skips.get(key)
            if known is not None:
                if known.fingerprint != fingerprint:
                    raise m.fail(
                        409, m.OPERATION_CONFLICT, "operationId was used for another commit"
                    )
                return dict(known.receipt)
            proposal = await self._current(proposal_id, identity, expected)
            if proposal.resource_id is None:
                receipt = self._skip_receipt(key, fingerprint)
                self._proposals.pop(proposal_id, None)
                return receipt
            return await self._write(proposal, key, fingerprint)

    async def _current(
        self, proposal_id: str, identity: Mapping[str, Any], expected: int
    ) -> Proposal:
        """The live proposal that matches the commit (it is dropped once it cannot hold)."""
        proposal = self._proposals.get(proposal_id)
        if proposal is None:
            raise m.fail(404, m.PROPOSAL_NOT_FOUND, "no such proposal (unknown or committed)")
        if proposal.identity != identity:
            raise m.fail(409, m.IDENTITY_MISMATCH, "sourceIdentity is not the proposal's")
        if expected != proposal.expected_revision:
            raise m.fail(409, m.REVISION_CONFLICT, "expectedRevision is not the proposal's")
        if proposal.expires_at <= self.clock():
            del self._proposals[proposal_id]
            raise m.fail(409, m.PROPOSAL_EXPIRED, "the proposal expired; prepare again")
        reason = self._stale(proposal)
        if reason is None:
            try:
                created_at = await self._session(proposal.session_id)
            except HttpProblem:
                reason = "the session ended"
            else:
                if created_at != proposal.session_created_at:
                    reason = "the session instance changed"
        if reason is None:
            self._alive()
            reason = self._stale(proposal)  # the await above may have let a change in
        if reason is not None:
            self._proposals.pop(proposal_id, None)
            raise m.fail(409, m.PROPOSAL_REVOKED, f"the proposal was revoked: {reason}")
        return proposal

    def _skip_receipt(self, key: str, fingerprint: str) -> dict[str, Any]:
        if len(self._skips) >= MAX_SKIP_RECEIPTS:
            raise m.fail(409, m.STORE_FULL, f"at most {MAX_SKIP_RECEIPTS} skip receipts are kept")
        receipt = {
            "ok": True,
            "inserted": 0,
            "existing": 0,
            "updated": 0,
            "targetWorldbook": None,
            "method": "session-local",
            "receiptId": "owbr-" + secrets.token_hex(16),
            "resourceId": None,
            "revision": None,
            "skipped": True,
        }
        self._skips[key] = StoredReceipt(fingerprint=fingerprint, receipt=receipt)
        return dict(receipt)

    async def _write(self, proposal: Proposal, key: str, fingerprint: str) -> dict[str, Any]:
        rid = proposal.resource_id
        assert rid is not None
        state = self._store.state
        stored = state.books.get(rid)
        current = stored.revision if stored is not None else 0
        if current != proposal.expected_revision:
            raise m.fail(409, m.REVISION_CONFLICT, "the target changed since prepare")
        if len(state.receipts) >= MAX_RECEIPTS:
            raise m.fail(409, m.STORE_FULL, f"at most {MAX_RECEIPTS} receipts are kept")
        if stored is None:
            mine = sum(1 for b in state.books.values() if b.session_id == proposal.session_id)
            if len(state.books) >= MAX_BOOKS or mine >= MAX_BOOKS_PER_SESSION:
                raise m.fail(409, m.STORE_FULL, "the opening world-book store is full")
        old = {e["uid"]: e for e in stored.entries} if stored is not None else {}
        inserted = existing = updated = 0
        merged = dict(old)
        for entry in proposal.opening.entries:
            before = old.get(entry["uid"])
            if before is None:
                inserted += 1
            elif before == entry:
                existing += 1
            else:
                updated += 1
            merged[entry["uid"]] = dict(entry)
        entries = [merged[uid] for uid in sorted(merged)]
        revision = current + 1 if inserted or updated else current
        book = StoredBook(
            resource_id=rid,
            session_id=proposal.session_id,
            source_identity=proposal.identity,
            opening_id=proposal.opening.opening_id,
            name=proposal.opening.name,
            entries=entries,
            entries_hash=m.canonical_hash(entries),
            revision=revision,
            updated_at=_iso(self.clock()),
        )
        receipt = {
            "ok": True,
            "inserted": inserted,
            "existing": existing,
            "updated": updated,
            "targetWorldbook": book.name,
            "method": "session-local",
            "receiptId": "owbr-" + secrets.token_hex(16),
            "resourceId": rid,
            "revision": revision,
        }
        receipts = {**state.receipts, key: StoredReceipt(fingerprint=fingerprint, receipt=receipt)}
        new_state = OpeningBookState(books={**state.books, rid: book}, receipts=receipts)
        try:
            async with self._store.file.lock:
                await self._store.file.save_locked(new_state)
        except ResourceError as exc:  # too large, or the disk refused: nothing changed
            raise m.fail(exc.status, exc.code, exc.message) from None
        self._proposals.pop(proposal.proposal_id, None)
        return dict(receipt)

    # ------------------------------------------------------------------ managers, views

    def register_usage(
        self, handler: UsageHandler, *, provider_id: str | None = None
    ) -> Callable[[], None]:
        """Register a prompt-use decision handler; ``provider_id='dsh-memory-manager'`` makes
        opening books managed until the returned disposer runs (see :mod:`.views`)."""
        return self.views.register_usage(handler, provider_id=provider_id)

    @property
    def managed(self) -> bool:
        """Whether a manager is registered (actual ownership follows the registration)."""
        return self.views.managed

    def books_of(self, session_id: str) -> Sequence[StoredBook]:
        """Every committed book of the session (tests, diagnostics)."""
        return self._store.session_books(session_id)


def _for_session(identity: dict[str, Any], session_id: str | None) -> dict[str, Any]:
    if session_id is not None and identity["sessionId"] != session_id:
        raise m.fail(409, m.IDENTITY_MISMATCH, "sourceIdentity.sessionId is not this session")
    return identity


#: The service key (resolve at call time).
TAVERN_OPENING_WORLD_BOOKS: ServiceKey[OpeningWorldBooks] = ServiceKey(
    "tavernOpeningWorldBooks", OpeningWorldBooks
)
