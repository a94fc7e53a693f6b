"""The macro engine: ST's macro set and values, nesting, variables, bounds.

The rules: `docs/worldbook.md#macros`.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from innkeeper_tavern.pure.formats import macros
from innkeeper_tavern.pure.formats.macros import (
    MAX_MACRO_OUTPUT_CHARS,
    MAX_VARIABLE_CHARS,
    MacroEnv,
    MacroSession,
    SeedRandom,
    expand_macros,
    js_string_hash,
)

NOW = datetime(2026, 11, 30, 15, 5, 9, tzinfo=UTC)
ENV = MacroEnv(
    char="Seraphina",
    user="Bob",
    persona="{{user}} is a traveller.",
    description="{{char}} guards the forest.",
    personality="kind",
    scenario="{{user}} wakes up in {{char}}'s glade.",
    mes_examples="<START>\n{{user}}: hi\n{{char}}: hello",
    last_message="last",
    last_user_message="from user",
    last_char_message="from char",
    chat_id="chat-1",
    now=NOW,
)


def expand(text: str, **kw: object) -> str:
    return MacroSession(ENV, rng=random.Random(1)).expand(text, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{{char}} and {{user}}", "Seraphina and Bob"),
        ("{{CHAR}} / {{ User }}", "Seraphina / Bob"),
        ("<USER> meets <BOT> and <char>", "Bob meets Seraphina and Seraphina"),
        ("{{persona}}", "Bob is a traveller."),
        ("{{description}}", "Seraphina guards the forest."),
        ("{{personality}}|{{scenario}}", "kind|Bob wakes up in Seraphina's glade."),
        ("{{mesExamples}}", "<START>\nBob: hi\nSeraphina: hello"),
        ("{{group}}", "Seraphina"),
        ("{{lastMessage}}/{{lastUserMessage}}/{{lastCharMessage}}", "last/from user/from char"),
        ("a{{newline}}b", "a\nb"),
        ("keep\n\n{{trim}}\n\ngoing", "keepgoing"),
        ("x{{// a comment\nover lines }}y", "xy"),
        ("x{{noop}}y", "xy"),
        ("{{unknownMacro}} stays", "{{unknownMacro}} stays"),
        ("{{unknown::{{char}}}}", "{{unknown::Seraphina}}"),
        ("{{{user}}}", "{Bob}"),
        ("unclosed {{user", "unclosed {{user"),
        ("stray }} closer", "stray }} closer"),
        (r"\{\{user\}\}", "{{user}}"),
        ("{{time}} {{date}} {{weekday}}", "3:05 PM November 30, 2026 Monday"),
        ("{{isotime}} {{isodate}}", "15:05 2026-11-30"),
        ("{{datetimeformat YYYY-MM-DD [at] HH:mm:ss}}", "2026-11-30 at 15:05:09"),
        ("{{time_UTC+2}} {{time_UTC-10}}", "5:05 PM 5:05 AM"),
        ("{{reverse:abc}}", "cba"),
    ],
)
def test_values(text: str, expected: str) -> None:
    assert expand(text) == expected


def test_char_is_the_card_name_everywhere() -> None:
    # The original implementation rendered {{char}} empty in some paths; we never do.
    assert expand_macros("Hi {{char}}", MacroEnv(char="Aqua")) == "Hi Aqua"
    assert expand_macros("{{char}}", MacroEnv()) == ""


def test_original_is_substituted_once() -> None:
    session = MacroSession(ENV)
    assert session.expand("{{original}} + {{original}}", original="MAIN") == "MAIN + "
    assert session.expand("{{original}}") == ""


def test_variables_are_scoped_and_persist_in_the_session() -> None:
    session = MacroSession(ENV, local_variables={"hp": 10}, global_variables={"g": "x"})
    assert session.expand("{{getvar::hp}}") == "10"
    assert session.expand("{{setvar::mood::happy}}{{getvar::mood}}") == "happy"
    assert session.expand("{{addvar::hp::5}}{{getvar::hp}}") == "15"
    assert session.expand("{{incvar::hp}} {{decvar::hp}} {{decvar::new}}") == "16 15 -1"
    # Arguments are trimmed (Macros 2.0), so a separator goes inside the value.
    assert session.expand("{{addvar::mood::, calm}}{{getvar::mood}}") == "happy, calm"
    assert session.expand("{{setvar::list::[1]}}{{addvar::list::2}}{{getvar::list}}") == "[1,2]"
    assert session.expand("{{getvar::{{char}}_trust}}") == ""
    assert session.expand("{{setvar::{{char}}_trust::3}}{{getvar::Seraphina_trust}}") == "3"
    assert session.expand("{{getglobalvar::g}}{{setglobalvar::g::y}}{{getvar::g}}") == "x"
    assert session.expand("{{hasvar::hp}} {{hasvar::nope}}") == "true false"
    assert session.local_variables["hp"] == 15
    assert session.global_variables == {"g": "y"}


def test_random_roll_and_pick() -> None:
    seen = {
        MacroSession(ENV, rng=random.Random(s)).expand("{{random::a::b::c}}") for s in range(50)
    }
    assert seen == {"a", "b", "c"}
    assert expand("{{random:x, y\\, z}}") in {"x", "y, z"}
    for s in range(30):
        total = int(MacroSession(ENV, rng=random.Random(s)).expand("{{roll 2d6+3}}"))
        assert 5 <= total <= 15
        assert 1 <= int(MacroSession(ENV, rng=random.Random(s)).expand("{{roll:20}}")) <= 20
    assert expand("{{roll:abc}}") == ""
    assert expand("{{roll 100000d6}}") == ""
    # {{pick}} is stable for the same chat and text, whatever the RNG.
    picks = {
        MacroSession(ENV, rng=random.Random(s)).expand("{{pick::a::b::c::d::e}}") for s in range(20)
    }
    assert len(picks) == 1
    other_chat = MacroEnv(chat_id="chat-2", now=NOW)
    spread = {
        MacroSession(MacroEnv(chat_id=f"c{i}")).expand("{{pick::a::b::c::d::e}}") for i in range(40)
    }
    assert len(spread) > 1
    assert MacroSession(other_chat).expand("{{pick::only}}") == "only"


def test_extension_macros() -> None:
    env = MacroEnv(extra={"outlet": lambda args: f"<outlet {args[0]}>", "suggest": "S"})
    session = MacroSession(env)
    assert session.expand("{{outlet::Weather}} {{suggest}}") == "<outlet Weather> S"


def test_expansion_is_bounded() -> None:
    session = MacroSession(ENV)
    # Doubling a variable 40 times would need 2**40 characters; the value cap refuses it.
    text = "{{setvar::x::ab}}" + "{{setvar::x::{{getvar::x}}{{getvar::x}}}}" * 40 + "{{getvar::x}}"
    out = session.expand(text)
    assert len(out) <= MAX_VARIABLE_CHARS
    assert session.limited > 0
    # Self-referencing fields stop at the field depth.
    loop = MacroEnv(description="<{{description}}>")
    assert MacroSession(loop).expand("{{description}}").count("<") <= 4
    # Deep nesting stays literal past the nesting bound and never raises.
    deep = "{{" * 200 + "user" + "}}" * 200
    assert len(MacroSession(ENV).expand(deep)) < 1000
    big = MacroEnv(description="d" * (MAX_MACRO_OUTPUT_CHARS // 4))
    many = MacroSession(big).expand("{{description}}" * 8)
    assert len(many) <= MAX_MACRO_OUTPUT_CHARS + 8 * len("{{description}}")


def test_a_template_expands_the_same_every_time_it_is_seen_again() -> None:
    """Parsed templates are kept by text: state still comes from each session."""
    text = "{{setvar::n::{{char}}}}{{getvar::n}} {{if .n}}yes{{else}}no{{/if}} {{roll::1}}"
    first = MacroSession(ENV, local_variables={}).expand(text)
    parsed = macros._parse_tree.cache_info().misses
    other = MacroSession(MacroEnv(char="Bram", user="Ada")).expand(text)
    assert MacroSession(ENV).expand(text) == first
    assert macros._parse_tree.cache_info().misses == parsed  # not parsed again
    assert other.startswith("Bram yes")
    # The nesting bound is counted in every session that meets it, cached or not.
    deep = "{{x " * 40 + "}}" * 40
    for _ in range(2):
        session = MacroSession(ENV)
        session.expand(deep)
        assert session.limited > 0


_PIECES = ["{{", "}}", "::", ":", "user", "char", "setvar", "getvar", "x", " ", "\n", "trim", "//"]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=40).map("".join))
def test_arbitrary_input_never_raises(text: str) -> None:
    first = MacroSession(ENV, rng=random.Random(3)).expand(text)
    second = MacroSession(ENV, rng=random.Random(3)).expand(text)
    assert first == second
    assert len(first) <= len(text) * 40 + 1000


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{{if description}}has desc{{else}}none{{/if}}", "has desc"),
        ("{{if model}}has model{{else}}no model{{/if}}", "no model"),
        ("{{if !model}}yes{{/if}}", "yes"),
        ("{{if .mood}}mood: {{getvar::mood}}{{/if}}", "mood: calm"),
        ("{{if .missing}}x{{/if}}end", "end"),
        ("{{if $flag}}on{{else}}off{{/if}}", "off"),
        ("{{if {{getvar::mood}}}}\n    indented\n{{/if}}", "indented"),
        ("{{if 0}}a{{else}}{{if 1}}b{{else}}c{{/if}}{{/if}}", "b"),
        ("{{if yes}}{{if no}}x{{else}}y{{/if}}{{/if}}", "y"),
        ("{{else}} and {{/if}} alone", "{{else}} and {{/if}} alone"),
        ("{{if 1}}never closed", "{{if 1}}never closed"),
    ],
)
def test_if_blocks(text: str, expected: str) -> None:
    session = MacroSession(ENV, local_variables={"mood": "calm"}, global_variables={"flag": "off"})
    assert session.expand(text) == expected


def test_only_the_chosen_branch_and_no_comment_runs() -> None:
    session = MacroSession(ENV)
    session.expand(
        "{{if 0}}{{setvar::a::1}}{{else}}{{setvar::b::2}}{{/if}}{{// {{setvar::c::3}} }}"
    )
    assert session.local_variables == {"b": "2"}


def test_hash_and_seedrandom_match_javascript() -> None:
    # Reference values computed with ST's getStringHash and seedrandom 3.0.5 under Node.
    assert js_string_hash("") == 3338908027751811
    assert js_string_hash("abc") == 5059922895146125
    assert js_string_hash("港口😀") == 3980339118184001
    rng = SeedRandom("hello")
    assert [rng(), rng(), rng()] == [0.5463663768140734, 0.4397379377059223, 0.554769432473455]


@pytest.mark.parametrize(
    ("chat_id", "text", "expected"),
    [
        ("chat-1", "{{pick::a::b::c::d::e::f::g}}", "a"),
        ("chat-2", "x {{pick::a::b::c::d::e::f::g}}", "x c"),
        (
            "main",
            "Hi {{pick::a::b::c::d::e::f::g}} and {{pick::a::b::c::d::e::f::g}}",
            "Hi f and a",
        ),
    ],
)
def test_pick_matches_sillytavern(chat_id: str, text: str, expected: str) -> None:
    assert MacroSession(MacroEnv(chat_id=chat_id)).expand(text) == expected
