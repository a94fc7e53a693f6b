"""``tavernScopeCatalog`` protocol 1: ``search_scopes`` over character, preset and user ids.

`spec/API.md` "Optional Host scope catalog": ``searchScopes({field, query?, cursor?, limit?,
scope?: {sessionId?}})`` returns ``{items: [{id, name}], nextCursor: string | null}``. Fields
are ``characterId``, ``presetId`` and ``userId``; limit 1–50 (default 50); query at most 200
characters, matched as a substring of the id or name; results in stable id order. Cursors are
signed by this source and bind the field, the normalized query, the session boundary, the
catalog generation and the visibility revision, so a cursor from a changed query or a changed
catalog is refused and paging restarts from the first page. Bodies, avatars and paths are never
returned.

The metadata index is the resource libraries' own (id, name and file fingerprints, rebuilt for
new or changed files at start and kept current by the stores); the catalog generation of a
field is its library's revision, which every create, delete and edit bumps. This host has no
per-session visibility rules, so the visibility revision is constant and every resource is
visible to every session.
"""

from __future__ import annotations

import base64
import bisect
import hashlib
import hmac
import json
import secrets
import unicodedata
from dataclasses import dataclass
from typing import Any, Final, Literal

from innkeeper_tavern.resources import TavernResources
from innkeeper_tavern.resources.library import DocumentLibrary

__all__ = [
    "SCOPE_CATALOG_CURSOR_INVALID",
    "SCOPE_CATALOG_CURSOR_STALE",
    "SCOPE_CATALOG_INVALID",
    "ScopeCatalogError",
    "ScopePage",
    "TavernScopeCatalog",
]

ScopeField = Literal["characterId", "presetId", "userId"]
FIELDS: Final[tuple[ScopeField, ...]] = ("characterId", "presetId", "userId")
MAX_QUERY_CHARS: Final = 200
MIN_LIMIT: Final = 1
MAX_LIMIT: Final = 50
PROTOCOL: Final = 1
#: The visibility revision (constant: no per-session visibility rules on this host).
VISIBILITY_REVISION: Final = 0
SCOPE_CATALOG_INVALID: Final = "SCOPE_CATALOG_INVALID"
SCOPE_CATALOG_CURSOR_INVALID: Final = "SCOPE_CATALOG_CURSOR_INVALID"
SCOPE_CATALOG_CURSOR_STALE: Final = "SCOPE_CATALOG_CURSOR_STALE"


class ScopeCatalogError(ValueError):
    """A refused search: ``code`` is stable (``SCOPE_CATALOG_*``)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class ScopePage:
    """One page: ``items`` (``{id, name}``) and the cursor of the next page, if any."""

    items: tuple[dict[str, str], ...]
    next_cursor: str | None

    def wire(self) -> dict[str, Any]:
        """The protocol's ``{items, nextCursor}``."""
        return {"items": [dict(i) for i in self.items], "nextCursor": self.next_cursor}


def normalize_query(query: object) -> str:
    """The query as matched: NFKC, trimmed, case-folded (``""`` matches everything)."""
    if query is None:
        return ""
    if not isinstance(query, str) or len(query) > MAX_QUERY_CHARS:
        raise ScopeCatalogError(
            SCOPE_CATALOG_INVALID, f"query must be a string of at most {MAX_QUERY_CHARS} chars"
        )
    return unicodedata.normalize("NFKC", query).strip().casefold()


class TavernScopeCatalog:
    """Searches the resource libraries' metadata; never reads a document body."""

    protocol: Final = PROTOCOL

    def __init__(self, resources: TavernResources, *, secret: bytes | None = None) -> None:
        self._libraries: dict[ScopeField, DocumentLibrary[Any]] = {
            "characterId": resources.characters,
            "presetId": resources.presets,
            "userId": resources.users,
        }
        self._secret = secret if secret is not None else secrets.token_bytes(32)
        #: field → (library revision, [(id, folded id, name, folded name)] in id order)
        self._sorted: dict[ScopeField, tuple[int, list[tuple[str, str, str, str]]]] = {}

    def generation(self, field: ScopeField) -> int:
        """The field's catalog generation (bumped by every create, delete and edit)."""
        return self._libraries[field].revision

    def _rows(self, field: ScopeField) -> list[tuple[str, str, str, str]]:
        library = self._libraries[field]
        cached = self._sorted.get(field)
        if cached is not None and cached[0] == library.revision:
            return cached[1]
        rows = sorted(
            (e.id, e.id.casefold(), e.name, unicodedata.normalize("NFKC", e.name).casefold())
            for e in library.entries()
        )
        self._sorted[field] = (library.revision, rows)
        return rows

    def _sign(self, payload: bytes) -> str:
        return hmac.new(self._secret, payload, hashlib.sha256).hexdigest()[:32]

    def _cursor(self, binding: dict[str, Any], after: str) -> str:
        payload = json.dumps({**binding, "a": after}, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(payload).decode().rstrip("=") + "." + self._sign(payload)

    def _open_cursor(self, cursor: str, binding: dict[str, Any]) -> str:
        try:
            text, signature = cursor.split(".", 1)
            payload = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
            fields = json.loads(payload)
        except (ValueError, TypeError):
            raise ScopeCatalogError(SCOPE_CATALOG_CURSOR_INVALID, "cursor is malformed") from None
        if not hmac.compare_digest(signature, self._sign(payload)) or not isinstance(fields, dict):
            raise ScopeCatalogError(SCOPE_CATALOG_CURSOR_INVALID, "cursor was not issued here")
        after = fields.pop("a", None)
        if not isinstance(after, str):
            raise ScopeCatalogError(SCOPE_CATALOG_CURSOR_INVALID, "cursor is malformed")
        for key in ("f", "q", "s"):
            if fields.get(key) != binding[key]:
                raise ScopeCatalogError(
                    SCOPE_CATALOG_CURSOR_INVALID,
                    "cursor belongs to another field, query or session: restart from page one",
                )
        if fields.get("g") != binding["g"] or fields.get("v") != binding["v"]:
            raise ScopeCatalogError(
                SCOPE_CATALOG_CURSOR_STALE,
                "the catalog changed since this cursor was issued: restart from page one",
            )
        return after

    def search_scopes(
        self,
        field: str,
        query: str | None = None,
        cursor: str | None = None,
        limit: int = MAX_LIMIT,
        scope: dict[str, Any] | None = None,
    ) -> ScopePage:
        """One page of ``{id, name}`` whose id or name contains ``query``, in id order."""
        if field not in FIELDS:
            raise ScopeCatalogError(
                SCOPE_CATALOG_INVALID, f"field must be one of {', '.join(FIELDS)}"
            )
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise ScopeCatalogError(SCOPE_CATALOG_INVALID, "limit must be an integer")
        if not MIN_LIMIT <= limit <= MAX_LIMIT:
            raise ScopeCatalogError(
                SCOPE_CATALOG_INVALID, f"limit must be between {MIN_LIMIT} and {MAX_LIMIT}"
            )
        session = (scope or {}).get("sessionId")
        if session is not None and not isinstance(session, str):
            raise ScopeCatalogError(SCOPE_CATALOG_INVALID, "scope.sessionId must be a string")
        needle = normalize_query(query)
        typed: ScopeField = field
        binding = {
            "f": field,
            "q": hashlib.sha256(needle.encode()).hexdigest()[:32],
            "s": session or "",
            "g": self.generation(typed),
            "v": VISIBILITY_REVISION,
        }
        after = self._open_cursor(cursor, binding) if cursor is not None else None
        items: list[dict[str, str]] = []
        more = False
        rows = self._rows(typed)
        # Rows are in id order: resume right after the cursor's id without scanning the head.
        start = bisect.bisect_right(rows, (after, chr(0x10FFFF))) if after is not None else 0
        for rid, folded_id, name, folded_name in rows[start:]:
            if needle and needle not in folded_id and needle not in folded_name:
                continue
            if len(items) == limit:
                more = True
                break
            items.append({"id": rid, "name": name})
        next_cursor = self._cursor(binding, items[-1]["id"]) if more else None
        return ScopePage(tuple(items), next_cursor)
