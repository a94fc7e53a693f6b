"""The one error type of the pure format layer, and JSON decoding shared by every format.

Every rejection carries a stable ``code`` (clients and tests match on it), a human ``message``
(never containing resource bodies) and the HTTP ``status`` a route should answer with: 400 for a
malformed or unsupported document, 413 for a document over a size limit
(`docs/contract/http-api.md#v1-limits`: a stable code, and nothing is written).
"""

from __future__ import annotations

from typing import Any, Final

from .guards import (
    DEFAULT_LIMITS,
    InvalidJson,
    StructureLimitError,
    StructureLimits,
    decode_document,
)

#: Input was not valid UTF-8 JSON.
INVALID_JSON: Final = "INVALID_JSON"
#: The path of an error about a whole document rather than one of its fields.
DOCUMENT_PATH: Final = "$"

# Structure-guard codes that mean "too big" (413); the others mean "malformed" (400).
_STRUCTURE_TOO_LARGE_CODES: Final = frozenset(
    {"STRUCTURE_TOO_MANY_NODES", "STRUCTURE_STRING_TOO_LARGE", "WORLD_BOOK_TOO_MANY_ENTRIES"}
)


class FormatError(ValueError):
    """A document was rejected by the format layer; nothing derived from it may be written.

    ``code`` is stable (see ``docs/resources.md``), ``status`` is 400 or 413, ``path`` names the
    offending field as a JSON path into the document (``$.data.tags[0]``); ``$`` (the default)
    means the document as a whole (not JSON, not UTF-8, no card, a broken PNG container). Routes
    answer it as ``error.details.path`` (``http/common.translate``).
    """

    def __init__(self, code: str, message: str, status: int = 400, path: str | None = None) -> None:
        super().__init__(f"{message} at {path}" if path else message)
        self.code = code
        self.message = message
        self.status = status
        self.path: str = path or DOCUMENT_PATH

    @classmethod
    def from_structure(cls, error: StructureLimitError) -> FormatError:
        """Translate a :class:`~.guards.StructureLimitError` keeping its code."""
        status = 413 if error.code in _STRUCTURE_TOO_LARGE_CODES else 400
        return cls(error.code, error.message, status, error.path)


def field_message(message: str, path: str) -> str:
    """``message`` with the field it is about appended (nothing for the whole document)."""
    return message if path == DOCUMENT_PATH else f"{message} at {path}"


def decode_json(
    data: bytes | str, *, what: str = "document", limits: StructureLimits = DEFAULT_LIMITS
) -> Any:
    """Decode JSON text into plain Python values and apply the structure guard ``limits``.

    Raises ``FormatError``: ``INVALID_JSON`` (400) for bad UTF-8 or syntax, the guard's code
    (``STRUCTURE_TOO_DEEP``, ``NUMBER_OUT_OF_RANGE``, … with 400, or 413 for size) otherwise.
    Duplicate object keys keep the last value (as ``JSON.parse`` does). A leading UTF-8 byte-order
    mark (written by some Windows editors) is skipped. Nesting the decoder cannot follow is
    ``STRUCTURE_TOO_DEEP`` instead of escaping as ``RecursionError``.
    """
    try:
        return decode_document(data, limits, what=what)
    except InvalidJson as exc:
        raise FormatError(INVALID_JSON, str(exc)) from None
    except StructureLimitError as exc:
        raise FormatError.from_structure(exc) from None


def expect_object(value: Any, code: str, what: str) -> dict[str, Any]:
    """Return ``value`` if it is a JSON object, else raise ``FormatError(code)``."""
    if not isinstance(value, dict):
        raise FormatError(code, f"{what} must be a JSON object", 400, "$")
    return value
