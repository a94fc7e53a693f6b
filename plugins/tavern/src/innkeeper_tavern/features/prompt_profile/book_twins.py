"""Is a bound standalone book the card's own embedded book? Then it is scanned once.

SillyTavern imports a card's embedded ``character_book`` into a world file and links it through
the card's ``extensions.world``; from then on it scans that world file, never the embedded copy.
A player who brings both over (Seraphina plus ``Eldoria.json``) would otherwise get every
matching entry twice (issue 10, item 2). A standalone book is the card's own book when:

- ``extensions-world``: the card's ``extensions.world`` names it (its library name, its own
  ``name`` or its file's stem), or
- ``same-entries``: its entries are the embedded book's (same keys, secondary keys and content).

The standalone copy is the one scanned, as in SillyTavern (and it is the copy a player edits in
the library); the embedded copy is left out and the audit says so.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from pathlib import PurePath
from typing import Final, Literal

import msgspec

from innkeeper_tavern.pure.formats.card import CharacterCard
from innkeeper_tavern.pure.formats.worldbook import WorldBook, WorldBookEntry
from innkeeper_tavern.state.resources.kinds import WorldBookDocument

__all__ = ["TwinReason", "book_fingerprint", "fingerprint_update", "own_book_twin"]

TwinReason = Literal["extensions-world", "same-entries"]
#: ``(resource id, book) -> fingerprint``: lets the caller cache fingerprints per revision.
Fingerprint = Callable[[str, WorldBook], str]


def _item_hash(entry: WorldBookEntry) -> int:
    item = (list(entry.keys), list(entry.secondary_keys), entry.content)
    return int.from_bytes(hashlib.sha256(msgspec.json.encode(item)).digest(), "big")


#: Fingerprints are sums of per-entry SHA-256 values modulo 2**256 (a multiset hash).
_MODULUS: Final = 1 << 256


def _hex(value: int) -> str:
    return f"{value % _MODULUS:064x}"


def book_fingerprint(book: WorldBook) -> str:
    """The book's entries as a multiset of (keys, secondary keys, content): the sum of each
    entry's SHA-256 modulo 2**256, so entry order does not matter and an edit can update it
    (:func:`fingerprint_update`)."""
    return _hex(sum(map(_item_hash, book.entries)))


def fingerprint_update(
    fingerprint: str, removed: Sequence[WorldBookEntry], added: Sequence[WorldBookEntry]
) -> str:
    """:func:`book_fingerprint` of a revision from its predecessor's and the changed entries."""
    value = int(fingerprint, 16) - sum(map(_item_hash, removed)) + sum(map(_item_hash, added))
    return _hex(value)


def _uncached(resource_id: str, book: WorldBook) -> str:
    return book_fingerprint(book)


def _names(doc: WorldBookDocument) -> set[str]:
    names = {doc.name, doc.book.name or ""}
    if doc.source.file_name:
        names.add(PurePath(doc.source.file_name).stem)
    return {n.strip().casefold() for n in names if n and n.strip()}


def own_book_twin(
    card: CharacterCard,
    embedded: WorldBook,
    standalone: Sequence[tuple[str, WorldBookDocument]],
    *,
    embedded_id: str = "",
    fingerprint: Fingerprint = _uncached,
) -> tuple[str, TwinReason] | None:
    """``(book id, reason)`` of the first bound standalone book that is the card's own book.

    ``fingerprint(resource id, book)`` (``embedded_id`` for the embedded book) defaults to
    :func:`book_fingerprint`; the loader passes one cached per book revision.
    """
    world = card.data.extensions.get("world")
    if isinstance(world, str) and world.strip():
        wanted = world.strip().casefold()
        for book_id, doc in standalone:
            if wanted in _names(doc):
                return book_id, "extensions-world"
    if embedded.entries:
        count = len(embedded.entries)
        candidates = [(i, d) for i, d in standalone if len(d.book.entries) == count]
        mine = fingerprint(embedded_id, embedded) if candidates else ""
        for book_id, doc in candidates:
            if fingerprint(book_id, doc.book) == mine:
                return book_id, "same-entries"
    return None
