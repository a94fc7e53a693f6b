"""Process-local read/mutation leases over the play workspace's documents
(`docs/contract/mvu.md#prompt-read-leases` and `docs/contract/mvu-cards.md#empty-session`:
``captureReadLease`` / ``captureMutationLease``).

A lease records the token each watched key had when it was captured. Every successful write of
a key issues a **fresh** token (never derived from the bytes), so writing old bytes back never
revives an old lease. Keys: :data:`WORKSPACE_KEY` for the workspace identity, and
``file:<posix path>`` for ``catalog.json`` / ``timeline.json`` documents,
:data:`MANAGED_KEY` for a write of any of those documents (catalog/timeline membership), and
:data:`ANY_WRITE_KEY` for any public file write or directory creation (mutation leases only).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

WORKSPACE_KEY: Final = "workspace"
#: Bumped by every successful write of a managed document (a catalog or a timeline, any depth).
MANAGED_KEY: Final = "managed"
#: Bumped by every successful public file write and directory creation (mutation leases).
ANY_WRITE_KEY: Final = "any-write"


def file_key(posix_path: str) -> str:
    """The lease key of a managed document."""
    return f"file:{posix_path}"


@dataclass(frozen=True, slots=True)
class Lease:
    """Tokens captured for some keys; ``kind`` is ``"read"`` or ``"mutation"``."""

    kind: str
    tokens: Mapping[str, int]


class Leases:
    """The token table. Tokens are process-local and start over on restart."""

    def __init__(self) -> None:
        self._counter = itertools.count(1)
        self._tokens: dict[str, int] = {}

    def token(self, key: str) -> int:
        """The current token of ``key`` (``0`` when never written in this process)."""
        return self._tokens.get(key, 0)

    def bump(self, key: str) -> int:
        """Record a successful write of ``key``: a fresh token invalidates every lease on it."""
        token = next(self._counter)
        self._tokens[key] = token
        return token

    def capture_read_lease(self, keys: Iterable[str]) -> Lease:
        """Capture the tokens of ``keys`` (managed documents) and the workspace identity:
        valid until one of those documents is written or the workspace changes; unrelated
        files and failed writes do not expire it."""
        return Lease("read", self._capture(keys))

    def capture_mutation_lease(self, keys: Iterable[str] = ()) -> Lease:
        """The conservative lease: expires on *any* successful file write or directory
        creation, on a write of ``keys``, and on a workspace identity change (an absent
        catalog or an unbound workspace included)."""
        return Lease("mutation", self._capture([*keys, ANY_WRITE_KEY]))

    def _capture(self, keys: Iterable[str]) -> dict[str, int]:
        wanted = {WORKSPACE_KEY, *keys}
        return {key: self.token(key) for key in sorted(wanted)}

    def valid(self, lease: Lease) -> bool:
        """Whether nothing the lease watches was written since it was captured."""
        return all(self.token(key) == token for key, token in lease.tokens.items())
