"""Timed effects over simulated chats: swipes never advance them, turns do.

The rules: docs/worldbook.md#wi-timed-effects.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from innkeeper_tavern.pure.formats.worldbook import WorldBook, WorldBookEntry
from innkeeper_tavern.pure.worldbook import (
    ActivationContext,
    ActivationMessage,
    ActivationRequest,
    ActivationResult,
    ActivationSettings,
    BookInput,
    MatcherCache,
    Reason,
    TimedEffectsState,
    activate,
)

_entry = st.builds(
    lambda uid, sticky, cooldown, delay: WorldBookEntry(
        uid=uid, keys=("omen",), content=f"c{uid}", sticky=sticky, cooldown=cooldown, delay=delay
    ),
    st.integers(0, 5),
    st.sampled_from([None, 0, 1, 2, 3]),
    st.sampled_from([None, 0, 1, 2, 4]),
    st.sampled_from([None, 0, 2, 5]),
)
CACHE = MatcherCache()
SETTINGS = ActivationSettings(scan_depth=1, include_names=False, max_context_tokens=10**6)


def generate(
    book: WorldBook, mentions: bool, length: int, state: TimedEffectsState
) -> ActivationResult:
    texts = ["filler"] * (length - 1) + ["an omen" if mentions else "quiet"]
    context = ActivationContext(
        messages=tuple(
            ActivationMessage(id=str(i), role="user", text=t) for i, t in enumerate(texts)
        )
    )
    request = ActivationRequest(
        books=[BookInput(resource_id="b", book=book)],
        context=context,
        settings=SETTINGS,
        timed_state=state,
        seed=1,
    )
    return activate(request, CACHE)


@settings(max_examples=60, deadline=None)
@given(st.lists(_entry, min_size=1, max_size=4), st.lists(st.booleans(), min_size=1, max_size=8))
def test_swipes_repeat_the_original_generation(
    entries: list[WorldBookEntry], mentions: list[bool]
) -> None:
    book = WorldBook(entries=tuple({e.uid: e for e in entries}.values()))
    state = TimedEffectsState()
    last: dict[int | str, int] = {}
    for turn, mentioned in enumerate(mentions):
        length = 2 * turn + 1
        first = generate(book, mentioned, length, state)
        swipe = generate(book, mentioned, length, first.timed_state)
        again = generate(book, mentioned, length, swipe.timed_state)
        assert [a.lore_id for a in swipe.activated] == [a.lore_id for a in first.activated]
        assert swipe.timed_state == again.timed_state
        for decision in first.decisions:
            entry = next(e for e in book.entries if e.uid == decision.uid)
            if decision.reason == Reason.STICKY:
                assert entry.sticky
            if decision.reason == Reason.COOLDOWN:
                assert entry.cooldown
            if decision.reason == Reason.DELAY:
                assert entry.delay
                assert length < entry.delay
            if decision.activated and entry.delay:
                assert length >= entry.delay
        for item in first.activated:
            entry = next(e for e in book.entries if e.uid == item.uid)
            previous = last.get(item.uid)
            if entry.cooldown and not entry.sticky and previous is not None:
                # Cooldown blocks re-activation until the chat has advanced `cooldown` messages.
                assert length >= previous + entry.cooldown
            last[item.uid] = length
        state = first.timed_state
