"""Property tests: odd-but-valid JSON never crashes a parser, and what imports round-trips."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from innkeeper_tavern.pure.formats.card import export_card, parse_card, parse_card_bytes
from innkeeper_tavern.pure.formats.errors import FormatError
from innkeeper_tavern.pure.formats.preset import export_preset, parse_preset, parse_preset_json

T = TypeVar("T")
PROPS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False)
    | st.text(max_size=8)
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)
identifiers = st.sampled_from(["main", "nsfw", "chatHistory", "custom", "x", "", " main "])
prompt_values = st.fixed_dictionaries(
    {"identifier": identifiers | json_values},
    optional={
        "name": json_values,
        "role": st.sampled_from(["system", "user", "assistant", "model"]) | json_values,
        "content": st.text(max_size=10) | json_values,
        "enabled": json_values,
        "marker": json_values,
        "injection_position": json_values,
        "injection_depth": json_values,
        "injection_trigger": json_values,
        "x-unknown": json_values,
    },
)
order_items = st.fixed_dictionaries(
    {"identifier": identifiers, "enabled": st.booleans() | json_values}
)
presets = st.fixed_dictionaries(
    {"prompts": st.lists(prompt_values | json_values, max_size=6)},
    optional={
        "prompt_order": st.lists(
            st.fixed_dictionaries(
                {
                    "character_id": st.sampled_from([100000, 100001, "100001", 100001.0])
                    | json_values,
                    "order": st.lists(order_items | json_values, max_size=6) | json_values,
                }
            )
            | json_values,
            max_size=3,
        )
        | json_values,
        "temperature": json_values,
        "openai_max_tokens": json_values,
        "reasoning_effort": st.sampled_from(["auto", "max", "low"]) | json_values,
        "stop": json_values,
        "seed": json_values,
    },
)
card_fields = st.dictionaries(
    st.sampled_from(
        [
            "name",
            "description",
            "first_mes",
            "tags",
            "alternate_greetings",
            "extensions",
            "character_book",
            "assets",
            "creator_notes",
            "x-extra",
        ]
    ),
    json_values,
    max_size=6,
)
cards = st.one_of(
    st.builds(
        lambda d, s: {"spec": s, "spec_version": "2.0", "data": d},
        card_fields,
        st.sampled_from(["chara_card_v2", "chara_card_v3"]),
    ),
    st.builds(lambda d: {**d, "name": "V1"}, card_fields),
    st.builds(lambda d, top: {**top, "spec": "chara_card_v2", "data": d}, card_fields, card_fields),
)


def attempt(parse: Callable[[Any], T], value: Any) -> tuple[T | None, FormatError | None]:
    """Run ``parse``; a FormatError is an expected outcome, anything else fails the test."""
    try:
        return parse(value), None
    except FormatError as exc:
        return None, exc


def comparable_preset(raw: Any) -> Any:
    preset = parse_preset(raw)
    return msgspec.to_builtins((preset.name, preset.prompts, preset.sampling))


@PROPS
@given(presets)
def test_presets_parse_or_fail_cleanly_and_round_trip(raw: dict[str, Any]) -> None:
    preset, error = attempt(parse_preset, raw)
    if preset is None:
        assert error is not None
        assert error.status in (400, 413)
        return
    assert comparable_preset(export_preset(preset)) == msgspec.to_builtins(
        (preset.name, preset.prompts, preset.sampling)
    )


@PROPS
@given(cards)
def test_cards_parse_or_fail_cleanly_and_round_trip(raw: dict[str, Any]) -> None:
    card, error = attempt(parse_card, raw)
    if card is None:
        assert error is not None
        assert error.code == "CHARACTER_CARD_INVALID"
        return
    assert export_card(card) == raw  # unedited: the original exactly
    assert parse_card(export_card(card)).data == card.data


@PROPS
@given(st.binary(max_size=512))
def test_arbitrary_bytes_never_escape_as_other_errors(data: bytes) -> None:
    for parse in (parse_card_bytes, parse_preset_json):
        _, error = attempt(parse, data)
        assert error is None or error.status in (400, 413)
