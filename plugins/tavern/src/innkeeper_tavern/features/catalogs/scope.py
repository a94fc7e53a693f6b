"""``tavernScopeCatalog`` (protocol 1): `docs/contract/catalogs.md#scope-catalog`.

``search_scopes`` pages ``{id, name}`` of characters, presets or users from the sources' scope
indexes (:mod:`.index`) in stable id order. Cursors are signed with a per-process HMAC key and
carry the field, the normalized query, the session boundary, the source's catalog generation and
visibility revision and the last id returned; any of those differing on the next call refuses
the cursor, so a chain never repeats or skips an id — after a create, delete or rename the
client restarts from the first page. Every page re-checks the service's lifetime and the
returned documents' file fingerprints (``SCOPE_CATALOG_STALE`` on a direct external edit).

``resolve_scope_context`` maps a session's selection to ``{characterId, presetId, userId}`` (a
missing resource resolves to ``None``) and returns a synchronous ``checkCurrent`` lease bound to
the session instance (its header's creation time and the agents created for it), its selection
generation, every source's generation and visibility, the bound documents' fingerprints and the
service's lifetime. Another session's changes and body edits of unbound resources leave it
valid.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from innkeeper_hostapi import HttpProblem
from innkeeper_hostapi.catalogs import SCOPE_CATALOG_PROTOCOL, CheckCurrent
from innkeeper_hostapi.sessions import SessionController
from innkeeper_tavern.state.resources import TavernResources
from innkeeper_tavern.state.session_bindings.store import SessionSelectionStore

from .index import MAX_QUERY_CHARS, Fingerprint, SourceIndex, normalize_query

#: Same section: "limit is 1–50 (default 50)".
MAX_LIMIT: Final = 50
#: Our bound on a cursor string (a signed, base64url JSON object of a few short fields).
MAX_CURSOR_CHARS: Final = 1024

SCOPE_CATALOG_INVALID: Final = "SCOPE_CATALOG_INVALID"
SCOPE_CATALOG_CURSOR_INVALID: Final = "SCOPE_CATALOG_CURSOR_INVALID"
SCOPE_CATALOG_CURSOR_STALE: Final = "SCOPE_CATALOG_CURSOR_STALE"
SCOPE_CATALOG_STALE: Final = "SCOPE_CATALOG_STALE"
SCOPE_CATALOG_UNAVAILABLE: Final = "SCOPE_CATALOG_UNAVAILABLE"
SCOPE_SESSION_NOT_FOUND: Final = "SCOPE_SESSION_NOT_FOUND"

FIELDS: Final = ("characterId", "presetId", "userId")


class _Cursor(msgspec.Struct, frozen=True):
    f: str  # field
    q: str  # SHA-256 of the normalized query
    s: str  # session boundary ("" for a global search)
    g: int  # catalog generation
    v: int  # visibility revision
    a: str  # last id returned


_cursor_decoder: Final = msgspec.json.Decoder(_Cursor)


@dataclass(frozen=True, slots=True)
class ScopeLease:
    """What a resolved scope was read from (compared by :meth:`ScopeCatalog.lease_valid`)."""

    session_id: str
    instance: tuple[str, int]
    selection_generation: int
    sources: tuple[tuple[int, int], ...]
    #: ``(field, id, fingerprint)`` of each resolved resource (``None`` id when unresolved).
    bound: tuple[tuple[str, str | None, Fingerprint | None], ...]


def _problem(status: int, code: str, message: str) -> HttpProblem:
    return HttpProblem(status, code, message)


class ScopeCatalog:
    """The ``tavernScopeCatalog`` service of one plugin load."""

    protocol_version: Final = SCOPE_CATALOG_PROTOCOL
    authority: Final = "local"

    def __init__(
        self,
        resources: TavernResources,
        selections: SessionSelectionStore,
        sessions: Callable[[], SessionController | None],
    ) -> None:
        self.sources: dict[str, SourceIndex] = {
            "characterId": SourceIndex("characterId", resources.characters),
            "presetId": SourceIndex("presetId", resources.presets),
            "userId": SourceIndex("userId", resources.users),
        }
        self._selections = selections
        self._sessions = sessions
        self._key = secrets.token_bytes(32)
        self._agents: dict[str, int] = {}
        self._closed = False

    # ------------------------------------------------------------------ lifetime

    def close(self) -> None:
        """Unload: every later call fails and every lease is revoked."""
        self._closed = True

    def agent_created(self, session_id: str) -> None:
        """A new agent serves ``session_id`` (a new session instance): revoke its leases."""
        self._agents[session_id] = self._agents.get(session_id, 0) + 1

    def instance_token(self, session_id: str) -> int:
        """How many agents were created for ``session_id`` in this load (its instance)."""
        return self._agents.get(session_id, 0)

    def _alive(self) -> None:
        if self._closed:
            raise _problem(503, SCOPE_CATALOG_UNAVAILABLE, "the scope catalog was unloaded")

    # ------------------------------------------------------------------ search

    async def search_scopes(
        self,
        *,
        field: object,
        query: object = None,
        cursor: object = None,
        limit: object = None,
        scope: object = None,
    ) -> Mapping[str, Any]:
        """One page of ``{id, name}`` (see the module docstring)."""
        self._alive()
        source = self.sources.get(field) if isinstance(field, str) else None
        if source is None:
            raise _problem(400, SCOPE_CATALOG_INVALID, f"field must be one of {', '.join(FIELDS)}")
        if query is not None and (not isinstance(query, str) or len(query) > MAX_QUERY_CHARS):
            raise _problem(
                400, SCOPE_CATALOG_INVALID, f"query must be a string of ≤ {MAX_QUERY_CHARS} chars"
            )
        if limit is None:
            limit = MAX_LIMIT
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            raise _problem(400, SCOPE_CATALOG_INVALID, f"limit must be an integer 1–{MAX_LIMIT}")
        boundary = await self._boundary(scope)
        normalized = normalize_query(query or "")
        query_digest = hashlib.sha256(normalized.encode()).hexdigest()
        if source.stale:
            raise self._stale(source.field)
        source.sync()
        after = None
        if cursor is not None:
            after = self._open_cursor(cursor, source.field, query_digest, boundary, source)
        ids, more = source.page(normalized, after, limit)
        if not source.check_files(ids):
            raise self._stale(source.field)
        self._alive()
        items = [{"id": rid, "name": source.name(rid)} for rid in ids]
        next_cursor = None
        if more and ids:
            versions = (source.generation, source.visibility)
            next_cursor = self._sign(
                _Cursor(source.field, query_digest, boundary, *versions, ids[-1])
            )
        return {"items": items, "nextCursor": next_cursor}

    async def _boundary(self, scope: object) -> str:
        if scope is None:
            return ""
        if not isinstance(scope, Mapping):
            raise _problem(400, SCOPE_CATALOG_INVALID, "scope must be an object")
        session_id = scope.get("sessionId")
        if session_id is None:
            return ""
        await self._session_instance(session_id)
        return str(session_id)

    def _stale(self, field: str) -> HttpProblem:
        return _problem(
            409,
            SCOPE_CATALOG_STALE,
            f"the {field} source changed outside the host; reload it and restart paging",
        )

    def _sign(self, cursor: _Cursor) -> str:
        payload = base64.urlsafe_b64encode(msgspec.json.encode(cursor)).rstrip(b"=")
        mac = hmac.new(self._key, payload, hashlib.sha256).digest()[:16]
        return f"{payload.decode()}.{base64.urlsafe_b64encode(mac).rstrip(b'=').decode()}"

    def _open_cursor(
        self, cursor: object, field: str, query: str, boundary: str, source: SourceIndex
    ) -> str:
        invalid = _problem(
            400,
            SCOPE_CATALOG_CURSOR_INVALID,
            "cursor does not belong to this field, query or session; restart from the first page",
        )
        if not isinstance(cursor, str) or len(cursor) > MAX_CURSOR_CHARS or "." not in cursor:
            raise invalid
        payload, _, mac = cursor.partition(".")
        expected = hmac.new(self._key, payload.encode(), hashlib.sha256).digest()[:16]
        try:
            given = base64.urlsafe_b64decode(mac + "=" * (-len(mac) % 4))
            decoded = _cursor_decoder.decode(
                base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
            )
        except (ValueError, msgspec.DecodeError, msgspec.ValidationError):
            raise invalid from None
        if not hmac.compare_digest(given, expected):
            raise invalid
        if (decoded.f, decoded.q, decoded.s) != (field, query, boundary):
            raise invalid
        if (decoded.g, decoded.v) != (source.generation, source.visibility):
            raise _problem(
                409,
                SCOPE_CATALOG_CURSOR_STALE,
                f"the {field} catalog changed since this cursor; restart from the first page",
            )
        return decoded.a

    # ------------------------------------------------------------------ scope context

    async def _session_instance(self, session_id: object) -> tuple[str, int]:
        if not isinstance(session_id, str) or not session_id:
            raise _problem(400, SCOPE_CATALOG_INVALID, "sessionId must be a non-empty string")
        sessions = self._sessions()
        if sessions is None:
            raise _problem(503, SCOPE_CATALOG_UNAVAILABLE, "the host sessions service is absent")
        try:
            inspection = await sessions.inspect(session_id)
        except LookupError:
            raise _problem(404, SCOPE_SESSION_NOT_FOUND, "session does not exist") from None
        return inspection.header.created_at, self._agents.get(session_id, 0)

    async def resolve_scope_context(self, *, session_id: str) -> Mapping[str, Any]:
        """``{scope:{sessionId,characterId,presetId,userId}, revision, checkCurrent}``."""
        self._alive()
        instance = await self._session_instance(session_id)
        self._alive()
        selection = self._selections.get(session_id)
        wanted = {
            "characterId": selection.character_card_id,
            "presetId": selection.preset_id,
            "userId": selection.user_id,
        }
        scope: dict[str, str | None] = {"sessionId": session_id}
        bound: list[tuple[str, str | None, Fingerprint | None]] = []
        for field, resource_id in wanted.items():
            source = self.sources[field]
            known = source.fingerprint(resource_id) if resource_id is not None else None
            scope[field] = resource_id if known is not None else None
            bound.append((field, scope[field], known))
        lease = self._capture(session_id, instance, tuple(bound))
        revision = hashlib.sha256(repr(lease).encode()).hexdigest()[:32]
        return {
            "scope": scope,
            "revision": revision,
            "checkCurrent": self._check(lease),
        }

    def _capture(
        self,
        session_id: str,
        instance: tuple[str, int],
        bound: tuple[tuple[str, str | None, Fingerprint | None], ...],
    ) -> ScopeLease:
        return ScopeLease(
            session_id=session_id,
            instance=instance,
            selection_generation=self._selections.generation(session_id),
            sources=tuple((s.generation, s.visibility) for s in self.sources.values()),
            bound=bound,
        )

    def _check(self, lease: ScopeLease) -> CheckCurrent:
        def check_current() -> bool:
            return self.lease_valid(lease)

        return check_current

    def lease_valid(self, lease: ScopeLease) -> bool:
        """Whether nothing ``lease`` was read from changed (synchronous)."""
        if self._closed:
            return False
        if (lease.instance[0], self._agents.get(lease.session_id, 0)) != lease.instance:
            return False
        if self._selections.generation(lease.session_id) != lease.selection_generation:
            return False
        for source in self.sources.values():
            source.sync()
        if tuple((s.generation, s.visibility) for s in self.sources.values()) != lease.sources:
            return False
        for field, resource_id, known in lease.bound:
            source = self.sources[field]
            if source.stale:
                return False
            if resource_id is None:
                continue
            if source.fingerprint(resource_id) != known or not source.file_matches(resource_id):
                return False
        return True
