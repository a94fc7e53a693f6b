"""One source's scope index: the sorted ids, names and file fingerprints of a resource store.

The index mirrors a :class:`~innkeeper_tavern.state.resources.library.DocumentLibrary`'s metadata
index (id, name, size, mtime — never a body) and follows the library's ``revision``: a source-owned
create, update or delete bumps it, and the next read re-syncs from the library's in-memory
entries (no file is read). Two counters version what a cursor may rely on:

- ``generation``: bumped when the id set changes (a create or a delete);
- ``visibility``: bumped when what a query can match changes without the id set changing (a
  rename) and when the source reloads.

Direct external edits are found from filesystem metadata: a page stats the files it returns and
the folder itself; a fingerprint that differs from the index marks the source stale
(``SCOPE_CATALOG_STALE``) until :meth:`SourceIndex.reload` re-scans the store.
"""

from __future__ import annotations

import bisect
import os
import unicodedata
from dataclasses import dataclass
from typing import Any, Final

from innkeeper_tavern.state.resources.library import DocumentLibrary

#: `docs/contract/catalogs.md#scope-catalog`: the query bound.
MAX_QUERY_CHARS: Final = 200


def normalize_query(query: str) -> str:
    """The matching form of a query or name: NFKC, case-folded, outer whitespace stripped."""
    return unicodedata.normalize("NFKC", query).casefold().strip()


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """A document file's metadata as the index last saw it."""

    size: int
    mtime_ns: int


class SourceIndex:
    """The scope index of one library (``characterId``, ``presetId`` or ``userId``)."""

    def __init__(self, field: str, library: DocumentLibrary[Any]) -> None:
        self.field = field
        self.library = library
        self.generation = 0
        self.visibility = 0
        self.stale = False
        self._seen_revision = -1
        self._ids: list[str] = []
        self._names: dict[str, str] = {}
        self._keys: dict[str, str] = {}
        self._prints: dict[str, Fingerprint] = {}
        self._folder_mtime: int | None = None

    # ------------------------------------------------------------------ sync

    def sync(self) -> None:
        """Follow the library's published index (cheap when its revision is unchanged)."""
        revision = self.library.revision
        if revision == self._seen_revision:
            return
        entries = self.library.entries()
        names = {e.id: e.name for e in entries}
        if names.keys() != self._names.keys():
            self.generation += 1
            self._ids = sorted(names)
        elif names != self._names:
            self.visibility += 1
        self._names = names
        self._keys = {rid: normalize_query(f"{rid}\n{name}") for rid, name in names.items()}
        self._prints = {e.id: Fingerprint(e.size, e.mtime_ns) for e in entries}
        self._seen_revision = revision
        self._folder_mtime = self._stat_folder()

    async def reload(self) -> None:
        """Re-scan the store after external edits and clear the stale mark."""
        await self.library.reload()
        self.sync()
        self.visibility += 1
        self.stale = False

    # ------------------------------------------------------------------ reads

    def name(self, resource_id: str) -> str | None:
        """The indexed display name of ``resource_id`` (``None`` when not indexed)."""
        self.sync()
        return self._names.get(resource_id)

    def fingerprint(self, resource_id: str) -> Fingerprint | None:
        """The indexed fingerprint of ``resource_id``."""
        self.sync()
        return self._prints.get(resource_id)

    def page(self, query: str, after: str | None, limit: int) -> tuple[list[str], bool]:
        """Up to ``limit`` matching ids after ``after`` in id order, and whether more follow."""
        self.sync()
        start = 0 if after is None else bisect.bisect_right(self._ids, after)
        found: list[str] = []
        for resource_id in self._ids[start:]:
            if query in self._keys[resource_id]:
                if len(found) == limit:
                    return found, True
                found.append(resource_id)
        return found, False

    def check_files(self, resource_ids: list[str]) -> bool:
        """Whether the folder and these documents still match the index (filesystem metadata
        only); a mismatch marks the source stale. While a source-owned write is in progress
        (the library's lock held) files may be ahead of the published index: that is not an
        external edit, so the check waits for the next page."""
        if self.stale:
            return False
        if self.library.lock.locked():
            return True
        if self._stat_folder() != self._folder_mtime:
            self.stale = True
            return False
        for resource_id in resource_ids:
            if not self.file_matches(resource_id):
                self.stale = True
                return False
        return True

    def file_matches(self, resource_id: str) -> bool:
        """Whether the document file of ``resource_id`` has its indexed fingerprint."""
        known = self._prints.get(resource_id)
        try:
            stat = os.stat(self.library.path(resource_id))
        except OSError:
            return known is None
        return known is not None and known == Fingerprint(stat.st_size, stat.st_mtime_ns)

    def entry_count(self) -> int:
        """How many ids the index holds."""
        self.sync()
        return len(self._ids)

    def _stat_folder(self) -> int | None:
        try:
            return os.stat(self.library.folder).st_mtime_ns
        except OSError:
            return None
