"""The bytes of ``session-selections.json``, built from one checked fragment per session.

Every acknowledged write rewrites the whole file (docs/prompt-assembly.md "Session
selections"), so a bind must not re-encode every session: each session's pretty-printed entry
(``"<id>": {...}``) is encoded and validated once, when its record changes, and the file is the
fixed head, the entries joined by ``",\\n"`` and the fixed tail — byte for byte what
:func:`encode_state` gives for the whole state (a test holds them equal).

Everything here is pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import msgspec

from .model import SelectionFile, SelectionInvalid, SessionRecord, check_selection, check_session_id

#: docs/contract/loader.md#session-bindings: the current schema.
SCHEMA_VERSION: Final = 2

_encoder: Final = msgspec.json.Encoder()
_decoder: Final = msgspec.json.Decoder(SelectionFile)


def _serialize(doc: SelectionFile) -> bytes:
    """Compact JSON of a document; a module-level seam so tests can simulate a serializer bug."""
    return _encoder.encode(doc)


def encode_state(sessions: Mapping[str, SessionRecord]) -> bytes:
    """The exact bytes of ``session-selections.json`` for ``sessions`` (pretty, trailing LF)."""
    doc = SelectionFile(schema_version=SCHEMA_VERSION, sessions=dict(sessions))
    return msgspec.json.format(_serialize(doc), indent=2) + b"\n"


EMPTY: Final = encode_state({})
_HEAD: Final = EMPTY[: EMPTY.index(b"{}")] + b"{\n"
_TAIL: Final = b"\n  }\n}\n"


def encode_entry(session_id: str, record: SessionRecord) -> bytes:
    """The checked fragment of one session; ``ValueError`` unless its exact bytes decode back
    into a valid record under the same id."""
    data = encode_state({session_id: record})
    try:
        copy = _decoder.decode(data)
        if list(copy.sessions) != [session_id]:
            raise ValueError("the entry's key changed")
        for key, value in copy.sessions.items():
            check_session_id(key)
            check_selection(value.selection)
    except (msgspec.DecodeError, msgspec.ValidationError, SelectionInvalid) as exc:
        raise ValueError(str(exc)) from None
    if not (data.startswith(_HEAD) and data.endswith(_TAIL)):
        raise ValueError("the entry does not have the file's layout")
    return data[len(_HEAD) : -len(_TAIL)]


def assemble(fragments: Mapping[str, bytes]) -> bytes:
    """The file holding ``fragments`` in order (``encode_state`` of their records)."""
    if not fragments:
        return EMPTY
    return _HEAD + b",\n".join(fragments.values()) + _TAIL


def assembled_size(sizes: Mapping[str, int]) -> int:
    """``len(assemble(fragments))`` from the fragments' lengths, without joining them."""
    if not sizes:
        return len(EMPTY)
    return len(_HEAD) + len(_TAIL) + sum(sizes.values()) + 2 * (len(sizes) - 1)


__all__ = ["EMPTY", "SCHEMA_VERSION", "assemble", "assembled_size", "encode_entry", "encode_state"]
