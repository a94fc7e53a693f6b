"""The schema DSL: declarations are parsed and interpreted, never executed as JavaScript."""

from __future__ import annotations

from typing import Any

import pytest

from innkeeper_tavern.pure.mvu.dsl.engine import (
    MVU_ZOD_IMPORT,
    compile_declaration,
    descriptor_for,
    initialize_with_schema,
)
from innkeeper_tavern.pure.mvu.engine import UpdateResult, apply_reply
from innkeeper_tavern.pure.mvu.limits import MvuFatalError, MvuSyntaxError

HEADER = f"import {{ registerMvuSchema }} from '{MVU_ZOD_IMPORT}';\n"

CARD = (
    HEADER
    + r"""
export const Schema = z.object({
  世界: z.object({
    时间: z.string().prefault('08:00'),
    天气: z.enum(['晴', '雨']).prefault('晴'),
  }).prefault({}),
  角色: z.record(z.string(), z.object({
    好感度: z.coerce.number().transform(v => _.clamp(v, 0, 100)).prefault(0),
    代号: z.string().regex(/^[a-z]{2}\d?$/).optional(),
    物品: z.array(z.string()).max(3).prefault([]),
  }).superRefine((npc, ctx) => {
    if (npc.好感度 > 90 && npc.物品.length === 0) {
      ctx.addIssue({ code: 'custom', path: ['物品'], message: `a friend needs a gift` });
    }
  })).prefault({}),
  金币: z.number().int().min(0).prefault(10),
  _内部: z.string().prefault('x'),
});
$(() => { registerMvuSchema(Schema); });
"""
)


def state(
    source: str = CARD, version: int = 2, data: dict[str, Any] | None = None
) -> dict[str, Any]:
    return initialize_with_schema(data or {}, descriptor_for(source, version))


def run(variables: dict[str, Any], text: str) -> UpdateResult:
    result = apply_reply(variables, text)
    assert result.fatal is None, result.fatal
    return result


def test_initialization_applies_prefaults_and_keeps_unknown_top_level_keys() -> None:
    v = state(data={"legacy": 1})
    assert v["stat_data"] == {
        "legacy": 1,
        "世界": {"时间": "08:00", "天气": "晴"},
        "角色": {},
        "金币": 10,
        "_内部": "x",
    }
    assert v["mvu_schema"]["interpreterVersion"] == 2


def test_transforms_run_on_every_command_and_rejections_keep_state() -> None:
    v = state()
    result = run(
        v,
        "_.set('角色.艾丽.好感度', 150);\n"  # v2 creates the path; clamp to 100; superRefine fails
        '_.insert(\'角色\', \'鲍勃\', {"好感度": "30", "代号": "ab1"});\n'
        "_.set('角色.鲍勃.代号', 'ABC');\n"  # regex rejects
        "_.set('世界.天气', '雪');\n"  # enum rejects
        "_.add('金币', '5');\n"
        "_.set('_内部', 'y');",  # read-only by convention
    )
    stat = result.variables["stat_data"]
    assert "艾丽" not in stat["角色"]
    assert stat["角色"]["鲍勃"] == {"好感度": 30, "代号": "ab1", "物品": []}
    assert stat["世界"]["天气"] == "晴"
    assert stat["金币"] == 15
    assert stat["_内部"] == "x"
    codes = [d.code for d in result.diagnostics]
    assert codes == [
        "MVU_SCHEMA_REJECTED",
        "MVU_SCHEMA_REJECTED",
        "MVU_SCHEMA_REJECTED",
        "MVU_READ_ONLY",
    ]
    assert "a friend needs a gift" in result.diagnostics[0].message


def test_insert_creates_an_object_first_then_an_array() -> None:
    source = HEADER + "registerMvuSchema(z.object({ 列表: z.array(z.string()).optional() }));"
    result = run(state(source), "_.insert('列表', 'a');\n_.insert('列表', 'b');")
    assert result.variables["stat_data"] == {"列表": ["a", "b"]}


def test_version_1_keeps_path_rules_and_declared_root_mode() -> None:
    source = (
        HEADER
        + "registerMvuSchema(z.object({ a: z.number(), m: z.record(z.string(), z.number()) }));"
    )
    v1 = state(source, version=1, data={"a": 1, "m": {}, "extra": True})
    # Version 1 does not loosen the root: the unknown key is stripped by the first command.
    result = run(v1, "_.set('m.k', 2);\n_.set('a', 5);")
    assert result.variables["stat_data"] == {"a": 5, "m": {}}
    assert [d.code for d in result.diagnostics] == ["MVU_PATH_NOT_FOUND"]
    v2 = state(source, version=2, data={"a": 1, "m": {}, "extra": True})
    result = run(v2, "_.set('m.k', 2);")
    assert result.variables["stat_data"] == {"a": 1, "m": {"k": 2}, "extra": True}


def test_object_modes() -> None:
    source = HEADER + (
        "registerMvuSchema(z.object({ s: z.strictObject({ a: z.number() }).prefault({a: 1}),"
        " p: z.object({ a: z.number() }).prefault({a: 1}),"
        " l: z.looseObject({ a: z.number() }).prefault({a: 1}) }));"
    )
    result = run(state(source), "_.set('s.b', 1);\n_.set('p.b', 1);\n_.set('l.b', 1);")
    stat = result.variables["stat_data"]
    assert stat == {"s": {"a": 1}, "p": {"a": 1}, "l": {"a": 1, "b": 1}}
    assert [d.code for d in result.diagnostics] == ["MVU_SCHEMA_REJECTED"]
    with pytest.raises(MvuSyntaxError):
        compile_declaration(source, 1)  # looseObject/strictObject are version 2


def test_enum_record_is_bounded_by_its_enum() -> None:
    source = HEADER + (
        "registerMvuSchema(z.object({ r: z.record(z.enum(['a', 'b']), z.number()).prefault({}) }));"
    )
    result = run(state(source), "_.set('r.a', 1);\n_.set('r.c', 2);")
    assert result.variables["stat_data"]["r"] == {"a": 1}


def test_helpers_inside_declarations() -> None:
    source = (
        HEADER
        + r"""
const MAX = 3;
function cap(list, n = MAX) { return list.slice(0, n); }
registerMvuSchema(z.object({
  tags: z.array(z.string()).prefault([]).transform(t => cap(t.filter(x => x !== ''))),
  stats: z.object({ hp: z.number().prefault(1) }).prefault({})
    .transform(s => ({ ...s, alive: s.hp > 0 })),
  notes: z.record(z.string(), z.string()).prefault({}).superRefine((data, ctx) => {
    for (const key of Object.keys(data)) {
      if (!Object.prototype.hasOwnProperty.call(data, key) || key.length > 5) {
        ctx.addIssue({ code: 'custom', message: 'bad key ' + key });
      }
    }
  }),
}));
"""
    )
    result = run(
        state(source),
        "_.set('tags', ['a', '', 'b', 'c', 'd']);\n_.set('stats.hp', 0);\n"
        "_.set('notes.ok', 'x');\n_.set('notes.toolongkey', 'y');",
    )
    stat = result.variables["stat_data"]
    assert stat["tags"] == ["a", "b", "c"]
    assert stat["stats"] == {"hp": 0, "alive": False}
    assert stat["notes"] == {"ok": "x"}


@pytest.mark.parametrize(
    "body",
    [
        "while (true) {}",
        "const o = new Object();",
        "registerMvuSchema(this.schema);",
        "const f = async () => 1;",
        "const f = (...xs) => xs;",
        "const {a} = {a: 1}; registerMvuSchema(z.any());",
        "class A {}",
        "eventOn('x', () => 1);",
        "registerMvuSchema(z.string().regex(/^a+$/));",
        "registerMvuSchema(z.string().regex(/abc/));",
        "registerMvuSchema(z.object({}).default(() => ({})));",
    ],
)
def test_unsupported_declarations_fail_explicitly(body: str) -> None:
    # Destructuring is accepted from interpreter version 3 on (test_mvu_dsl_v3.py).
    versions = (2,) if body.startswith("const {") else (2, 3)
    for version in versions:
        with pytest.raises(MvuSyntaxError):
            compile_declaration(HEADER + body, version)


def test_unsupported_imports_fail() -> None:
    with pytest.raises(MvuSyntaxError):
        compile_declaration(
            "import x from 'https://example.com/evil.js';\nregisterMvuSchema(z.any());"
        )


def test_functions_cannot_reach_prototypes_or_escape() -> None:
    source = HEADER + (
        "registerMvuSchema(z.object({ a: z.any().transform(v => v.__proto__) }).prefault({}));"
    )
    result = apply_reply(state(HEADER + "registerMvuSchema(z.object({ a: z.any() }));"), "")
    assert result.fatal is None
    with pytest.raises(MvuFatalError):
        initialize_with_schema({"a": {}}, descriptor_for(source))


def test_runaway_declarations_hit_the_budget() -> None:
    loop = HEADER + (
        "registerMvuSchema(z.object({ xs: z.array(z.number()).prefault([]).superRefine((xs) => {"
        " for (const x of xs) { } }) }));"
    )
    v = state(loop)
    result = apply_reply(v, "_.set('xs', [" + ",".join(["1"] * 1001) + "]);")
    assert result.fatal is not None and result.fatal.code == "MVU_BUDGET_EXCEEDED"
    assert result.variables == v
    recursive = HEADER + (
        "const f = (n) => f(n + 1);\n"
        "registerMvuSchema(z.object({ n: z.number().prefault(0).transform(v => v) }));\n"
    )
    compile_declaration(recursive)  # defining a recursive function is fine ...
    deep = HEADER + (
        "const f = (n) => f(n + 1);\n"
        "registerMvuSchema(z.object({ n: z.number().prefault(0).transform(v => f(v)) }));\n"
    )
    with pytest.raises(MvuFatalError):  # ... running it away is a budget error
        state(deep)


def test_superrefine_sees_a_frozen_copy() -> None:
    source = HEADER + (
        "registerMvuSchema(z.object({ o: z.object({ a: z.number() }).prefault({a: 1})"
        ".superRefine((o) => { o.a = 99; }) }));"
    )
    result = run(state(source), "_.set('o.a', 2);")
    assert result.variables["stat_data"]["o"] == {"a": 2}


def test_captured_values_are_read_only() -> None:
    source = HEADER + (
        "const seen = { count: 0 };\n"
        "registerMvuSchema(z.object({ n: z.number().prefault(0).transform(v => {"
        " seen.count = seen.count + 1; return v; }) }));"
    )
    with pytest.raises(MvuFatalError):
        state(source)
    counter = HEADER + (
        "let calls = 0;\n"
        "registerMvuSchema(z.object({ n: z.number().prefault(0).transform(v => {"
        " calls = calls + 1; return v; }) }));"
    )
    with pytest.raises(MvuFatalError):
        state(counter)


def test_underscore_fields_cannot_be_moved_or_removed() -> None:
    v = state()
    result = run(
        v,
        '<JSONPatch>[{"op": "move", "from": "/_内部", "path": "/角色/x"},'
        ' {"op": "remove", "path": "/_内部"}]</JSONPatch>\n_.remove(\'_内部\');',
    )
    assert result.variables["stat_data"]["_内部"] == "x"
    assert [d.code for d in result.diagnostics] == ["MVU_READ_ONLY"] * 3


def test_values_that_cannot_be_state_are_rejected() -> None:
    source = (
        HEADER
        + "registerMvuSchema(z.object({ a: z.any(),"
        + " n: z.number().prefault(1).transform(v => v / 0) }));"
    )
    with pytest.raises(MvuFatalError):
        state(source)  # the transform produces Infinity
    plain = state(HEADER + "registerMvuSchema(z.object({ a: z.any() }));")
    result = run(
        plain,
        "_.set('a', .inf);\n_.set('a', {\"__proto__\": 1});\n"
        '<JSONPatch>[{"op": "replace", "path": "/a", "value": {"constructor": 1}}]</JSONPatch>',
    )
    assert "a" not in result.variables["stat_data"]
    assert [d.code for d in result.diagnostics] == ["MVU_INVALID_VALUE"] * 3
