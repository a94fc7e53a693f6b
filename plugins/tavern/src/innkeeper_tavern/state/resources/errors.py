"""Errors of the resource stores: a stable ``code``, an HTTP ``status`` and a message.

Messages name ids and limits, never resource bodies (docs/contract/conventions.md#bodies-stay-out:
logs and errors never contain resource bodies). The HTTP layer answers them as ``{ok:false, error,
code}``.
"""

from __future__ import annotations

from typing import Final

# Not found (404): the id in the path names no stored resource.
PRESET_NOT_FOUND: Final = "PRESET_NOT_FOUND"
CHARACTER_NOT_FOUND: Final = "CHARACTER_NOT_FOUND"
USER_NOT_FOUND: Final = "USER_NOT_FOUND"
WORLD_BOOK_NOT_FOUND: Final = "WORLD_BOOK_NOT_FOUND"

#: A stored document would exceed its kind's size limit (413).
DOCUMENT_TOO_LARGE: Final = "RESOURCE_DOCUMENT_TOO_LARGE"
#: A store is full (count limit, 409).
RESOURCE_LIMIT: Final = "RESOURCE_LIMIT_REACHED"
#: An edit sent the revision it read (``expectedRevision``) and the document changed since (409).
REVISION_CONFLICT: Final = "RESOURCE_REVISION_CONFLICT"
#: A relation write names world books that do not exist, or has a bad id (400).
WORLD_BOOK_BINDING_INVALID: Final = "WORLD_BOOK_BINDING_INVALID"
#: A relation write has more than 100 books (400).
WORLD_BOOK_BINDING_LIMIT: Final = "WORLD_BOOK_BINDING_LIMIT"
#: ``PUT /characters/order``: bad mode (400).
CHARACTER_SORT_MODE_INVALID: Final = "CHARACTER_SORT_MODE_INVALID"
#: ``PUT /characters/order``: unknown, duplicate or missing ids (400).
CHARACTER_ORDER_INVALID: Final = "CHARACTER_ORDER_INVALID"
#: ``POST /characters/relink``: the previous id is not a missing card (400).
CHARACTER_RELINK_INVALID: Final = "CHARACTER_RELINK_INVALID"
#: A world-book edit is malformed (400).
WORLD_BOOK_INVALID: Final = "WORLD_BOOK_INVALID"
#: A file could not be written; nothing changed (500).
STORAGE_WRITE_FAILED: Final = "RESOURCE_WRITE_FAILED"
#: A stored file could not be read or is corrupt (500).
STORAGE_READ_FAILED: Final = "RESOURCE_READ_FAILED"


class ResourceError(Exception):
    """A store refused an operation; nothing was written."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
