"""Re-reading a stored world book after an edit on disk, decoding only what changed.

A stored 10,000-entry book is a ~14 MB document; decoding all of it into the typed model costs
tens of milliseconds even when a person changed one entry in an editor. :class:`BookCodec`
splits the document once into raw byte spans (msgspec ``Raw``: the ``source`` object and each
element of ``book.entries``, without building them), hashes each span and decodes only the spans
whose hash the previous revision does not have. Unchanged entries (and an unchanged ``source``,
which holds the whole imported original) are the previous revision's objects, so the
world-book compiler derives the new compiled form from them by identity
(:func:`innkeeper_tavern.pure.worldbook.incremental.derive_book`), without comparing entries.

The per-revision :class:`BookMemo` (a hash per entry, in entry order, plus the source's) is what
a library keeps beside the record; it is computed by every decode of this codec, including the
read-back check of a write, so the first edit on disk after a write through the API is already
incremental. Hashes are Python's 64-bit ``hash`` of the span's bytes (computed in C over all
spans at once; a per-span Python call would cost as much as the hashing): they live in memory
only (the per-process hash seed does not matter), and a collision between two different entries
of one book is not a practical concern (≈ n²/2⁶⁴ for n entries).

The result equals a full decode of the document (the tests compare them on random edits);
anything the split cannot serve (invalid values, a document that is not an object) goes through
the full decoder so the error is the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import msgspec

from innkeeper_tavern.pure.formats.worldbook import WorldBook, WorldBookEntry
from innkeeper_tavern.pure.worldbook.incremental import share_unchanged_entries

from .codec import check_meta, decode_typed

__all__ = ["BookCodec", "BookMemo"]


class BookMemo(msgspec.Struct, frozen=True):
    """What a later re-read needs of one decoded revision: span hashes, aligned with the body."""

    #: Hash of the ``source`` span (``None``: the document had no ``source``).
    source: int | None
    #: Hash of each ``book.entries`` span, in entry order.
    entries: tuple[int, ...]


def _span_hashes(raws: Sequence[msgspec.Raw]) -> list[int]:
    # Raw is not hashable: hash a copy of each span (a memcpy, cheap next to a decode).
    return list(map(hash, map(bytes, raws)))


def _book_split_type() -> type[msgspec.Struct]:
    """A Struct with :class:`WorldBook`'s fields except ``entries``, which stay raw spans."""
    fields: list[tuple[str, Any, Any]] = []
    for info in msgspec.structs.fields(WorldBook):
        if info.name == "entries":
            fields.append(("entries", list[msgspec.Raw], msgspec.field(default_factory=list)))
        elif info.default_factory is not msgspec.NODEFAULT:
            fields.append(
                (info.name, info.type, msgspec.field(default_factory=info.default_factory))
            )
        else:
            fields.append((info.name, info.type, info.default))
    return msgspec.defstruct("_BookSplit", fields, kw_only=True)


_BookSplit: Final = _book_split_type()
_BOOK_FIELDS: Final = tuple(
    f.name for f in msgspec.structs.fields(WorldBook) if f.name != "entries"
)


def _absent() -> msgspec.Raw:
    return msgspec.Raw(b"")


class _DocumentSplit(msgspec.Struct, rename="camel", kw_only=True):
    """A stored world-book document with its large parts left as raw spans."""

    schema_version: Any = None
    id: Any = None
    created_at: Any = None
    updated_at: Any = None
    name: str
    #: Empty when the document has no ``source`` (the body's default then applies).
    source: msgspec.Raw = msgspec.field(default_factory=_absent)
    book: _BookSplit = msgspec.field(default_factory=_BookSplit)  # type: ignore[valid-type]


_split_decoder: Final = msgspec.json.Decoder(_DocumentSplit)
_entry_decoder: Final = msgspec.json.Decoder(WorldBookEntry)
#: The memo of a revision decoded without spans: a later re-read shares nothing with it.
_NO_MEMO: Final = BookMemo(source=None, entries=())


class BookCodec:
    """Decodes world-book documents of type ``document_type`` (a Struct with ``name``,
    ``source`` and ``book`` fields), reusing a previous revision's unchanged parts."""

    def __init__(self, document_type: type[Any], source_type: type[Any], kind_name: str) -> None:
        self._full: msgspec.json.Decoder[Any] = msgspec.json.Decoder(document_type)
        self._source: msgspec.json.Decoder[Any] = msgspec.json.Decoder(source_type)
        self._document_type = document_type
        self._kind_name = kind_name

    def decode(
        self, data: bytes, previous: Any = None, memo: BookMemo | None = None
    ) -> tuple[str, str, str, Any, BookMemo]:
        """``(id, createdAt, updatedAt, document, memo)`` of ``data``; ``ValueError`` when invalid.

        ``previous`` and ``memo`` (both or neither) are an earlier revision and its memo: the
        spans they share with ``data`` are not decoded again.
        """
        try:
            split = _split_decoder.decode(data)
            check_meta(split.schema_version, split.id, split.created_at, split.updated_at)
            document, new_memo = self._assemble(split, previous, memo)
        except (msgspec.ValidationError, msgspec.DecodeError, ValueError):
            # The full decoder names the problem exactly as a plain read does (and serves
            # anything valid the split could not).
            return (*decode_typed(data, self._full, self._kind_name), _NO_MEMO)
        return split.id, split.created_at, split.updated_at, document, new_memo

    def _assemble(
        self, split: _DocumentSplit, previous: Any, memo: BookMemo | None
    ) -> tuple[Any, BookMemo]:
        known: dict[int, WorldBookEntry] = {}
        old_source: int | None = None
        if previous is not None and memo is not None:
            entries: Sequence[WorldBookEntry] = previous.book.entries
            if len(entries) == len(memo.entries):
                known = dict(zip(memo.entries, entries, strict=True))
                old_source = memo.source
        raws: list[msgspec.Raw] = split.book.entries  # type: ignore[attr-defined]
        keys = _span_hashes(raws)
        decoded: list[WorldBookEntry | None] = list(map(known.get, keys))
        fresh = [i for i, entry in enumerate(decoded) if entry is None]
        for i in fresh:
            decoded[i] = _entry_decoder.decode(raws[i])
        fields = {f: getattr(split.book, f) for f in _BOOK_FIELDS}
        book = WorldBook(entries=tuple(decoded), **fields)  # type: ignore[arg-type]
        if fresh and previous is not None:
            # Bytes that changed may still hold equal entries (an editor re-indented the whole
            # file): share those by value around the edited range too.
            book = share_unchanged_entries(previous.book, book)
        if not split.source:
            return self._document_type(name=split.name, book=book), BookMemo(None, tuple(keys))
        source_key = hash(bytes(split.source))
        same = source_key == old_source
        source = previous.source if same else self._source.decode(split.source)
        document = self._document_type(name=split.name, source=source, book=book)
        return document, BookMemo(source=source_key, entries=tuple(keys))
