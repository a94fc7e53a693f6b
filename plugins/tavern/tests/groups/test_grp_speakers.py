"""Speaker choice for each strategy on scripted chats, with scripted and seeded random sources."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable

import pytest

from innkeeper_tavern.pure.groups.speakers import (
    Candidate,
    ChatLine,
    choose_speakers,
    shuffled,
    swipe_speaker,
    talkativeness_of,
    words,
)


class Script:
    """A random source that returns the given floats in order (and fails when it runs out, so a
    test notices a strategy drawing more than SillyTavern does)."""

    def __init__(self, values: Iterable[float]) -> None:
        self.values = list(values)

    def random(self) -> float:
        assert self.values, "drew more random numbers than scripted"
        return self.values.pop(0)


def cast(*specs: tuple[str, float] | tuple[str, float, bool]) -> list[Candidate]:
    out = []
    for spec in specs:
        name, talk = spec[0], spec[1]
        muted = spec[2] if len(spec) > 2 else False
        out.append(Candidate(character_id=name.lower(), name=name, talkativeness=talk, muted=muted))
    return out


def said(name: str, text: str) -> ChatLine:
    return ChatLine(text=text, character_id=name.lower(), name=name)


USER = ChatLine(text="hello", is_user=True, name="Player")


def test_natural_mentions_come_first_in_order_of_mention() -> None:
    members = cast(("Alice", 0.0), ("Bob", 0.0), ("Cara Mae", 0.0))
    # Shuffle draws 3, then one roll per member (0.5 > 0: nobody activated by talkativeness).
    rng = Script([0.1, 0.1, 0.1, 0.5, 0.5, 0.5])
    got = choose_speakers(
        "natural",
        members,
        [USER],
        user_input="MAE, what do you think? And bob... and Mae again",
        allow_self_responses=False,
        rng=rng,
    )
    assert got == ["cara mae", "bob"]
    assert rng.values == []


def test_natural_bans_the_last_speaker_unless_self_responses_are_allowed() -> None:
    members = cast(("Alice", 0.0), ("Bob", 0.0))
    chat = [USER, said("Bob", "Alice, Bob here.")]
    rolls = [0.0, 0.0, 0.5, 0.5]
    banned = choose_speakers(
        "natural", members, chat, user_input=None, allow_self_responses=False, rng=Script(rolls)
    )
    assert banned == ["alice"]
    allowed = choose_speakers(
        "natural", members, chat, user_input=None, allow_self_responses=True, rng=Script(rolls)
    )
    assert allowed == ["alice", "bob"]
    # The player's own message lifts the ban: Bob may answer a player who names him.
    answered = choose_speakers(
        "natural",
        members,
        chat,
        user_input="Bob?",
        allow_self_responses=False,
        rng=Script(rolls),
    )
    assert answered == ["bob"]


def test_natural_talkativeness_rolls_in_shuffled_order() -> None:
    members = cast(("Ann", 0.9), ("Ben", 0.1), ("Cal", 0.5))
    # Shuffle [Ann, Ben, Cal]: 0.0 swaps places 2 and 0 -> [Cal, Ben, Ann]; 0.99 and 0.5 keep it.
    # Rolls in that order: Cal 0.5 < 0.6 no, Ben 0.1 >= 0.05 yes, Ann 0.9 < 0.95 no.
    rng = Script([0.0, 0.99, 0.5, 0.6, 0.05, 0.95])
    got = choose_speakers(
        "natural", members, [USER], user_input="hi all", allow_self_responses=False, rng=rng
    )
    assert got == ["ben"]
    assert [c.name for c in shuffled(members, Script([0.0, 0.99, 0.5]))] == ["Cal", "Ben", "Ann"]


def test_natural_falls_back_to_a_chatty_member_then_to_anyone() -> None:
    members = cast(("Ann", 0.0), ("Ben", 0.2), ("Cal", 0.0))
    # Shuffle keeps the order (0.99, 0.99, 0.0); no roll passes; the pool is [Ben] (talk > 0).
    rng = Script([0.99, 0.99, 0.0, 0.9, 0.9, 0.9, 0.7])
    got = choose_speakers(
        "natural", members, [USER], user_input="hm", allow_self_responses=False, rng=rng
    )
    assert got == ["ben"]
    silent = cast(("Ann", 0.0), ("Ben", 0.0), ("Cal", 0.0))
    rng = Script([0.99, 0.99, 0.0, 0.9, 0.9, 0.9, 0.7])
    got = choose_speakers(
        "natural", silent, [USER], user_input="hm", allow_self_responses=False, rng=rng
    )
    assert got == ["cal"]  # floor(0.7 * 3) = 2


def test_natural_with_a_seeded_source_follows_talkativeness() -> None:
    members = cast(("Ann", 1.0), ("Ben", 0.0), ("Cal", 0.5), ("Dee", 0.5, True))
    counts: Counter[str] = Counter()
    rng = random.Random(31)
    for _ in range(2000):
        for cid in choose_speakers(
            "natural", members, [USER], user_input="hello", allow_self_responses=False, rng=rng
        ):
            counts[cid] += 1
    assert counts["ann"] == 2000  # 1.0 >= every roll
    assert counts["ben"] == 0  # 0 talkativeness, and Ann always answers: no fallback
    assert counts["dee"] == 0  # muted
    assert 850 < counts["cal"] < 1150
    # The same seed makes the same choices.
    again = [
        choose_speakers(
            "natural", members, [USER], user_input="x", allow_self_responses=False, rng=r
        )
        for r in (random.Random(7), random.Random(7))
    ]
    assert again[0] == again[1]


def test_list_order_is_every_unmuted_member_in_the_groups_order() -> None:
    members = cast(("Cal", 0.0), ("Ann", 0.0, True), ("Ben", 1.0))
    got = choose_speakers(
        "list", members, [USER], user_input="x", allow_self_responses=False, rng=Script([])
    )
    assert got == ["cal", "ben"]


def test_manual_answers_nothing_to_the_player_and_one_member_when_asked() -> None:
    members = cast(("Ann", 1.0), ("Ben", 1.0, True), ("Cal", 1.0))
    assert (
        choose_speakers(
            "manual", members, [USER], user_input="hi", allow_self_responses=False, rng=Script([])
        )
        == []
    )
    # Shuffle of [Ann, Cal] with 0.0 then 0.0 -> [Cal, Ann]: Cal speaks.
    got = choose_speakers(
        "manual", members, [USER], user_input=None, allow_self_responses=False, rng=Script([0, 0])
    )
    assert got == ["cal"]


def test_pooled_picks_who_has_not_spoken_since_the_player() -> None:
    members = cast(("Ann", 0.5), ("Ben", 0.5), ("Cal", 0.5))
    chat = [said("Cal", "old"), USER, said("Ann", "a"), said("Ben", "b")]
    got = choose_speakers(
        "pooled", members, chat, user_input=None, allow_self_responses=False, rng=Script([0.99])
    )
    assert got == ["cal"]
    # Everybody spoke: anyone but the last speaker (Cal), here floor(0.6 * 2) = 1 -> Ben.
    chat.append(said("Cal", "c"))
    got = choose_speakers(
        "pooled", members, chat, user_input=None, allow_self_responses=False, rng=Script([0.6])
    )
    assert got == ["ben"]
    # The player's new message starts a new pool: all three wait; floor(0.5 * 3) = 1 -> Ben.
    got = choose_speakers(
        "pooled", members, chat, user_input="next", allow_self_responses=False, rng=Script([0.5])
    )
    assert got == ["ben"]


def test_pooled_with_a_seeded_source_gives_everyone_a_turn() -> None:
    members = cast(("Ann", 0.5), ("Ben", 0.5), ("Cal", 0.5), ("Dee", 0.5))
    rng = random.Random(5)
    chat = [USER]
    for _ in range(4):
        (cid,) = choose_speakers(
            "pooled", members, chat, user_input=None, allow_self_responses=False, rng=rng
        )
        chat.append(ChatLine(text="...", character_id=cid, name=cid))
    assert sorted(line.character_id or "" for line in chat[1:]) == ["ann", "ben", "cal", "dee"]


def test_swipe_keeps_the_speaker_of_the_last_message() -> None:
    members = cast(("Ann", 0.5), ("Ben", 0.5))
    chat = [USER, said("Ben", "b")]
    assert swipe_speaker(members, chat, Script([])) == "ben"
    assert swipe_speaker(members, [*chat, USER], Script([])) == "ben"
    assert swipe_speaker(members[:1], chat, Script([])) is None  # Ben left the group


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, 0.5), ("0.8", 0.8), (0.25, 0.25), ("", 0.0), ("lots", 0.5), (True, 1.0), ([], 0.5)],
)
def test_talkativeness_reads_as_sillytavern_does(value: object, expected: float) -> None:
    assert talkativeness_of(value) == expected


def test_words_are_ascii_runs() -> None:
    assert words("Влад, Jean-Luc_2!") == ["jean", "luc_2"]
