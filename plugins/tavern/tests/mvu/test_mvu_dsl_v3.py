"""Interpreter version 3: destructuring, the lodash subset and the exact import aliases of local
capability contract v1, on schemas written the way the MVU + mvu_zod template writes them.
Versions 1 and 2 keep their behaviour."""

from __future__ import annotations

from typing import Any

import pytest

from innkeeper_tavern.pure.mvu.dsl.capabilities import IMPORT_ALIASES, REVIEWED_MVU_ZOD_URL
from innkeeper_tavern.pure.mvu.dsl.engine import (
    CURRENT_INTERPRETER_VERSION,
    compile_declaration,
    descriptor_for,
    initialize_with_schema,
)
from innkeeper_tavern.pure.mvu.engine import UpdateResult, apply_reply
from innkeeper_tavern.pure.mvu.limits import Budget, MvuBudgetError, MvuFatalError, MvuSyntaxError

HEADER = f"import {{ registerMvuSchema }} from '{REVIEWED_MVU_ZOD_URL}';\n"

#: A template-style card schema: an inventory record cleaned with ``_.pickBy`` and a
#: destructuring predicate, clamp transforms, prefaults, records of objects, a derived field
#: computed through a lodash chain, and a transform that destructures with ``...rest``.
TEMPLATE = (
    HEADER
    + r"""
const clamp100 = n => _.clamp(Number(n) || 0, 0, 100);

export const Schema = z.object({
  世界: z.object({
    时间: z.string().prefault('08:00'),
    回合: z.coerce.number().transform(v => Math.max(1, Math.floor(v))).prefault(1),
  }).prefault({}),
  物品栏: z.record(
    z.string(),
    z.object({ 数量: z.coerce.number().prefault(1), 描述: z.string().prefault('') }),
  ).transform(d => _.pickBy(d, ({ 数量 }) => 数量 > 0)).prefault({}),
  角色: z.record(
    z.string(),
    z.object({
      好感度: z.coerce.number().transform(clamp100).prefault(0),
      心情: z.string().prefault('平静'),
    }),
  ).prefault({}),
  任务: z.object({
    子任务: z.record(
      z.string(),
      z.object({ 状态: z.enum(['进行中', '已完成']).prefault('进行中') }),
    ).prefault({}),
  }).transform(data => ({
    ...data,
    主任务状态: _.size(data.子任务) > 0 && _(data.子任务).values().every(t => t.状态 === '已完成')
      ? '已完成'
      : '进行中',
  })).prefault({}),
  队伍: z.array(z.object({ 名字: z.string(), hp: z.coerce.number(), 职业: z.string().optional() }))
    .transform(list => {
      const [leader = { 名字: '?' }] = list;
      const clamped = list.map(({ 名字, hp, ...rest }) => ({
        ...rest, 名字, hp: _.clamp(hp, 0, 100),
      }));
      return _.sortBy(clamped, '名字').map(m => ({ ...m, 领队: m.名字 === leader.名字 }));
    }).prefault([]),
});

$(() => {
  registerMvuSchema(Schema);
});
"""
)


def state(source: str = TEMPLATE, data: dict[str, Any] | None = None, version: int = 3) -> Any:
    return initialize_with_schema(data or {}, descriptor_for(source, version))


def run(variables: dict[str, Any], text: str) -> UpdateResult:
    result = apply_reply(variables, text)
    assert result.fatal is None, result.fatal
    return result


def test_new_declarations_compile_to_version_3() -> None:
    assert CURRENT_INTERPRETER_VERSION == 3
    v = initialize_with_schema({}, descriptor_for(TEMPLATE))
    assert v["mvu_schema"]["interpreterVersion"] == 3


def test_template_schema_initializes_with_prefaults() -> None:
    v = state(data={"物品栏": {"剑": {"数量": 2}, "空瓶": {"数量": 0}}})
    assert v["stat_data"] == {
        "世界": {"时间": "08:00", "回合": 1},
        "物品栏": {"剑": {"数量": 2, "描述": ""}},
        "角色": {},
        "任务": {"子任务": {}, "主任务状态": "进行中"},
        "队伍": [],
    }


def test_template_schema_transforms_and_rejects_commands() -> None:
    v = state(data={"物品栏": {"剑": {"数量": 2}, "药": {"数量": 1}}})
    result = run(
        v,
        "_.set('物品栏.剑.数量', 0);//used up\n"
        '_.set(\'角色.艾拉\', {"好感度": "150"});\n'
        '_.set(\'任务.子任务.找钥匙\', {"状态": "已完成"});\n'
        "_.set('世界.回合', 3.7);\n"
        '_.set(\'队伍\', [{"名字": "乙", "hp": 300, "职业": "法师"}, {"名字": "甲", "hp": -5}]);\n'
        "_.set('任务.子任务.找钥匙.状态', '失败');\n",
    )
    stat = result.variables["stat_data"]
    assert stat["物品栏"] == {"药": {"数量": 1, "描述": ""}}  # pickBy dropped the empty one
    assert stat["角色"] == {"艾拉": {"好感度": 100, "心情": "平静"}}  # clamped, prefaulted
    assert stat["任务"] == {"子任务": {"找钥匙": {"状态": "已完成"}}, "主任务状态": "已完成"}
    assert stat["世界"]["回合"] == 3
    # Sorted by name in code-unit order (乙 U+4E59 before 甲 U+7532), as JavaScript sorts.
    assert stat["队伍"] == [
        {"职业": "法师", "名字": "乙", "hp": 100, "领队": True},
        {"名字": "甲", "hp": 0, "领队": False},
    ]
    # The enum rejected the last command: it changed nothing.
    assert [d.code for d in result.diagnostics] == ["MVU_SCHEMA_REJECTED"]


def test_versions_1_and_2_keep_rejecting_destructuring_and_lodash_beyond_clamp() -> None:
    destructuring = HEADER + "registerMvuSchema(z.object({}).transform(({ a }) => ({ a })));"
    for version in (1, 2):
        with pytest.raises(MvuSyntaxError, match="destructuring"):
            compile_declaration(destructuring, version)
    compile_declaration(destructuring, 3)
    picky = HEADER + (
        "registerMvuSchema(z.object({ r: z.record(z.string(), z.number())"
        ".transform(d => _.pickBy(d, v => v > 0)).prefault({}) }));"
    )
    # Version 2 compiles it (the call is only reached when the transform runs) and then
    # refuses to validate with it: a stored version 2 instance behaves as it always did.
    with pytest.raises(MvuFatalError, match="pickBy is not supported"):
        state(picky, version=2)
    assert run(state(picky), "_.set('r.a', 1);_.set('r.b', -1);").variables["stat_data"] == {
        "r": {"a": 1}
    }


def _value(expression: str) -> Any:
    """Evaluate ``expression`` in a version 3 transform."""
    source = HEADER + f"registerMvuSchema(z.any().transform(() => ({expression})));"
    out, issues = compile_declaration(source).validate(None, Budget(1_000_000))
    assert not issues, issues
    return out


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("_.pickBy({a: 1, b: 0, c: 2}, v => v > 0)", {"a": 1, "c": 2}),
        ("_.omitBy({a: 1, b: 0}, (v, k) => k === 'a')", {"b": 0}),
        ("_.mapValues({a: {n: 1}, b: {n: 2}}, 'n')", {"a": 1, "b": 2}),
        ("_.filter([{t: 1, k: 'x'}, {t: 0, k: 'y'}], {t: 1})", [{"t": 1, "k": "x"}]),
        ("_.map({a: 1, b: 2}, (v, k) => k + v)", ["a1", "b2"]),
        ("_.reduce([1, 2, 3], (s, v) => s + v, 10)", 16),
        ("_.reduce([1, 2, 3], (s, v) => s * v)", 6),
        (
            "_.sortBy([{n: 'b', v: 2}, {n: 'a', v: 2}, {n: 'c', v: 1}], 'v')",
            [{"n": "c", "v": 1}, {"n": "b", "v": 2}, {"n": "a", "v": 2}],
        ),
        ("_.orderBy([{v: 1}, {v: 3}, {v: 2}], ['v'], ['desc'])", [{"v": 3}, {"v": 2}, {"v": 1}]),
        ("_.take([1, 2, 3], 2)", [1, 2]),
        ("_.take([1, 2, 3])", [1]),
        ("_.uniq([1, '1', 1, 2])", [1, "1", 2]),
        ("_.sum([1, 2.5])", 3.5),
        ("_.sumBy([{n: 1}, {n: 4}], 'n')", 5),
        ("_.keys({a: 1, b: 2})", ["a", "b"]),
        ("_.values({a: 1, b: 2})", [1, 2]),
        ("_.entries({a: 1})", [["a", 1]]),
        ("_.has({a: {b: [0, 5]}}, 'a.b[1]')", True),
        ("_.has({a: 1}, 'b')", False),
        ("_.get({a: {b: [0, 5]}}, 'a.b[1]')", 5),
        ("_.get({a: 1}, 'x.y', 'none')", "none"),
        ("_.set({a: {}}, 'a.b.c', 1)", {"a": {"b": {"c": 1}}}),
        ("_.isEmpty({})", True),
        ("_.isEmpty([0])", False),
        ("_.isNumber(1)", True),
        ("_.isNumber('1')", False),
        ("_.isString('x')", True),
        ("_.clamp(150, 0, 100)", 100),
        ("_.round(2.345, 2)", 2.35),
        ("_.floor(2.7)", 2),
        ("_.ceil(2.1)", 3),
        ("_.max([3, 9, 1])", 9),
        ("_.min([3, 9, 1])", 1),
        ("_.maxBy([{v: 1}, {v: 7}], 'v')", {"v": 7}),
        ("_.size({a: 1, b: 2})", 2),
        ("_.includes([1, 2], 2)", True),
        ("_.includes('abc', 'bc')", True),
        ("_.find([{a: 1}, {a: 2}], o => o.a > 1)", {"a": 2}),
        ("_.some([0, 0, 1])", True),
        ("_.every([1, 1, 0])", False),
        ("_.merge({a: {x: 1}}, {a: {y: 2}, b: 3})", {"a": {"x": 1, "y": 2}, "b": 3}),
        ("_.pick({a: 1, b: 2, c: 3}, ['a', 'c'])", {"a": 1, "c": 3}),
        ("_.omit({a: 1, b: 2}, 'a')", {"b": 2}),
        ("_.isEqual({a: [1]}, {a: [1]})", True),
        ("_.cloneDeep({a: [1]})", {"a": [1]}),
        ("_.isNil(null)", True),
        ("_.compact([0, 1, '', 'a', null])", [1, "a"]),
        ("_([{n: 2}, {n: 1}]).sortBy('n').map('n').value()", [1, 2]),
        ("_({a: 1, b: 2}).values().sum()", 3),
    ],
)
def test_lodash_functions(expression: str, expected: Any) -> None:
    assert _value(expression) == expected


def test_lodash_cannot_write_captured_values_or_reach_prototypes() -> None:
    frozen = HEADER + (
        "const base = {a: 1};\nregisterMvuSchema(z.any().transform(() => _.set(base, 'a', 2)));"
    )
    _, issues = compile_declaration(frozen).validate(None, Budget(1_000_000))
    assert issues and "read-only" in str(issues[0]["message"])
    assert _value("_.get({}, '__proto__.x', 'safe')") == "safe"
    with pytest.raises(MvuBudgetError):
        compile_declaration(
            HEADER + "registerMvuSchema(z.any().transform(() => _.map(_.map([0], () => 1), "
            "() => _.reduce([1,2,3,4,5,6,7,8,9,10], (a) => _.sum([a, _.size(_.keys({}))]), 0))));"
        ).validate(None, Budget(50))


def test_destructuring_patterns() -> None:
    assert _value(
        "(({a, b: [x, , y = 9] = [], ...rest}) => [a, x, y, rest])({a: 1, b: [2, 3], c: 4})"
    ) == [1, 2, 9, {"c": 4}]
    assert _value("(() => { const [h, ...t] = [1, 2, 3]; return {h, t}; })()") == {
        "h": 1,
        "t": [2, 3],
    }
    assert _value("(({ 数量 = 1 } = {}) => 数量)()") == 1
    source = HEADER + "registerMvuSchema(z.any().transform(({ a }) => a));"
    _, issues = compile_declaration(source).validate(None, Budget(1_000))
    assert issues and "destructure" in str(issues[0]["message"])
    assert _value("_.toNumber('12')") == 12
    assert _value("Object.entries({a: 1, b: 2}).map(([k, v]) => k + v)") == ["a1", "b2"]
    loop = (
        "(() => { let s = ''; "
        "for (const [k, { n }] of Object.entries({a: {n: 1}})) s += k + n; return s; })()"
    )
    assert _value(loop) == "a1"


@pytest.mark.parametrize("alias", sorted(IMPORT_ALIASES))
def test_exact_import_aliases_select_local_capabilities(alias: str) -> None:
    if IMPORT_ALIASES[alias] == "backend-schema":
        source = (
            f"import {{ registerMvuSchema }} from '{alias}';\nregisterMvuSchema(z.object({{}}));"
        )
        compiled = compile_declaration(source)
        assert compiled.root.mode == "loose"  # the reviewed entry's root rebuild
    else:
        source = f"import '{alias}';\nregisterMvuSchema(z.object({{}}));"
        compiled = compile_declaration(source)
        assert compiled.root.mode != "loose"  # no registration entry: no root rebuild


@pytest.mark.parametrize(
    "statement",
    [
        "import { registerMvuSchema } from 'https://example.com/mirror/util/mvu_zod.js';",
        "import * as mvu from '" + REVIEWED_MVU_ZOD_URL + "';",
        "import { registerMvuSchema } from "
        "'https://testingcf.jsdelivr.net/gh/MagicalAstrogy/MagVarUpdate/artifact/bundle.js';",
        "import 'https://example.com/bundle.js';",
    ],
)
def test_other_imports_fail_explicitly_in_version_3(statement: str) -> None:
    source = statement + "\nregisterMvuSchema(z.object({}));"
    with pytest.raises(MvuSyntaxError, match="unsupported import"):
        compile_declaration(source)
    if "example.com/mirror" in statement:
        compile_declaration(source, 2)  # version 2 keeps its suffix rule
