"""Golden tables produced by running MagVarUpdate itself (../shared/mvu-corpus/generated/).

Every case either matches or is listed in ``deviations.toml`` with the reason; a listed case that
starts to match fails too, so the list stays honest. Run this file directly to print the match
rate per table: ``uv run --no-sync python plugins/tavern/tests/mvu/test_mvu_golden.py``.
"""

from __future__ import annotations

import json
import math
import sys
import tomllib
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from innkeeper_tavern.pure.mvu.engine import apply_reply
from innkeeper_tavern.pure.mvu.extract import extract_commands, split_parameters
from innkeeper_tavern.pure.mvu.initvar import InitEntry, load_initvar
from innkeeper_tavern.pure.mvu.jsvalue import UNDEFINED, to_json_value
from innkeeper_tavern.pure.mvu.limits import Budget, MvuError
from innkeeper_tavern.pure.mvu.native_schema import (
    TemplateMismatch,
    apply_template,
    generate_schema,
    strip_metadata,
)
from innkeeper_tavern.pure.mvu.paths import cast_path, path_fix, to_path
from innkeeper_tavern.pure.mvu.textparse import ParseError, parse_string
from innkeeper_tavern.pure.mvu.values import parse_command_value, trim_quotes_and_backslashes

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[3]
CORPUS = REPO.parent / "shared" / "mvu-corpus"
GENERATED = CORPUS / "generated"
JSON_PATCH_TESTS = CORPUS / "upstream" / "json-patch-tests"

_SAVED = {"__NaN__": None, "__Infinity__": None, "__-Infinity__": None}


@cache
def table(name: str) -> Any:
    return json.loads((GENERATED / f"{name}.json").read_text(encoding="utf-8"))


@cache
def deviations() -> dict[tuple[str, str], str]:
    data = tomllib.loads((HERE / "deviations.toml").read_text(encoding="utf-8"))
    out: dict[tuple[str, str], str] = {}
    for entry in data["deviation"]:
        key = (entry["table"], entry["case"])
        assert key not in out, f"duplicate deviation {key}"
        assert entry["reason"].strip(), f"deviation {key} needs a reason"
        out[key] = entry["reason"]
    return out


def saved(value: Any) -> Any:
    """An expected value as a saved MVU chat holds it (NaN/Infinity null, undefined dropped)."""
    if isinstance(value, dict):
        return {k: saved(v) for k, v in value.items() if v != "__undefined__"}
    if isinstance(value, list):
        return [None if v == "__undefined__" else saved(v) for v in value]
    if isinstance(value, str) and value in _SAVED:
        return None
    return value


# ---------------------------------------------------------------- comparisons per table
# Each returns a list of mismatch descriptions (empty when the case matches).


def check_parse_command_value(case: dict[str, Any]) -> list[str]:
    got = parse_command_value(case["input"], Budget())
    out = case["output"]
    if out["type"] == "undefined":
        return [] if got is UNDEFINED else [f"got {got!r}, expected undefined"]
    if "special" in out:
        special = out["special"]
        ok = isinstance(got, float) and (
            (special == "NaN" and math.isnan(got))
            or (special == "Infinity" and got == math.inf)
            or (special == "-Infinity" and got == -math.inf)
            or (special == "-0" and got == 0 and math.copysign(1, got) < 0)
        )
        return [] if ok else [f"got {got!r}, expected {special}"]
    expected = saved(out["value"])
    got_saved = to_json_value(got)
    type_ok = {
        "string": isinstance(got, str),
        "number": isinstance(got, int | float) and not isinstance(got, bool),
        "boolean": isinstance(got, bool),
        "null": got is None,
        "array": isinstance(got, list),
        "object": isinstance(got, dict),
    }[out["type"]]
    if not type_ok or got_saved != expected:
        return [f"got {got!r}, expected {out['type']} {expected!r}"]
    return []


def check_extract_commands(case: dict[str, Any]) -> list[str]:
    try:
        got: Any = [command.view() for command in extract_commands(case["input"])]
    except MvuError as exc:
        got = f"{exc.code}: {exc}"
    return [] if got == case["commands"] else [f"got {got!r}"]


def check_update_variables(case: dict[str, Any]) -> list[str]:
    given, out = case["input"], case["output"]
    result = apply_reply(given["variables_before"], given["message"])
    problems: list[str] = []
    if result.fatal is not None:
        problems.append(f"fatal {result.fatal.code}: {result.fatal}")
    stat = to_json_value(result.variables.get("stat_data"))
    if stat != saved(out["stat_data"]):
        problems.append(f"stat_data {stat!r} != {saved(out['stat_data'])!r}")
    if result.modified != out["modified"]:
        problems.append(f"modified {result.modified}")
    if result.variables.get("schema") != out["schema"]:
        problems.append(f"schema {result.variables.get('schema')!r}")
    messages = [d.message for d in result.diagnostics if d.severity == "error"]
    if messages != out["error_messages"]:
        problems.append(f"errors {messages!r} != {out['error_messages']!r}")
    expected_events = [e["path"] for e in out["events"] if e["name"] == "mag_variable_updated"]
    events = [change.path for change in result.changes if change.event]
    if events != expected_events:
        problems.append(f"event paths {events!r} != {expected_events!r}")
    return problems


def check_initvar_load(case: dict[str, Any]) -> list[str]:
    given, out = case["input"], case["output"]
    books = [
        (name, [InitEntry(e["comment"], e["content"], e.get("enabled", True)) for e in entries])
        for name, entries in given["lorebooks_in_order"].items()
    ]
    try:
        result = load_initvar(
            books,
            existing=given["existing_stat_data"],
            initialized=given["initialized_lorebooks"],
        )
    except MvuError as exc:
        return [f"{exc.code}: {exc}"]
    problems = []
    if to_json_value(result.stat_data) != saved(out["stat_data"]):
        problems.append(f"stat_data {result.stat_data!r}")
    if result.initialized_lorebooks != out["initialized_lorebooks"]:
        problems.append(f"initialized_lorebooks {result.initialized_lorebooks!r}")
    if result.updated != out["returned_updated"]:
        problems.append(f"updated {result.updated}")
    return problems


def check_parse_string(case: dict[str, Any]) -> list[str]:
    try:
        got = to_json_value(parse_string(case["input"], Budget()))
    except ParseError as exc:
        return [f"ParseError {exc}"]
    return [] if got == saved(case["output"]) else [f"got {got!r}"]


def check_path_fix(case: dict[str, Any]) -> list[str]:
    fixed = path_fix(case["input"])
    segments = to_path(fixed)
    if fixed != case["output"] or segments != case["lodash_toPath_of_output"]:
        return [f"got {fixed!r} {segments!r}"]
    return []


def check_trim(case: dict[str, Any]) -> list[str]:
    got = trim_quotes_and_backslashes(case["input"])
    return [] if got == case["output"] else [f"got {got!r}"]


def check_path_pipeline(case: dict[str, Any]) -> list[str]:
    fixed = path_fix(trim_quotes_and_backslashes(case["raw_arg"]))
    segments = cast_path(fixed, {})
    if fixed != case["path_after_fix"] or segments != case["lodash_segments"]:
        return [f"got {fixed!r} {segments!r}"]
    return []


def check_parse_parameters(case: dict[str, Any]) -> list[str]:
    got = split_parameters(case["input"])
    return [] if got == case["output"] else [f"got {got!r}"]


def check_apply_template(case: dict[str, Any]) -> list[str]:
    template = None if case["template"] == "__undefined__" else case["template"]
    try:
        got = apply_template(
            case["value"],
            template,
            strict_array_cast=case["strict_array_cast"],
            concat=case["array_merge_concat"],
        )
    except TemplateMismatch:
        got = case["value"]  # MVU logs and keeps the value
    return [] if got == case["output"] else [f"got {got!r}"]


def check_generate_schema(case: dict[str, Any]) -> list[str]:
    original = json.loads(json.dumps(case["data"]))
    schema = generate_schema(case["data"])
    stripped = strip_metadata(case["data"])
    problems = []
    if schema != case["schema"]:
        problems.append(f"schema {schema!r}")
    if stripped != case["data_after_generateSchema_mutation"]:
        problems.append(f"stripped data {stripped!r}")
    if case["data"] != original:
        problems.append("generate_schema/strip_metadata mutated their input")
    return problems


def _relaxed(node: Any) -> Any:
    if isinstance(node, dict):
        if node.get("type") in ("object", "array"):
            node["extensible"] = True
        if "required" in node:
            node["required"] = False
        for child in node.get("properties", {}).values():
            _relaxed(child)
        if "elementType" in node:
            _relaxed(node["elementType"])
    return node


def _wrap_op(op: Any) -> Any:
    if not isinstance(op, dict):
        return op
    op = dict(op)
    for key in ("path", "from"):
        if isinstance(op.get(key), str):
            pointer = op[key]
            if pointer and not pointer.startswith("/"):
                pointer = "/" + pointer  # MVU tolerates a missing leading slash
            op[key] = "/doc" + pointer
    return op


@cache
def json_patch_sources() -> dict[str, list[dict[str, Any]]]:
    return {
        name: json.loads((JSON_PATCH_TESTS / name).read_text(encoding="utf-8"))
        for name in ("spec_tests.json", "tests.json")
    }


def check_jsonpatch_suite(case: dict[str, Any]) -> list[str]:
    source = json_patch_sources()[case["file"]][case["index"]]
    document = source.get("doc")
    stat = {"doc": document}
    schema = _relaxed(generate_schema(stat))
    patch = [_wrap_op(op) for op in source.get("patch") or []]
    result = apply_reply(
        {"stat_data": stat, "schema": schema}, f"<JsonPatch>{json.dumps(patch)}</JsonPatch>"
    )
    if result.fatal is not None:
        return [f"fatal {result.fatal.code}: {result.fatal}"]
    got = to_json_value(result.variables["stat_data"]).get("doc", "<removed>")
    if got == saved(case.get("mvu_stat_data")):
        return []
    if "rfc_expected" in case and got == case["rfc_expected"]:
        return []
    if case.get("rfc_error") and got == document:
        return []
    return [f"got {got!r}; MVU {case.get('mvu_stat_data')!r}; RFC {case.get('rfc_expected')!r}"]


# ---------------------------------------------------------------- case enumeration

Check = Callable[[dict[str, Any]], list[str]]


def cases() -> Iterator[tuple[str, str, dict[str, Any], Check]]:
    for case in table("parse_command_value")["cases"]:
        yield "parse_command_value", case["input"], case, check_parse_command_value
    for case in table("extract_commands")["cases"]:
        yield "extract_commands", case["input"], case, check_extract_commands
    for case in table("update_variables")["cases"]:
        yield "update_variables", case["id"], case, check_update_variables
    for case in table("initvar_load")["cases"]:
        yield "initvar_load", case["id"], case, check_initvar_load
    helpers = table("helpers")
    simple: list[tuple[str, str, Check]] = [
        ("parse_string", "input", check_parse_string),
        ("path_fix", "input", check_path_fix),
        ("trim_quotes_and_backslashes", "input", check_trim),
        ("path_pipeline", "raw_arg", check_path_pipeline),
        ("parse_parameters", "input", check_parse_parameters),
    ]
    for name, key, check in simple:
        for case in helpers[name]:
            yield name, case[key], case, check
    for index, case in enumerate(helpers["apply_template"]):
        yield "apply_template", f"#{index}", case, check_apply_template
    for index, case in enumerate(helpers["generate_schema"]):
        yield "generate_schema", f"#{index}", case, check_generate_schema
    for case in table("jsonpatch_suite_mvu_results")["cases"]:
        yield "jsonpatch_suite", f"{case['file']}#{case['index']}", case, check_jsonpatch_suite


ALL_CASES = list(cases())


@pytest.mark.parametrize(
    ("table_name", "case_id", "case", "check"),
    ALL_CASES,
    ids=[f"{t}:{c!r}"[:90] for t, c, _, _ in ALL_CASES],
)
def test_golden_case(table_name: str, case_id: str, case: dict[str, Any], check: Check) -> None:
    problems = check(case)
    reason = deviations().get((table_name, case_id))
    if reason is None:
        assert not problems, f"{table_name} {case_id!r} differs from MVU: {problems}"
    else:
        assert problems, f"{table_name} {case_id!r} now matches; remove it from deviations.toml"


def test_every_deviation_names_a_real_case() -> None:
    known = {(t, c) for t, c, _, _ in ALL_CASES}
    unknown = [key for key in deviations() if key not in known]
    assert not unknown, f"deviations.toml lists cases that do not exist: {unknown}"


def test_corpus_is_complete() -> None:
    # The INDEX's case counts: a silently truncated corpus must not pass as "all green".
    counts: dict[str, int] = {}
    for t, _, _, _ in ALL_CASES:
        counts[t] = counts.get(t, 0) + 1
    assert counts["parse_command_value"] == 101
    assert counts["extract_commands"] == 46
    assert counts["update_variables"] == 98
    assert counts["initvar_load"] == 16
    assert counts["jsonpatch_suite"] == 112
    helper_rows = sum(
        counts[name]
        for name in (
            "parse_string",
            "path_fix",
            "trim_quotes_and_backslashes",
            "path_pipeline",
            "parse_parameters",
            "apply_template",
            "generate_schema",
        )
    )
    assert helper_rows == 151


def report() -> str:
    """Match rate per table: matched / deviations / total."""
    rows: dict[str, list[int]] = {}
    listed = deviations()
    for t, case_id, case, check in ALL_CASES:
        row = rows.setdefault(t, [0, 0, 0])
        row[2] += 1
        if (t, case_id) in listed:
            row[1] += 1
        elif not check(case):
            row[0] += 1
    lines = [f"{'table':30} matched deviations total"]
    totals = [0, 0, 0]
    for t, (matched, deviating, total) in rows.items():
        lines.append(f"{t:30} {matched:7} {deviating:10} {total:5}")
        totals = [a + b for a, b in zip(totals, (matched, deviating, total), strict=True)]
    lines.append(f"{'all':30} {totals[0]:7} {totals[1]:10} {totals[2]:5}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(report() + "\n")
