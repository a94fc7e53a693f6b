"""Template model: strict explicit selections, names, and the portable Tavern JSON envelope."""

from __future__ import annotations

from typing import Any

import pytest

from innkeeper_tavern.state.session_bindings.model import CharacterOptions, RpState, Selection
from innkeeper_tavern.state.session_templates.errors import (
    INVALID_SESSION_TEMPLATE_REQUEST,
    TemplateError,
)
from innkeeper_tavern.state.session_templates.model import (
    Template,
    check_template_name,
    export_document,
    parse_envelope,
    parse_explicit_selection,
    selection_to_wire,
)

BLANK_WIRE: dict[str, Any] = {
    "presetId": None,
    "characterCardId": None,
    "userId": None,
    "worldBookIds": [],
    "character": {},
    "rp": {"active": False, "source": None, "followSuppressed": False, "sandboxBefore": None},
}


def full_selection() -> dict[str, Any]:
    return {
        "presetId": "preset-1",
        "characterCardId": "character-1",
        "userId": "user-1",
        "worldBookIds": ["world-book-b", "world-book-a"],
        "character": {
            "greetingIndex": 2,
            "preferCharacterSystemPrompt": False,
            "preferCharacterPostHistory": True,
        },
        "rp": {
            "active": True,
            "source": "command",
            "followSuppressed": True,
            "sandboxBefore": "workspace-write",
        },
    }


def test_omitted_fields_are_blank_and_the_wire_shape_is_the_spec_example() -> None:
    assert parse_explicit_selection({}) == Selection()
    assert selection_to_wire(parse_explicit_selection({})) == BLANK_WIRE


def test_full_selection_round_trips_in_order() -> None:
    selection = parse_explicit_selection(full_selection())
    assert selection.world_book_ids == ("world-book-b", "world-book-a")
    assert selection.character == CharacterOptions(
        greeting_index=2, prefer_character_system_prompt=False, prefer_character_post_history=True
    )
    assert selection.rp == RpState(
        active=True, source="command", follow_suppressed=True, sandbox_before="workspace-write"
    )
    assert selection_to_wire(selection) == full_selection()


@pytest.mark.parametrize(
    "patch",
    [
        {"extra": 1},
        {"id": "x"},
        {"character": {"greetingIndex": 0, "nickname": "x"}},
        {"rp": {"active": True, "locked": True}},
        {"presetId": ""},
        {"presetId": 5},
        {"userId": "x" * 201},
        {"characterCardId": "bad\nid"},
        {"worldBookIds": "world-book-a"},
        {"worldBookIds": ["a", "a"]},
        {"worldBookIds": [f"b{i}" for i in range(101)]},
        {"worldBookIds": [None]},
        {"character": {"greetingIndex": -1}},
        {"character": {"greetingIndex": True}},
        {"character": {"greetingIndex": None}},
        {"character": {"greetingIndex": 2**53}},
        {"character": {"greetingIndex": 1.5}},
        {"character": {"preferCharacterSystemPrompt": 1}},
        {"character": []},
        {"rp": {"active": None}},
        {"rp": {"source": "ui"}},
        {"rp": {"sandboxBefore": "root"}},
        {"rp": None},
    ],
)
def test_invalid_explicit_selections_are_rejected_not_dropped(patch: dict[str, Any]) -> None:
    with pytest.raises(TemplateError) as info:
        parse_explicit_selection(patch)
    assert info.value.status == 400
    assert info.value.code == INVALID_SESSION_TEMPLATE_REQUEST


def test_selection_must_be_an_object() -> None:
    values: tuple[Any, ...] = (None, [], "x", 1)
    for value in values:
        with pytest.raises(TemplateError):
            parse_explicit_selection(value)


def test_integral_float_greeting_index_is_the_same_json_number() -> None:
    # `docs/resources.md#original-decisions`: JavaScript does not tell 1 from 1.0.
    selection = parse_explicit_selection({"character": {"greetingIndex": 1.0}})
    assert selection.character.greeting_index == 1


def test_names_are_trimmed_and_bounded() -> None:
    assert check_template_name("  Evening  ") == "Evening"
    assert check_template_name("x" * 120) == "x" * 120
    assert check_template_name("😀" * 60) == "😀" * 60  # 120 UTF-16 units
    family = "\U0001f468\u200d\U0001f469\u200d\U0001f467"  # a ZWJ emoji sequence
    assert check_template_name(f"{family} night") == f"{family} night"
    for bad in ("", "   ", "x" * 121, "😀" * 61, "a\nb", None, 3):
        with pytest.raises(TemplateError):
            check_template_name(bad)


def template(selection: Selection) -> Template:
    return Template(
        id="session-template-1",
        name="Evening",
        selection=selection,
        created_at="2026-01-01T00:00:00.000Z",
        updated_at="2026-01-01T00:00:00.000Z",
    )


def test_export_is_name_and_selection_only_and_imports_back() -> None:
    selection = parse_explicit_selection(full_selection())
    document = export_document(template(selection))
    assert document == {
        "format": "pmp-dsh-tavern",
        "version": 1,
        "resourceType": "session-template",
        "data": {"name": "Evening", "selection": full_selection()},
    }
    assert parse_envelope(document) == ("Evening", selection)


def envelope(**data: Any) -> dict[str, Any]:
    return {
        "format": "pmp-dsh-tavern",
        "version": 1,
        "resourceType": "session-template",
        "data": data,
    }


@pytest.mark.parametrize(
    "document",
    [
        None,
        [],
        {**envelope(name="x"), "format": "sillytavern"},
        {**envelope(name="x"), "version": 2},
        {**envelope(name="x"), "version": True},
        {**envelope(name="x"), "resourceType": "user"},
        {**envelope(name="x"), "id": "session-template-1"},
        {**envelope(name="x"), "data": None},
        envelope(name="x", id="session-template-1"),
        envelope(name="x", createdAt="2026-01-01T00:00:00Z"),
        envelope(selection={}),
        envelope(name=""),
        envelope(name="x", selection={"presetId": "p", "history": []}),
    ],
)
def test_bad_envelopes_are_400(document: Any) -> None:
    with pytest.raises(TemplateError) as info:
        parse_envelope(document)
    assert info.value.status == 400


def test_envelope_without_selection_is_blank() -> None:
    assert parse_envelope(envelope(name="Blank")) == ("Blank", Selection())
