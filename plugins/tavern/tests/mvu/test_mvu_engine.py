"""Behaviour of the pure MVU engine that card authors and the state service rely on."""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import pytest

from innkeeper_tavern.pure.mvu.engine import apply_commands, apply_reply, check_variables
from innkeeper_tavern.pure.mvu.extract import extract_commands
from innkeeper_tavern.pure.mvu.initvar import InitEntry, initialize_variables, load_initvar
from innkeeper_tavern.pure.mvu.limits import (
    MAX_COMMANDS_PER_REPLY,
    MAX_STATE_BYTES,
    Budget,
    MvuBudgetError,
    MvuSyntaxError,
)
from innkeeper_tavern.pure.mvu.native_schema import build_schema
from innkeeper_tavern.pure.mvu.textparse import ParseError, parse_yaml
from innkeeper_tavern.pure.mvu.values import parse_command_value


def variables(data: dict[str, Any]) -> dict[str, Any]:
    return initialize_variables(data)


def world() -> dict[str, Any]:
    return variables(
        {
            "$meta": {"extensible": True},
            "hp": [100, "health"],
            "gold": 10,
            "inv": ["sword", "$__META_EXTENSIBLE__$"],
            "npcs": {
                "$meta": {"extensible": True},
                "alice": {"mood": "calm", "likes": ["tea"]},
                "bob": {"mood": "grim", "likes": ["ale"]},
            },
            "when": "2024-01-01T00:00:00.000Z",
        }
    )


def test_reply_updates_state_and_leaves_input_untouched() -> None:
    before = world()
    snapshot = copy.deepcopy(before)
    result = apply_reply(
        before,
        "She smiles.\n<UpdateVariable>\n_.set('hp', 100, 80);//hit\n_.add('gold', 5);\n"
        "_.insert('inv', 'shield');\n_.remove('npcs.bob');\n</UpdateVariable>",
    )
    assert result.committed and result.modified
    stat = result.variables["stat_data"]
    assert stat["hp"] == [80, "health"]
    assert stat["gold"] == 15
    assert stat["inv"] == ["sword", "shield"]
    assert "bob" not in stat["npcs"]
    assert before == snapshot, "the input variables must never be mutated"
    assert [c.pointer for c in result.changes] == ["/hp/0", "/gold", "/inv/1", "/npcs/bob"]


def test_untouched_subtrees_are_shared_not_copied() -> None:
    before = world()
    result = apply_reply(before, "_.set('npcs.alice.mood', 'happy');")
    after = result.variables["stat_data"]
    assert after["npcs"]["alice"]["mood"] == "happy"
    # Only the path to the write was copied: siblings are the very same objects.
    assert after["npcs"]["bob"] is before["stat_data"]["npcs"]["bob"]
    assert after["inv"] is before["stat_data"]["inv"]
    assert after["npcs"] is not before["stat_data"]["npcs"]


def test_incremental_schema_equals_full_rebuild() -> None:
    before = world()
    result = apply_reply(
        before,
        '_.insert(\'npcs\', \'carol\', {"mood": "shy", "tags": ["$__META_EXTENSIBLE__$"]});\n'
        "_.insert('npcs.carol.tags', 'new');\n_.set('gold', true);",
    )
    assert result.committed
    schema = result.variables["schema"]
    assert schema["properties"]["gold"] == {"type": "boolean", "required": False}
    carol = schema["properties"]["npcs"]["properties"]["carol"]
    assert carol["properties"]["tags"]["extensible"] is True  # from the marker in the insert
    # Reusing untouched nodes gives the same schema as regenerating everything.
    assert build_schema(result.variables["stat_data"], schema) == schema


def test_rejections_are_diagnostics_and_later_commands_still_run() -> None:
    result = apply_reply(world(), "_.set('nope', 1);\n_.add('gold', 'x');\n_.add('gold', 1);")
    assert result.committed
    assert result.variables["stat_data"]["gold"] == 11
    assert [d.code for d in result.diagnostics] == ["MVU_PATH_NOT_FOUND", "MVU_NOT_A_NUMBER"]
    assert [d.command for d in result.diagnostics] == [0, 1]


def test_syntax_error_in_json_patch_commits_nothing() -> None:
    before = world()
    result = apply_reply(before, '_.set(\'gold\', 99);\n<JSONPatch>[{"op": "replace",</JSONPatch>')
    assert result.fatal is not None and result.fatal.code == "MVU_SYNTAX"
    assert not result.committed and not result.modified
    assert result.variables["stat_data"]["gold"] == 10


def test_state_budget_is_fatal_and_commits_nothing() -> None:
    before = world()
    big = "字" * (MAX_STATE_BYTES // 8)  # 0.75 MiB of UTF-8 in a quarter of the characters
    text = "".join(f"_.insert('npcs', 'n{i}', '{big}');\n" for i in range(3))
    result = apply_reply(before, "_.set('gold', 1);\n" + text)
    assert result.fatal is not None and result.fatal.code == "MVU_STATE_TOO_LARGE"
    assert result.variables["stat_data"]["gold"] == 10


def test_command_count_budget_is_fatal() -> None:
    text = "_.add('gold', 1);" * (MAX_COMMANDS_PER_REPLY + 1)
    result = apply_reply(world(), text)
    assert result.fatal is not None and result.fatal.code == "MVU_BUDGET_EXCEEDED"
    assert result.variables["stat_data"]["gold"] == 10


def test_computation_budget_is_fatal() -> None:
    result = apply_commands(
        world(), extract_commands("_.add('gold', 1 + 2 + 3);" * 50), budget=Budget(200)
    )
    assert result.fatal is not None and result.fatal.code == "MVU_BUDGET_EXCEEDED"


@pytest.mark.parametrize(
    "command",
    [
        "_.set('__proto__.polluted', 1);",
        "_.set('npcs.constructor', 1);",
        "_.insert('npcs', '__proto__', {\"x\": 1});",
        "_.insert('', 'prototype', 1);",
        '_.insert(\'npcs\', {"__proto__": {"x": 1}});',
        "_.remove('npcs', 'constructor');",
        '<JSONPatch>[{"op": "add", "path": "/npcs/__proto__", "value": 1}]</JSONPatch>',
        '<JSONPatch>[{"op": "move", "from": "/gold", "path": "/constructor"}]</JSONPatch>',
    ],
)
def test_prototype_style_keys_are_rejected(command: str) -> None:
    result = apply_reply(world(), command)
    assert result.committed and not result.modified
    assert [d.code for d in result.diagnostics] == ["MVU_UNSAFE_PATH"]


@pytest.mark.parametrize(
    "command",
    [
        "_.set('inv.length', 0);",
        "_.set('inv[length]', 0);",
        "_.insert('inv', 'length', 0);",
        '<JSONPatch>[{"op": "replace", "path": "/inv/length", "value": 0}]</JSONPatch>',
        "_.insert('inv', '01', 'x');",
    ],
)
def test_array_length_and_non_index_keys_are_never_written(command: str) -> None:
    result = apply_reply(world(), command)
    assert result.committed and not result.modified
    assert result.variables["stat_data"]["inv"] == ["sword"]
    assert len(result.diagnostics) == 1


def test_non_finite_numbers_are_rejected() -> None:
    result = apply_reply(
        world(), "_.set('gold', 1/0);\n_.set('hp', 'abc');\n_.add('gold', 1e308*10);"
    )
    assert not result.modified
    assert [d.code for d in result.diagnostics] == [
        "MVU_NOT_FINITE",
        "MVU_NOT_A_NUMBER",
        "MVU_NOT_A_NUMBER",
    ]


def test_json_patch_pointers_and_move() -> None:
    before = variables(
        {"$meta": {"extensible": True}, "a/b": 1, "list": [1, 2, 3, "$__META_EXTENSIBLE__$"]}
    )
    patch = [
        {"op": "replace", "path": "/a~1b", "value": 2},
        {"op": "move", "from": "/list/0", "path": "/list/-"},
        {"op": "add", "path": "/list/0", "value": 9},
        {"op": "delta", "path": "/a~1b", "value": 0.5},
        {"op": "copy", "from": "/list", "path": "/copy"},
    ]
    result = apply_reply(before, f"<json_patch>{json.dumps(patch)}</json_patch>")
    assert result.variables["stat_data"] == {"a/b": 2.5, "list": [9, 2, 3, 1]}
    assert [d.code for d in result.diagnostics] == ["MVU_PATCH_OP_IGNORED"]


def test_add_on_iso_dates_is_deterministic() -> None:
    result = apply_reply(world(), "_.add('when', 90 * 60 * 1000);")
    assert result.variables["stat_data"]["when"] == "2024-01-01T01:30:00.000Z"


def test_values_are_never_evaluated_as_code() -> None:
    budget = Budget()
    assert parse_command_value("__import__('os').system('x')", budget) == (
        "__import__('os').system('x')"
    )
    assert parse_command_value("[1+1, 'a' + 'b']", budget) == [2, "ab"]
    assert parse_command_value("Math.floor(10 / 3) + max(1, 2)", budget) == 5
    assert parse_command_value("(" * 500 + "1" + ")" * 500, budget) == "(" * 500 + "1" + ")" * 500
    assert parse_command_value("9^9^9^9", budget) == math.inf  # as mathjs; set rejects it


def test_yaml_tags_anchors_and_aliases_are_rejected() -> None:
    for text in ["a: !!python/object:os.system x", "a: &x 1\nb: *x", "a: !tag v"]:
        with pytest.raises(ParseError):
            parse_yaml(text, Budget())
    assert parse_yaml("t: 09:00\nd: 2024-01-01\nb: yes\nn: 0o17", Budget()) == {
        "t": "09:00",
        "d": "2024-01-01",
        "b": "yes",
        "n": 15,
    }


def test_initvar_entries_merge_in_order_and_bad_entries_fail() -> None:
    result = load_initvar(
        [
            (
                "book",
                [
                    InitEntry("[InitVar] base", "hp: [100, 生命]\nbag:\n  - a\n  - b"),
                    InitEntry("notes", "ignored: 1"),
                    InitEntry("[initvar] more", '```json\n{"bag": ["c"], "mp": 5}\n```'),
                ],
            )
        ]
    )
    assert result.stat_data == {"hp": [100, "生命"], "bag": ["c"], "mp": 5}
    with pytest.raises(MvuSyntaxError):
        load_initvar([("book", [InitEntry("[initvar]", "a: &x 1\nb: *x")])])


def test_initialize_copies_root_switches_and_strips_metadata() -> None:
    v = initialize_variables(
        {"$meta": {"strictSet": True}, "hp": [1, "d"], "inv": ["$__META_EXTENSIBLE__$"]}
    )
    assert v["stat_data"] == {"hp": [1, "d"], "inv": []}
    assert v["schema"]["strictSet"] is True
    assert v["schema"]["properties"]["inv"]["extensible"] is True
    result = apply_reply(v, "_.set('hp', 5);")
    assert result.variables["stat_data"]["hp"] == 5  # strictSet: no value-with-description magic


def test_check_variables_rejects_oversized_and_deep_state() -> None:
    with pytest.raises(MvuBudgetError):
        check_variables({"stat_data": {"s": "x" * (MAX_STATE_BYTES + 1)}})
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(40):
        node["d"] = {}
        node = node["d"]
    with pytest.raises(MvuBudgetError):
        check_variables({"stat_data": deep})


def test_processor_style_filtering_uses_apply_commands() -> None:
    commands = extract_commands("_.set('gold', 1);\n_.set('hp', 2);")
    kept = [c for c in commands if not c.args[0].startswith("'gold")]
    result = apply_commands(world(), kept)
    assert result.variables["stat_data"]["gold"] == 10
    assert result.variables["stat_data"]["hp"] == [2, "health"]


def test_greeting_opening_is_strict_and_envelope_only() -> None:
    from innkeeper_tavern.pure.mvu.engine import apply_greeting

    greeting = (
        "The bells ring. _.set('gold', 1); is only prose here.\n"
        "<UpdateVariable>\n_.set('hp', 100, 90);\n</UpdateVariable>\n"
        '<JSONPatch>[{"op": "insert", "path": "/inv/-", "value": "map"}]</JSONPatch>'
    )
    result = apply_greeting(world(), greeting)
    assert result.committed
    stat = result.variables["stat_data"]
    assert stat["gold"] == 10 and stat["hp"] == [90, "health"] and stat["inv"] == ["sword", "map"]
    bad = apply_greeting(
        world(), "<UpdateVariable>_.set('hp', 1);_.set('nope', 2);</UpdateVariable>"
    )
    assert bad.fatal is not None and bad.fatal.code == "MVU_OPENING_REJECTED"
    assert bad.variables["stat_data"]["hp"] == [100, "health"]


@pytest.mark.parametrize(
    "text",
    [
        "_.set(" * 200_000,  # unclosed calls: one text-wide pass, not one per call
        "'_.set(" * 200_000,  # calls that start inside quotes: a bounded number of scans
        "\"_.set(a, '" * 100_000,
    ],
)
def test_hostile_command_text_costs_a_bounded_number_of_steps(text: str) -> None:
    result = apply_reply(world(), text)
    assert result.committed and not result.modified
    assert result.steps < 2_000_000  # the meter, not the clock: 20M would be fatal


def test_apostrophes_in_prose_do_not_hide_commands() -> None:
    text = "It's late; she's tired.\n" + "".join(
        f"_.add('gold', {i});//it's {i}\n" for i in range(50)
    )
    result = apply_reply(world(), text)
    assert len(result.commands) == 50
    assert result.variables["stat_data"]["gold"] == 10 + sum(range(50))


def test_json_patch_as_objects_on_separate_lines() -> None:
    ops = "\n".join(
        f'{{"op": "insert", "path": "/npcs/n{i}", "value": {{"mood": "calm"}}}}' for i in range(200)
    )
    result = apply_reply(world(), f"<JSONPatch>\n{ops}\n</JSONPatch>")
    assert result.committed and not result.diagnostics
    assert len(result.variables["stat_data"]["npcs"]) == 202


def test_delta_data_records_changes_at_command_paths() -> None:
    from innkeeper_tavern.pure.mvu.engine import with_display_data

    result = apply_reply(world(), "_.set('hp', 80);//hit\n_.add('gold', 5);")
    assert result.variables["delta_data"] == {"hp": "100->80 (hit)", "gold": "10->15 "}
    assert "display_data" not in result.variables
    view = with_display_data(result.variables)
    assert view["display_data"] == result.variables["stat_data"]
