"""Every corpus book evaluated against sample chats, plus hypothesis properties of activation."""

from __future__ import annotations

import random
from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from innkeeper_tavern.pure.formats.macros import MacroEnv, MacroSession
from innkeeper_tavern.pure.formats.worldbook import (
    Position,
    Role,
    SelectiveLogic,
    WorldBook,
    WorldBookEntry,
    parse_character_book,
    parse_world_book,
)
from innkeeper_tavern.pure.worldbook import (
    ActivationContext,
    ActivationMessage,
    ActivationRequest,
    ActivationSettings,
    BookInput,
    BookSource,
    HostLimits,
    MatcherCache,
    Reason,
    TimedEffectsState,
    activate,
)


def _sample_chat(book: WorldBook, rng: random.Random) -> ActivationContext:
    """A chat that mentions some of the book's keys among ordinary prose."""
    keys = [k for e in book.entries for k in e.keys if k.strip()]
    texts = []
    for i in range(8):
        words = ["the", "road", "was", "quiet", "and", "long"]
        if keys:
            words.append(rng.choice(keys))
        rng.shuffle(words)
        texts.append(" ".join(words) + ("." if i % 2 else "?"))
    return ActivationContext(
        messages=tuple(
            ActivationMessage(
                id=str(i), role="user" if i % 2 == 0 else "assistant", text=t, name="Bob"
            )
            for i, t in enumerate(texts)
        )
    )


def test_every_corpus_book_activates_without_error(corpus: list[Any]) -> None:
    cache = MatcherCache()
    env = MacroEnv(char="Seraphina", user="Bob", description="A guardian of the forest.")
    for name, raw, shape in corpus:
        book = parse_world_book(raw) if shape == "st" else parse_character_book(raw)
        rng = random.Random(name)
        state = TimedEffectsState()
        source = BookSource.SESSION if shape == "st" else BookSource.EMBEDDED
        for seed in range(3):
            session = MacroSession(env, rng=random.Random(seed))
            request = ActivationRequest(
                books=[BookInput(resource_id=name, book=book, source=source, revision=1)],
                context=_sample_chat(book, rng),
                settings=ActivationSettings(),  # ST's fresh-install defaults
                seed=seed,
                timed_state=state,
                substitute=session.expand,
            )
            result = activate(request, cache)
            assert len(result.decisions) == len(book.entries), name
            assert not [d for d in result.diagnostics if d.code != "WORLD_BOOK_SCAN_TEXT_TRUNCATED"]
            assert result.activated, name  # every sample chat mentions a key
            for item in result.activated:
                assert "{{user}}" not in item.content
                assert "{{char}}" not in item.content
            state = result.timed_state


# ------------------------------------------------------------------ hypothesis

_WORDS = ["ship", "storm", "港口", "Élan", "cat", "red dragon", "/dra?g/i", "{{char}}", "", "x"]

_entries = st.builds(
    lambda uid, keys, sec, logic, constant, prob, group, weight, override, order, pos, sticky, cooldown, delay, delay_rec, scan_depth, content, prevent, exclude, ignore: (  # noqa: E501
        WorldBookEntry(
            uid=uid,
            keys=tuple(keys),
            secondary_keys=tuple(sec),
            selective_logic=logic,
            constant=constant,
            probability=prob,
            group=group,
            group_weight=weight,
            group_override=override,
            order=order,
            position=pos,
            role=Role.USER,
            sticky=sticky,
            cooldown=cooldown,
            delay=delay,
            delay_until_recursion=delay_rec,
            scan_depth=scan_depth,
            content=content,
            prevent_recursion=prevent,
            exclude_recursion=exclude,
            ignore_budget=ignore,
        )
    ),
    st.integers(0, 50),
    st.lists(st.sampled_from(_WORDS), max_size=3),
    st.lists(st.sampled_from(_WORDS), max_size=2),
    st.sampled_from(list(SelectiveLogic)),
    st.booleans(),
    st.sampled_from([0, 10, 50, 100]),
    st.sampled_from(["", "a", "b", "a, b"]),
    st.sampled_from([0, 1, 100, -5]),
    st.booleans(),
    st.integers(-5, 300),
    st.sampled_from(list(Position)),
    st.sampled_from([None, 0, 2]),
    st.sampled_from([None, 0, 1]),
    st.sampled_from([None, 0, 3]),
    st.sampled_from([0, 0, 1, 2]),
    st.sampled_from([None, 0, 1, 3]),
    st.sampled_from(["ship ahead", "storm", "", "the cat {{user}}", "x" * 200]),
    st.booleans(),
    st.booleans(),
    st.booleans(),
)

_messages = st.lists(
    st.text(alphabet=st.sampled_from(list("ab cdxyz港口ÉéSHIPstorm/\n")), max_size=40)
    | st.sampled_from(["the ship in a storm", "red dragon!", "Seraphina", "港口"]),
    max_size=6,
)


def _request(
    entries: list[WorldBookEntry], texts: list[str], seed: int, state: TimedEffectsState
) -> ActivationRequest:
    unique = {e.uid: e for e in entries}
    book = WorldBook(entries=tuple(unique.values()))
    return ActivationRequest(
        books=[
            BookInput(resource_id="a", book=book),
            BookInput(resource_id="b", book=book, source=BookSource.CHARACTER),
        ],
        context=ActivationContext(
            messages=tuple(
                ActivationMessage(id=str(i), role="user", text=t) for i, t in enumerate(texts)
            )
        ),
        settings=ActivationSettings(
            scan_depth=3, recursive=True, min_activations=1, max_context_tokens=400
        ),
        seed=seed,
        timed_state=state,
        substitute=lambda text: text.replace("{{char}}", "Seraphina"),
        host_limits=HostLimits(
            max_runtime_entries=60, max_lore_candidates=5, max_profile_bytes=300
        ),
    )


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_entries, max_size=12), _messages, st.integers(0, 2**32))
def test_random_books_never_crash_exceed_caps_or_vary_per_seed(
    entries: list[WorldBookEntry], texts: list[str], seed: int
) -> None:
    request = _request(entries, texts, seed, TimedEffectsState())
    first = activate(request)
    second = activate(request, MatcherCache())
    assert msgspec.json.encode(first.materialized()) == msgspec.json.encode(second.materialized())
    assert len(first.activated) <= 5
    assert sum(len(a.content.encode()) for a in first.activated) <= 600
    assert len(first.decisions) == sum(len(b.book.entries) for b in request.books)
    activated_ids = {a.lore_id for a in first.activated}
    assert activated_ids == {d.lore_id for d in first.decisions if d.activated}
    for d in first.decisions:
        if not d.activated:
            assert d.applied_position is None
        if d.reason == Reason.PROBABILITY:
            assert d.roll is not None
    # Position buckets hold exactly the activated entries.
    positions = first.positions
    placed = [
        *positions.before,
        *positions.after,
        *positions.an_top,
        *positions.an_bottom,
        *positions.em_top,
        *positions.em_bottom,
        *(e for g in positions.at_depth for e in g.entries),
        *(e for group in positions.outlets.values() for e in group),
    ]
    assert sorted(p.lore_id for p in placed) == sorted(activated_ids)
    # A later turn with the returned state is also well-formed.
    later = activate(_request(entries, [*texts, "next", "turn"], seed, first.timed_state))
    assert len(later.activated) <= 5
