"""Conformance scenarios written from SillyTavern's documented world-info behaviour.

Each test names the rule of `docs/worldbook.md#activation-rules` it checks. Books are synthetic:
the corpus has no inclusion groups, probabilities, regex keys or timed effects (see its INDEX
"Known gaps").
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import pytest

from innkeeper_tavern.pure.formats.worldbook import (
    CharacterFilter,
    Position,
    Role,
    SelectiveLogic,
    WorldBook,
    WorldBookEntry,
)
from innkeeper_tavern.pure.worldbook import (
    ActivationContext,
    ActivationMessage,
    ActivationRequest,
    ActivationResult,
    ActivationSettings,
    ActivationSources,
    BookInput,
    BookSource,
    CharacterIdentity,
    HostLimits,
    MatcherCache,
    Reason,
    TimedEffectsState,
    activate,
)

#: Settings that make scenarios easy to read: every message scanned, no names, big budget.
BASE = ActivationSettings(
    scan_depth=10,
    include_names=False,
    recursive=False,
    match_whole_words=True,
    max_context_tokens=1_000_000,
)

NAMES = ActivationSettings(
    scan_depth=10, include_names=True, recursive=False, max_context_tokens=1_000_000
)


def entry(uid: int, *keys: str, **fields: Any) -> WorldBookEntry:
    fields.setdefault("content", f"content {uid}")
    return WorldBookEntry(uid=uid, keys=keys, **fields)


def chat(*texts: str, names: bool = False) -> ActivationContext:
    return ActivationContext(
        messages=tuple(
            ActivationMessage(
                id=str(i),
                role="user" if i % 2 == 0 else "assistant",
                text=text,
                name=("Bob" if i % 2 == 0 else "Sera") if names else "",
            )
            for i, text in enumerate(texts)
        )
    )


def run(
    entries: list[WorldBookEntry],
    context: ActivationContext,
    *,
    settings: ActivationSettings = BASE,
    seed: int = 0,
    book: WorldBook | None = None,
    **kwargs: Any,
) -> ActivationResult:
    books = [BookInput(resource_id="wb", book=book or WorldBook(entries=tuple(entries)))]
    request = ActivationRequest(
        books=books, context=context, settings=settings, seed=seed, **kwargs
    )
    return activate(request)


def active(result: ActivationResult) -> list[int | str]:
    return sorted((a.uid for a in result.activated), key=str)


def decision(result: ActivationResult, uid: int) -> Any:
    return next(d for d in result.decisions if d.uid == uid)


# -------------------------------------------------------------- docs/worldbook.md#wi-key-matching


def test_whole_word_uses_ascii_word_boundaries() -> None:
    entries = [entry(1, "cat"), entry(2, "港口"), entry(3, "cafe"), entry(4, "red dragon")]
    result = run(
        entries, chat("we concatenate strings", "我们抵达了港口。", "an écafe", "ared dragonfly")
    )
    # "cat" inside "concatenate" is not a whole word; CJK and accented letters are \W in JS, so
    # whole-word matching degrades to substring there; multi-word keys are substring tests.
    assert active(result) == [2, 3, 4]
    assert decision(result, 1).reason == Reason.NO_KEY_MATCH


def test_whole_word_off_and_case_sensitivity() -> None:
    import msgspec

    settings = msgspec.structs.replace(BASE, match_whole_words=False)
    entries = [entry(1, "cat"), entry(2, "Dragon", case_sensitive=True), entry(3, "ELF")]
    result = run(entries, chat("concatenate the dragon and the elf"), settings=settings)
    assert active(result) == [1, 3]
    assert decision(result, 2).reason == Reason.NO_KEY_MATCH


def test_regex_keys_follow_javascript_and_ignore_whole_word() -> None:
    entries = [
        entry(1, "/drag(?:on|oon)s?/i"),
        entry(2, r"/\x01Bob:[^\x01]*?hello/"),
        entry(3, "/(unclosed/"),  # JS compile error → plain text key
        entry(4, r"/\bélan/"),  # JS \b is ASCII: 'é' is not a word char, so no boundary here
        entry(5, "/^never$/"),
    ]
    result = run(
        entries,
        chat("Hello there, DRAGOONS ahead", "hello élan", "see /(unclosed/ here", names=True),
        settings=NAMES,
    )
    assert 1 in active(result)
    # Bob's message does not contain "hello" after "Bob:" (it starts with "Hello"... case!)
    assert 2 not in active(result)
    assert 3 in active(result)
    assert 4 not in active(result)
    assert 5 not in active(result)
    result = run(entries, chat("well hello", "x", names=True), settings=NAMES)
    assert 2 in active(result)


def test_secondary_logic_enum() -> None:
    def with_logic(logic: SelectiveLogic, uid: int) -> WorldBookEntry:
        return entry(uid, "sword", secondary_keys=("fire", "ice"), selective_logic=logic)

    entries = [
        with_logic(SelectiveLogic.AND_ANY, 1),
        with_logic(SelectiveLogic.NOT_ALL, 2),
        with_logic(SelectiveLogic.NOT_ANY, 3),
        with_logic(SelectiveLogic.AND_ALL, 4),
    ]
    assert active(run(entries, chat("a sword of fire"))) == [1, 2]
    assert active(run(entries, chat("a sword of fire and ice"))) == [1, 4]
    assert active(run(entries, chat("a plain sword"))) == [2, 3]
    # Secondary keys only count when `selective` is on.
    lax = [entry(5, "sword", secondary_keys=("fire",), selective=False)]
    assert active(run(lax, chat("a plain sword"))) == [5]
    failed = decision(run(entries, chat("a plain sword")), 1)
    assert failed.reason == Reason.SECONDARY_LOGIC
    assert failed.matched_primary == ("sword",)


def test_keys_are_macro_substituted() -> None:
    entries = [entry(1, "{{char}}"), entry(2, "<USER>'s sword")]
    names = {"{{char}}": "Seraphina", "<USER>": "Bob"}

    def substitute(text: str) -> str:
        for macro, value in names.items():
            text = text.replace(macro, value)
        return text

    result = run(entries, chat("seraphina looks at Bob's sword"), substitute=substitute)
    assert active(result) == [1, 2]
    # Substituted keys follow the same whole-word rule.
    assert active(run(entries[:1], chat("Seraphinas everywhere"), substitute=substitute)) == []
    assert active(run(entries[:1], chat("(Seraphina)"), substitute=substitute)) == [1]


def test_scan_depth_entry_override_and_include_names() -> None:
    import msgspec

    settings = msgspec.structs.replace(BASE, scan_depth=1)
    entries = [entry(1, "apple"), entry(2, "apple", scan_depth=2), entry(3, "Sera")]
    # Newest message is "banana"; "apple" is one message older.
    result = run(entries, chat("apple pie", "banana", names=True), settings=settings)
    assert active(result) == [2]
    # include_names puts "Sera: " in front of the assistant's (newest) message.
    settings = msgspec.structs.replace(settings, include_names=True)
    result = run(entries, chat("x", "banana", names=True), settings=settings)
    assert active(result) == [3]
    # Depth 0 scans no chat messages.
    zero = [entry(4, "banana", scan_depth=0)]
    assert active(run(zero, chat("banana"))) == []


def test_min_activations_widens_the_scan() -> None:
    import msgspec

    settings = msgspec.structs.replace(BASE, scan_depth=1, min_activations=1)
    entries = [entry(1, "ancient")]
    result = run(entries, chat("ancient ruins", "nothing", "still nothing"), settings=settings)
    assert active(result) == [1]
    assert result.loops >= 3


def test_match_sources_opt_in() -> None:
    entries = [
        entry(1, "paladin", match_persona_description=True),
        entry(2, "paladin"),
    ]
    context = ActivationContext(
        messages=(ActivationMessage(id="1", role="user", text="hi"),),
        sources=ActivationSources(persona_description="Bob is a paladin."),
    )
    assert active(run(entries, context)) == [1]


# -------------------------------------------------------------- docs/worldbook.md#wi-entry-checks


def test_constant_disabled_triggers_filters_and_decorators() -> None:
    entries = [
        entry(1, constant=True),
        entry(2, "x", disable=True),
        entry(3, "x", triggers=("swipe",)),
        entry(4, "x", character_filter=CharacterFilter(names=("seraphina",))),
        entry(5, "x", character_filter=CharacterFilter(names=("seraphina",), is_exclude=True)),
        entry(6, "x", character_filter=CharacterFilter(tags=("fantasy",))),
        entry(7, content="@@activate\nalways here"),
        entry(8, "x", content="@@dont_activate\nnever"),
    ]
    identity = CharacterIdentity(name="seraphina", tags=("fantasy",))
    result = run(entries, chat("x"), character=identity)
    assert active(result) == [1, 4, 6, 7]
    assert decision(result, 2).reason == Reason.DISABLED
    assert decision(result, 3).reason == Reason.TRIGGER
    assert decision(result, 5).reason == Reason.CHARACTER_FILTER
    assert decision(result, 8).reason == Reason.DECORATOR_DONT_ACTIVATE
    assert next(a for a in result.activated if a.uid == 7).content == "always here"
    swipe = run(entries, chat("x"), character=identity, generation_type="swipe")
    assert 3 in active(swipe)


# ------------------------------------------------------------------ docs/worldbook.md#wi-selection


def test_group_override_picks_highest_order_override() -> None:
    entries = [
        entry(1, "tavern", group="inn", order=300),
        entry(2, "tavern", group="inn", order=50, group_override=True),
        entry(3, "tavern", group="inn", order=10, group_override=True),
    ]
    for seed in range(5):
        result = run(entries, chat("the tavern"), seed=seed)
        assert active(result) == [2]
        lost = decision(result, 1)
        assert lost.reason == Reason.GROUP_LOST
        assert lost.group_winner == "wb:2"


def test_group_weights_follow_the_seeded_roll() -> None:
    entries = [
        entry(1, "tavern", group="inn", group_weight=25),
        entry(2, "tavern", group="inn", group_weight=75),
        entry(3, "tavern", group="inn", group_weight=0),
    ]
    wins: Counter[int | str] = Counter()
    for seed in range(400):
        result = run(entries, chat("the tavern"), seed=seed)
        (winner,) = active(result)
        wins[winner] += 1
    assert wins[3] == 0
    assert 60 <= wins[1] <= 140  # expected 100 of 400
    assert wins[1] + wins[2] == 400
    # Same seed, same winner.
    assert active(run(entries, chat("the tavern"), seed=11)) == active(
        run(entries, chat("the tavern"), seed=11)
    )


def test_group_scoring_and_multi_group_membership() -> None:
    import msgspec

    entries = [
        entry(1, "ship", group="vehicle", use_group_scoring=True),
        entry(2, "ship", "harbor", group="vehicle, place", use_group_scoring=True),
        entry(3, "harbor", group="place", group_override=True),
    ]
    result = run(entries, chat("the ship in the harbor"))
    # Entry 2 out-scores entry 1 in "vehicle"; in "place" the override entry 3 beats it.
    assert decision(result, 1).reason == Reason.GROUP_SCORE
    assert active(result) == [3]
    settings = msgspec.structs.replace(BASE, use_group_scoring=True)
    result = run(entries[:2], chat("the ship in the harbor"), settings=settings)
    assert active(result) == [2]


def test_probability_is_seeded_and_explained() -> None:
    entries = [entry(i, "rain", probability=50) for i in range(40)]
    entries.append(entry(99, "rain", probability=30, use_probability=False))
    first = run(entries, chat("rain"), seed=1234)
    again = run(entries, chat("rain"), seed=1234)
    other = run(entries, chat("rain"), seed=4321)
    assert first.decisions == again.decisions
    assert active(first) != active(other)
    assert 10 <= len(active(first)) <= 35
    assert 99 in active(first)  # useProbability off ignores the percentage
    rejected = [d for d in first.decisions if d.reason == Reason.PROBABILITY]
    assert rejected
    for item in rejected:
        assert item.roll is not None
        assert item.roll > 50
    rolled = [d for d in first.decisions if d.activated and d.roll is not None]
    assert all(d.roll is not None and d.roll <= 50 for d in rolled)


# ------------------------------------------------------------------ docs/worldbook.md#wi-loops


def test_recursion_levels_prevent_and_exclude() -> None:
    import msgspec

    settings = msgspec.structs.replace(BASE, recursive=True)
    entries = [
        entry(1, "king", content="The king lives in the castle."),
        entry(2, "castle", content="The castle has a dungeon."),
        entry(3, "dungeon", content="A dragon sleeps below.", exclude_recursion=True),
        entry(4, "king", content="The king fears the moat.", prevent_recursion=True),
        entry(5, "moat", content="moat lore"),
    ]
    result = run(entries, chat("tell me about the king"), settings=settings)
    assert active(result) == [1, 2, 4]
    assert decision(result, 3).reason == Reason.EXCLUDE_RECURSION
    assert decision(result, 5).reason == Reason.NO_KEY_MATCH
    assert decision(result, 2).loop == 2
    # Recursion off: only direct matches.
    assert active(run(entries, chat("tell me about the king"))) == [1, 4]
    # max_recursion_steps bounds the loops.
    capped = msgspec.structs.replace(settings, max_recursion_steps=1)
    assert active(run(entries, chat("tell me about the king"), settings=capped)) == [1, 4]


def test_delay_until_recursion_levels_run_even_with_recursion_off() -> None:
    entries = [
        entry(1, "moon", content="moon one", delay_until_recursion=1),
        entry(2, "moon", content="moon two", delay_until_recursion=2),
        entry(3, "moon", content="moon zero"),
    ]
    result = run(entries, chat("the moon"))
    assert active(result) == [1, 2, 3]
    assert decision(result, 3).loop == 1
    assert decision(result, 1).loop < decision(result, 2).loop
    # A level-2 entry in the same group as a level-1 winner loses to the earlier activation.
    grouped = [
        entry(1, "moon", group="g", delay_until_recursion=1),
        entry(2, "moon", group="g", delay_until_recursion=2),
    ]
    result = run(grouped, chat("the moon"))
    assert active(result) == [1]
    assert decision(result, 2).reason == Reason.GROUP_ALREADY_ACTIVATED


# ------------------------------------------------------------- docs/worldbook.md#wi-timed-effects


def turn(
    entries: list[WorldBookEntry], state: TimedEffectsState, *texts: str, **kw: Any
) -> ActivationResult:
    return run(entries, chat(*texts), timed_state=state, **kw)


def test_sticky_survives_turns_but_not_swipes() -> None:
    entries = [entry(1, "curse", sticky=4)]
    t1 = turn(entries, TimedEffectsState(), "a curse!")  # chat length 1
    assert active(t1) == [1]
    assert t1.timed_state.sticky["wb:1"].end == 5
    t2 = turn(entries, t1.timed_state, "quiet", "ok", "next")  # length 3: still sticky
    assert active(t2) == [1]
    assert decision(t2, 1).reason == Reason.STICKY
    t3 = turn(entries, t2.timed_state, "quiet", "ok", "next", "x", "y")  # length 5: expired
    assert active(t3) == []
    # Swipe at the same length as activation: the effect did not advance and is dropped, so
    # only keys decide.
    swipe = turn(entries, t1.timed_state, "no keyword now")
    assert active(swipe) == []
    assert "wb:1" not in swipe.timed_state.sticky


def test_cooldown_blocks_until_the_chat_advances() -> None:
    entries = [entry(1, "storm", cooldown=3)]
    t1 = turn(entries, TimedEffectsState(), "storm")
    assert active(t1) == [1]
    t2 = turn(entries, t1.timed_state, "storm", "a", "storm")  # length 3 < 1 + 3
    assert active(t2) == []
    assert decision(t2, 1).reason == Reason.COOLDOWN
    t3 = turn(entries, t2.timed_state, "storm", "a", "storm", "b", "storm")  # length 5
    assert active(t3) == [1]
    # A swipe (same length as the activation) does not count as time passing.
    swipe = turn(entries, t1.timed_state, "storm")
    assert active(swipe) == [1]


def test_sticky_hands_over_to_protected_cooldown() -> None:
    entries = [entry(1, "omen", sticky=2, cooldown=2)]
    t1 = turn(entries, TimedEffectsState(), "omen")
    t2 = turn(entries, t1.timed_state, "omen", "a", "omen")  # length 3 ≥ end 3: sticky ends
    assert active(t2) == []
    assert decision(t2, 1).reason == Reason.COOLDOWN
    assert t2.timed_state.cooldown["wb:1"].protected
    # Protected: a swipe at the same length keeps the cooldown.
    swipe = turn(entries, t2.timed_state, "omen", "a", "omen")
    assert decision(swipe, 1).reason == Reason.COOLDOWN


def test_delay_and_edited_entries() -> None:
    entries = [entry(1, "ghost", delay=3)]
    assert decision(turn(entries, TimedEffectsState(), "ghost"), 1).reason == Reason.DELAY
    assert active(turn(entries, TimedEffectsState(), "ghost", "a", "ghost")) == [1]
    # Editing an entry changes its hash: its old sticky effect no longer applies.
    sticky = [entry(2, "curse", sticky=10)]
    t1 = turn(sticky, TimedEffectsState(), "curse")
    edited = [entry(2, "curse", sticky=10, content="new text")]
    t2 = turn(edited, t1.timed_state, "curse", "a", "b")
    assert decision(t2, 2).reason == Reason.KEY_MATCH
    # Dry runs never start effects.
    dry = turn(sticky, TimedEffectsState(), "curse", dry_run=True)
    assert dry.timed_state.sticky == {}


# ------------------------------------------------------------------ budget


def test_budget_overflow_keeps_ignore_budget_entries() -> None:
    import msgspec

    settings = msgspec.structs.replace(BASE, max_context_tokens=100, budget_percent=50)
    entries = [
        entry(1, "x", order=300, content="a" * 70),  # 20 tokens at 3.5 chars/token
        entry(2, "x", order=200, content="b" * 70),
        entry(3, "x", order=100, content="c" * 70),  # 60 ≥ 50: overflow
        entry(4, "x", order=50, content="d" * 70, ignore_budget=True),
        entry(5, "x", order=40, content="e" * 7),
    ]
    result = run(entries, chat("x"), settings=settings)
    assert active(result) == [1, 2, 4]
    assert decision(result, 3).reason == Reason.BUDGET
    assert decision(result, 5).reason == Reason.BUDGET
    assert result.budget.overflowed
    assert result.budget.limit == 50


def test_entries_met_after_the_overflow_explain_what_they_would_have_cost() -> None:
    # After the overflow an entry is rejected without being counted on the hot path; its
    # explanation, read later, still says what it would have cost against the running total
    # (which an ignoreBudget entry kept after the overflow raised).
    import msgspec

    settings = msgspec.structs.replace(BASE, max_context_tokens=100, budget_percent=50)
    entries = [
        entry(1, "x", order=300, content="a" * 70),  # 20 tokens
        entry(2, "x", order=200, content="b" * 140),  # 40: 20 + 40 ≥ 50, overflow
        entry(3, "x", "y", order=150, content="c" * 35),  # 10
        entry(4, "x", order=100, content="d" * 70, ignore_budget=True),  # kept: 40 used
        entry(5, "x", order=90, content="e" * 7, secondary_keys=("nope",)),  # AND_ANY fails
        entry(6, "zzz", order=80, content="f"),  # no key hit
        entry(7, "x", order=70, content="g" * 36),  # 11
    ]
    result = run(entries, chat("x y"), settings=settings)
    assert active(result) == [1, 4]
    two, three, five, six, seven = (decision(result, uid) for uid in (2, 3, 5, 6, 7))
    assert (two.reason, two.tokens, two.detail) == (
        Reason.BUDGET,
        40,
        "20 + 40 tokens reach the budget 50",
    )
    assert (three.reason, three.tokens, three.detail) == (
        Reason.BUDGET,
        10,
        "20 + 10 tokens reach the budget 50",
    )
    assert three.matched_primary == ("x", "y") and three.loop == 1
    assert (seven.reason, seven.tokens, seven.detail) == (
        Reason.BUDGET,
        11,
        "40 + 11 tokens reach the budget 50",
    )
    assert (five.reason, five.tokens, five.matched_primary) == (
        Reason.SECONDARY_LOGIC,
        None,
        ("x",),
    )
    assert five.detail == "AND_ANY: 0 of 1 secondary keys matched"
    assert (six.reason, six.loop) == (Reason.NO_KEY_MATCH, 0)


def test_budget_cap_and_book_budget() -> None:
    import msgspec

    settings = msgspec.structs.replace(BASE, budget_cap=30)
    entries = [entry(1, "x", content="a" * 70), entry(2, "x", content="b" * 70)]
    result = run(entries, chat("x"), settings=settings)
    assert result.budget.limit == 30
    assert len(result.activated) == 1
    book = WorldBook(entries=tuple(entries), token_budget=25)
    result = run([], chat("x"), book=book)
    assert len(result.activated) == 1
    assert {d.reason for d in result.decisions} == {Reason.KEY_MATCH, Reason.BOOK_BUDGET}


# ------------------------------------------------------------------ docs/worldbook.md#wi-positions


def test_positions_depth_roles_and_order() -> None:
    entries = [
        entry(1, "x", position=Position.AT_DEPTH, depth=2, role=Role.USER, order=5),
        entry(2, "x", position=Position.AT_DEPTH, depth=2, role=Role.USER, order=1),
        entry(3, "x", position=Position.AT_DEPTH, depth=2, role=Role.SYSTEM),
        entry(4, "x", position=Position.AT_DEPTH, depth=0, role=Role.ASSISTANT),
        entry(5, "x", position=Position.BEFORE_CHAR, order=20),
        entry(6, "x", position=Position.BEFORE_CHAR, order=10),
        entry(7, "x", position=Position.AFTER_CHAR),
        entry(8, "x", position=Position.AN_TOP),
        entry(9, "x", position=Position.EM_BOTTOM),
        entry(10, "x", position=Position.OUTLET, outlet_name="Weather"),
        entry(11, "x", position=Position.OUTLET),
    ]
    result = run(entries, chat("x"))
    positions = result.positions
    assert [e.lore_id for e in positions.before] == ["wb:6", "wb:5"]  # ascending order
    assert positions.before_text == "content 6\ncontent 5"
    assert [e.lore_id for e in positions.after] == ["wb:7"]
    assert [e.lore_id for e in positions.an_top] == ["wb:8"]
    assert [e.lore_id for e in positions.em_bottom] == ["wb:9"]
    groups = [(g.depth, g.role, [e.lore_id for e in g.entries]) for g in positions.at_depth]
    assert groups == [
        (0, Role.ASSISTANT, ["wb:4"]),
        (2, Role.SYSTEM, ["wb:3"]),
        (2, Role.USER, ["wb:2", "wb:1"]),
    ]
    assert list(positions.outlets) == ["Weather"]
    assert positions.outlet_text("Weather") == "content 10"
    assert positions.outlet_text("weather") == ""
    unnamed = decision(result, 11)
    assert unnamed.reason == Reason.OUTLET_UNNAMED
    assert unnamed.applied_position is None
    placed = decision(result, 1)
    assert placed.requested_position == Position.AT_DEPTH
    assert placed.applied_position == Position.AT_DEPTH


def test_lore_ids_and_strategy_order() -> None:
    shared = [entry(1, "x", order=100)]
    books = [
        BookInput(
            resource_id="char", book=WorldBook(entries=tuple(shared)), source=BookSource.CHARACTER
        ),
        BookInput(
            resource_id="sess", book=WorldBook(entries=tuple(shared)), source=BookSource.SESSION
        ),
    ]
    result = activate(ActivationRequest(books=books, context=chat("x"), settings=BASE))
    assert [a.lore_id for a in result.activated] == ["sess:1", "char:1"]
    assert [d.lore_id for d in result.decisions] == ["char:1", "sess:1"]


# ------------------------------------------------------------------ host bounds


def test_book_that_does_not_fit_is_skipped_whole() -> None:
    big = WorldBook(entries=tuple(entry(i, "x") for i in range(6_000)))
    also = WorldBook(entries=tuple(entry(i, "y") for i in range(5_000)))
    embedded = WorldBook(entries=(entry(1, "z"),))
    books = [
        BookInput(resource_id="a", book=big),
        BookInput(resource_id="b", book=also, source=BookSource.USER),
        BookInput(resource_id="card", book=embedded, source=BookSource.EMBEDDED),
    ]
    result = activate(ActivationRequest(books=books, context=chat("z"), settings=BASE))
    codes = [d.code for d in result.diagnostics]
    assert codes == ["WORLD_BOOK_RUNTIME_TOTAL_LIMIT"]
    assert result.diagnostics[0].resource_id == "b"
    assert [a.lore_id for a in result.activated] == ["card:1"]
    skipped = [d for d in result.decisions if d.resource_id == "b"]
    assert len(skipped) == 5_000
    assert {d.reason for d in skipped} == {Reason.HOST_ENTRY_CAP}


def test_candidate_and_byte_caps_never_loosen() -> None:
    entries = [entry(i, constant=True, content=f"lore {i:05d}") for i in range(5_000)]
    result = run(entries, chat("x"))
    assert len(result.activated) == 4_096
    assert Counter(d.reason for d in result.decisions)[Reason.HOST_CANDIDATE_CAP] == 904
    # Lore bytes ≤ 2 × profile budget; a looser request is clamped to the hard cap.
    small = run(entries[:100], chat("x"), host_limits=HostLimits(max_profile_bytes=100))
    assert sum(len(a.content.encode()) for a in small.activated) <= 200
    assert Reason.HOST_BYTES_CAP in {d.reason for d in small.decisions}
    assert HostLimits(max_lore_candidates=10**6).clamped().max_lore_candidates == 4_096


def test_catastrophic_regex_is_cut_off() -> None:
    entries = [entry(1, "/(a|aa)+$/"), entry(2, "/^(\\w+\\s?)*$/"), entry(3, "plain")]
    text = "a" * 5_000 + "!"
    started = time.monotonic()
    result = run(entries, chat(text + " plain", text))
    elapsed = time.monotonic() - started
    codes = {d.code for d in result.diagnostics}
    assert "WORLD_BOOK_REGEX_KEY_TIMEOUT" in codes
    assert active(result) == [3]
    assert decision(result, 1).reason == Reason.NO_KEY_MATCH
    assert elapsed < 5  # generous: the per-key budget is 50 ms, the request budget 0.5 s


def test_compiled_matcher_is_reused_per_revision() -> None:
    cache = MatcherCache()
    book = WorldBook(entries=(entry(1, "x"),))
    for _ in range(3):
        activate(
            ActivationRequest(
                books=[BookInput(resource_id="r", book=book, revision=7)], context=chat("x")
            ),
            cache,
        )
    assert len(cache) == 1
    changed = WorldBook(entries=(entry(1, "y"),))
    result = activate(
        ActivationRequest(
            books=[BookInput(resource_id="r", book=changed, revision=8)], context=chat("y")
        ),
        cache,
    )
    assert active(result) == [1]
    assert len(cache) == 2


@pytest.mark.parametrize("count", [0, 1])
def test_empty_inputs(count: int) -> None:
    entries = [entry(1, "x")] * count
    result = run(entries, ActivationContext())
    assert result.activated == ()


def test_forced_activation_and_loop_in_explanations() -> None:
    entries = [entry(1, "never-said"), entry(2, "never-said", disable=True)]
    result = run(entries, chat("hello"), forced=frozenset({"wb:1", "wb:2"}))
    assert active(result) == [1]
    assert decision(result, 1).reason == Reason.FORCED
    assert decision(result, 1).loop == 1
    assert decision(result, 2).reason == Reason.DISABLED


def test_postprocess_runs_before_placement() -> None:
    entries = [entry(1, "x", content="keep [ooc]"), entry(2, "x", content="[ooc]")]
    result = run(entries, chat("x"), postprocess=lambda text, _e: text.replace("[ooc]", "").strip())
    assert [a.content for a in result.activated] == ["keep"]
    assert decision(result, 2).reason == Reason.EMPTY_CONTENT


def test_decorator_block_and_fallbacks() -> None:
    from innkeeper_tavern.pure.worldbook.matcher import parse_decorators

    assert parse_decorators("@@activate\n@@unknown\nbody\n@@activate") == (
        frozenset({"@@activate"}),
        "body\n@@activate",
    )
    # `@@@x` is a fallback for the preceding unknown decorator.
    assert parse_decorators("@@future_thing\n@@@dont_activate\ntext") == (
        frozenset({"@@dont_activate"}),
        "text",
    )
    assert parse_decorators("no decorators") == (frozenset(), "no decorators")


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        ("EVENLY", ["sess:1", "preset:3", "char:2"]),
        ("CHARACTER_FIRST", ["sess:1", "char:2", "preset:3"]),
        ("GLOBAL_FIRST", ["sess:1", "preset:3", "char:2"]),
    ],
)
def test_character_strategy_orders_budget_priority(strategy: str, expected: list[str]) -> None:
    import msgspec

    from innkeeper_tavern.pure.worldbook import CharacterStrategy

    def book(uid: int, order: int) -> WorldBook:
        return WorldBook(entries=(entry(uid, "x", order=order, content="y" * 35),))

    books = [
        BookInput(resource_id="sess", book=book(1, 10), source=BookSource.SESSION),
        BookInput(resource_id="char", book=book(2, 50), source=BookSource.CHARACTER),
        BookInput(resource_id="preset", book=book(3, 90), source=BookSource.PRESET),
    ]
    settings = msgspec.structs.replace(
        BASE, character_strategy=CharacterStrategy[strategy], budget_cap=25
    )
    # Each entry costs 10 tokens; the 25-token budget admits the first two in priority order.
    result = activate(ActivationRequest(books=books, context=chat("x"), settings=settings))
    admitted = [d.lore_id for d in result.decisions if d.activated]
    assert sorted(admitted) == sorted(expected[:2])
    rejected = [d.lore_id for d in result.decisions if d.reason == Reason.BUDGET]
    assert rejected == [expected[2]]


def test_audit_records_follow_the_api_shape() -> None:
    import json

    from innkeeper_tavern.pure.worldbook import audit_books

    entries = [
        entry(1, "sword", secondary_keys=("fire",), content="blade"),
        entry(2, "shield", position=Position.AT_DEPTH, depth=1, role=Role.USER),
        entry(3, "rain", probability=0.0001),
    ]
    book = WorldBook(entries=tuple(entries), name="Armory")
    books = [BookInput(resource_id="armory", book=book)]
    result = activate(ActivationRequest(books=books, context=chat("sword and shield in rain")))
    (audit,) = audit_books(books, result, max_decisions=2)
    json.dumps(audit)  # JSON-ready
    assert audit["resource"]["id"] == "armory"
    assert audit["resource"]["activeEntryIds"] == ["2"]
    first, second = audit["decisions"]
    assert first["decision"] == "included"
    assert first["entryId"] == "2"
    assert first["appliedPosition"] == "at_depth"
    assert first["role"] == "user"
    assert second["decision"] == "rejected"
    assert second["reason"] in {"secondary-logic", "probability"}


def test_shared_cache_across_worker_threads() -> None:
    from concurrent.futures import ThreadPoolExecutor

    import msgspec

    cache = MatcherCache()
    entries = tuple(entry(i, f"k{i}", "{{char}}", probability=50) for i in range(300))
    book = WorldBook(entries=entries)
    request = ActivationRequest(
        books=[BookInput(resource_id="t", book=book, revision=1)],
        context=chat(" ".join(f"k{i}" for i in range(0, 300, 3)) + " Sera"),
        settings=BASE,
        seed=9,
        substitute=lambda text: text.replace("{{char}}", "Sera"),
    )
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda _: activate(request, cache), range(8)))
    encoded = {msgspec.json.encode(r.materialized()) for r in results}
    assert len(encoded) == 1
    assert len(cache) == 1
