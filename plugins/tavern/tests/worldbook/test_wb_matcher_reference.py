"""The Aho-Corasick matcher agrees with ST's per-key regex loop (the reference semantics).

The rule: docs/worldbook.md#wi-key-matching.
"""

from __future__ import annotations

import re

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from innkeeper_tavern.pure.formats.worldbook import WorldBook, WorldBookEntry
from innkeeper_tavern.pure.worldbook import (
    ActivationContext,
    ActivationMessage,
    ActivationRequest,
    ActivationSettings,
    BookInput,
    activate,
)

_ALPHABET = list("ab AB_é港1-\n.")
_keys = st.text(alphabet=st.sampled_from(_ALPHABET), min_size=1, max_size=4)


def st_matches(key: str, haystack: str, case_sensitive: bool, whole_words: bool) -> bool:
    """ST's plain-key test, written the way world-info.js does it (JS regex, ASCII \\W)."""
    key = key.strip()
    if not key:
        return False
    if not case_sensitive:
        key, haystack = key.lower(), haystack.lower()
    if not whole_words or len(key.split()) > 1:
        return key in haystack
    pattern = rf"(?:^|[^A-Za-z0-9_]){re.escape(key)}(?:$|[^A-Za-z0-9_])"
    return re.search(pattern, haystack) is not None


@settings(max_examples=200, deadline=None)
@given(
    keys=st.lists(_keys, min_size=1, max_size=8),
    messages=st.lists(st.text(alphabet=st.sampled_from(_ALPHABET), max_size=30), max_size=5),
    depth=st.integers(0, 6),
    case_sensitive=st.booleans(),
    whole_words=st.booleans(),
)
def test_engine_matches_the_reference_loop(
    keys: list[str], messages: list[str], depth: int, case_sensitive: bool, whole_words: bool
) -> None:
    entries = tuple(
        WorldBookEntry(uid=i, keys=(key,), content=f"c{i}") for i, key in enumerate(keys)
    )
    settings_ = ActivationSettings(
        scan_depth=depth,
        include_names=False,
        recursive=False,
        case_sensitive=case_sensitive,
        match_whole_words=whole_words,
        max_context_tokens=10**6,
    )
    context = ActivationContext(
        messages=tuple(
            ActivationMessage(id=str(i), role="user", text=t) for i, t in enumerate(messages)
        )
    )
    result = activate(
        ActivationRequest(
            books=[BookInput(resource_id="b", book=WorldBook(entries=entries))],
            context=context,
            settings=settings_,
        )
    )
    newest_first = [m.strip() for m in reversed(messages)][:depth]
    haystack = "\x01" + "\n\x01".join(newest_first) if newest_first else ""
    expected = {
        i for i, key in enumerate(keys) if st_matches(key, haystack, case_sensitive, whole_words)
    }
    got = {a.uid for a in result.activated}
    assert got == expected, msgspec.json.encode(list(result.decisions))
