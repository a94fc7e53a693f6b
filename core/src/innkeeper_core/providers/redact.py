"""Keep an API key out of text a model server sends back (errors that echo the key)."""

from __future__ import annotations

from typing import Final

#: How many trailing characters of a key may be shown (the page's "set (…abcd)").
KEY_TAIL: Final = 4


def redact(text: str, key: str) -> str:
    """``text`` with every occurrence of ``key`` replaced by ``…`` and its last 4 characters,
    so a server that echoes the key it refused never puts it into an answer, log or event."""
    if len(key) < KEY_TAIL:
        return text
    return text.replace(key, "…" + key[-KEY_TAIL:])
