"""Property tests: arbitrary reply text and arbitrary commands never crash the engine, never
exceed its budgets, and never write outside ``stat_data``."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from innkeeper_tavern.pure.mvu.dsl.engine import (
    compile_declaration,
    descriptor_for,
    initialize_with_schema,
)
from innkeeper_tavern.pure.mvu.engine import UpdateResult, apply_reply, check_variables
from innkeeper_tavern.pure.mvu.initvar import initialize_variables
from innkeeper_tavern.pure.mvu.limits import Budget
from innkeeper_tavern.pure.mvu.native_schema import build_schema
from innkeeper_tavern.pure.mvu.paths import PROTOTYPE_KEYS

PROPERTY_SETTINGS = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

BASE = initialize_variables(
    {
        "$meta": {"extensible": True},
        "hp": [100, "health"],
        "gold": 10,
        "name": "Ada",
        "inv": ["sword", "$__META_EXTENSIBLE__$"],
        "npcs": {"$meta": {"recursiveExtensible": True}, "bob": {"mood": "calm", "tags": []}},
        "fixed": {"a": 1, "b": [1, 2]},
        "when": "2024-01-01T00:00:00.000Z",
    }
)
BASE["initialized_lorebooks"] = {"book": []}
BASE["custom_key"] = {"kept": True}

FRAGMENTS = [
    "_.set(",
    "_.add(",
    "_.insert(",
    "_.assign(",
    "_.remove(",
    "_.unset(",
    "_.delete(",
    ");",
    ")",
    ";",
    "//",
    "'",
    '"',
    "`",
    "\\",
    "(",
    "[",
    "]",
    "{",
    "}",
    ",",
    "<JSONPatch>",
    "</JSONPatch>",
    "<json_patch>",
    "</json_patch>",
    "<UpdateVariable>",
    "</UpdateVariable>",
    "hp",
    "gold",
    "inv",
    "npcs.bob",
    "__proto__",
    "constructor",
    "length",
    "1",
    "-",
    "1e308",
    "NaN",
    "\n",
    " ",
    '{"op":"replace","path":"/gold","value":1}',
    '[{"op":"add","path":"/inv/-","value":"x"}]',
]

PATHS = [
    "''",
    "'hp'",
    "'hp[0]'",
    "'gold'",
    "'name'",
    "'inv'",
    "'inv[0]'",
    "'inv.length'",
    "'npcs'",
    "'npcs.bob'",
    "'npcs.bob.tags'",
    "'npcs.bob.mood'",
    "'npcs.new'",
    "'fixed'",
    "'fixed.a'",
    "'fixed.b[1]'",
    "'missing.deep.path'",
    "'__proto__'",
    "'npcs.constructor'",
    "'when'",
    '`npcs["bob"]`',
]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(
            st.sampled_from(["a", "b", "$meta", "__proto__", "k"]), children, max_size=3
        )
    ),
    max_leaves=8,
)
literal_values = st.one_of(
    json_values.map(lambda v: json.dumps(v, ensure_ascii=False)),
    st.sampled_from(
        ["1 + 2", "sqrt(16)", "09:15", "'quoted'", "a: 1", "- x", "1/0", "-5", "'-'", "0", "'0'"]
    ),
)


@st.composite
def command(draw: st.DrawFn) -> str:
    verb = draw(st.sampled_from(["set", "add", "insert", "assign", "remove", "unset", "delete"]))
    args = [draw(st.sampled_from(PATHS))]
    args += draw(st.lists(literal_values, min_size=0, max_size=3))
    reason = draw(st.sampled_from(["", "//why", " // because"]))
    return f"_.{verb}({', '.join(args)});{reason}"


@st.composite
def patch_block(draw: st.DrawFn) -> str:
    ops = []
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["replace", "delta", "add", "insert", "remove", "move", "copy"]))
        pointer = draw(
            st.sampled_from(
                [
                    *("/gold", "/hp/0", "/inv/-", "/inv/0", "/npcs/bob/tags/-", "/npcs/x", ""),
                    *("/a~1b", "/__proto__/x", "/inv/length", "/fixed/b/5"),
                ]
            )
        )
        entry: dict[str, Any] = {"op": op, "path": pointer}
        if op == "move":
            entry["from"] = draw(st.sampled_from(["/gold", "/inv/0", "/npcs/bob", "/nope"]))
        else:
            entry["value"] = draw(json_values)
        ops.append(entry)
    return f"<JSONPatch>{json.dumps(ops, ensure_ascii=False)}</JSONPatch>"


def assert_sound(before: dict[str, Any], snapshot: dict[str, Any], result: UpdateResult) -> None:
    assert before == snapshot, "the input was mutated"
    if result.fatal is not None:
        assert result.variables == before
        assert not result.modified
        return
    out = result.variables
    # Nothing outside stat_data/schema/delta_data changes.
    assert set(out) == set(before) | {"delta_data"}
    assert out["initialized_lorebooks"] == before["initialized_lorebooks"]
    assert out["custom_key"] == before["custom_key"]
    assert isinstance(out["stat_data"], dict)
    assert result.state_bytes == check_variables(out)
    stack: list[Any] = [out["stat_data"]]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            assert not PROTOTYPE_KEYS & set(node), "a prototype-style key was written"
            assert "$meta" not in node
            stack.extend(node.values())
        elif isinstance(node, list):
            assert "$__META_EXTENSIBLE__$" not in node
            stack.extend(node)
    # The incrementally maintained schema is what a full regeneration gives.
    assert build_schema(out["stat_data"], out["schema"]) == out["schema"]
    json.dumps(out, allow_nan=False)


@PROPERTY_SETTINGS
@given(st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=12)), max_size=40))
def test_arbitrary_reply_text(parts: list[str]) -> None:
    before = copy.deepcopy(BASE)
    snapshot = copy.deepcopy(before)
    result = apply_reply(before, "".join(parts))
    assert_sound(before, snapshot, result)


@PROPERTY_SETTINGS
@given(st.lists(st.one_of(command(), patch_block()), min_size=1, max_size=12))
def test_arbitrary_commands(commands: list[str]) -> None:
    before = copy.deepcopy(BASE)
    snapshot = copy.deepcopy(before)
    result = apply_reply(before, "\n".join(commands))
    assert_sound(before, snapshot, result)
    if result.fatal is None:
        assert len(result.diagnostics) + len(result.changes) >= 1 or not result.commands


DSL_SOURCE = (
    "import { registerMvuSchema } from "
    "'https://testingcf.jsdelivr.net/gh/StageDog/tavern_resource/dist/util/mvu_zod.js';\n"
    "registerMvuSchema(z.object({\n"
    "  hp: z.coerce.number().transform(v => _.clamp(v, 0, 100)).prefault(100),\n"
    "  gold: z.number().int().min(0).prefault(10),\n"
    "  name: z.string().regex(/^[A-Za-z]{1,8}$/).prefault('Ada'),\n"
    "  inv: z.array(z.string()).max(5).prefault([]),\n"
    "  npcs: z.record(z.string(), z.object({ mood: z.enum(['calm', 'grim']).prefault('calm'),"
    " tags: z.array(z.string()).prefault([]) })).prefault({}),\n"
    "  fixed: z.object({ a: z.number().prefault(1), b: z.array(z.number()).prefault([1, 2]) })"
    ".prefault({}),\n"
    "  when: z.string().prefault('2024-01-01T00:00:00.000Z'),\n"
    "}));\n"
)
DSL_BASE = initialize_with_schema({"npcs": {"bob": {}}}, descriptor_for(DSL_SOURCE))
DSL_BASE["initialized_lorebooks"] = {"book": []}
DSL_BASE["custom_key"] = {"kept": True}


@PROPERTY_SETTINGS
@given(st.lists(st.one_of(command(), patch_block()), min_size=1, max_size=8))
def test_arbitrary_commands_under_a_schema(commands: list[str]) -> None:
    before = copy.deepcopy(DSL_BASE)
    snapshot = copy.deepcopy(before)
    result = apply_reply(before, "\n".join(commands))
    assert before == snapshot, "the input was mutated"
    if result.fatal is not None:
        assert result.variables == before
        return
    out = result.variables
    assert set(out) == set(before) | {"delta_data"}
    assert out["custom_key"] == before["custom_key"]
    assert out["mvu_schema"] == before["mvu_schema"]
    assert result.state_bytes == check_variables(out)
    # Every committed state still validates against the declared schema.
    compiled = compile_declaration(DSL_SOURCE)
    _parsed, issues = compiled.validate(out["stat_data"], Budget())
    assert not issues, issues
    assert 0 <= out["stat_data"]["hp"] <= 100
    json.dumps(out, allow_nan=False)
