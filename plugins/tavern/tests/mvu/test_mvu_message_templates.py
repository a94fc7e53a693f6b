"""Every diagnostic MVU's update engine prints, as MVU prints it: one test per template of
``data/mvu_message_templates.json`` and per case of its command x container x schema matrix,
under interpreter versions 2 and 3 (docs/mvu.md "Diagnostics").

The table holds MagVarUpdate's message templates (format strings with named fields) with the
source commit, file and line of each; a case names the template it must print, filled in, or
a deliberate difference (docs/mvu.md "Deliberate differences from MVU").
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from innkeeper_tavern.pure.mvu.engine import apply_reply
from innkeeper_tavern.pure.mvu.initvar import initialize_variables

TABLE = json.loads((Path(__file__).parent / "data" / "mvu_message_templates.json").read_text())
TEMPLATES: dict[str, dict[str, Any]] = {row["id"]: row for row in TABLE["templates"]}
INTERPRETERS = {2: False, 3: True}  # version → mathjs command values


def messages(reply: str, version: int) -> tuple[list[str], list[str]]:
    """The error and warning messages of one reply over the table's initial state."""
    variables = initialize_variables(TABLE["_meta"]["initvar"])
    result = apply_reply(variables, reply, mathjs=INTERPRETERS[version])
    assert result.fatal is None, result.fatal
    errors = [d.message for d in result.diagnostics if d.severity == "error"]
    warnings = [d.message for d in result.diagnostics if d.severity == "warning"]
    return errors, warnings


def expected_text(expected: dict[str, Any]) -> tuple[str, str]:
    row = TEMPLATES[expected["template"]]
    assert set(expected["fill"]) == set(row["fields"]), "fill every field of the template"
    return row["severity"], row["template"].format(**expected["fill"])


def check(reply: str, expected: dict[str, Any] | None, version: int) -> None:
    errors, warnings = messages(reply, version)
    if expected is None:
        assert (errors, warnings) == ([], [])
    elif "deliberate" in expected:
        if not expected.get("skip_message"):
            assert errors == [expected["message"]]
    else:
        severity, text = expected_text(expected)
        assert (errors if severity == "error" else warnings) == [text]


def test_the_table_names_its_source_and_every_template_is_used() -> None:
    for row in TABLE["templates"]:
        assert row["source"]["commit"] == "b42817925d0391c15fa242a8238d2bbe28eb6319"
        assert row["source"]["file"].startswith("src/") and row["source"]["line"] > 0
        fields = {name for name in row["fields"]}
        assert fields == set(_fields(row["template"])), row["id"]
    used = {
        c["expected"]["template"]
        for c in TABLE["cases"]
        if c["expected"] is not None and "template" in c["expected"]
    }
    reachable = {row["id"] for row in TABLE["templates"] if row["reachable"]}
    assert reachable <= used, sorted(reachable - used)


def _fields(template: str) -> list[str]:
    import string

    return [name for _, name, _, _ in string.Formatter().parse(template) if name]


@pytest.mark.parametrize("version", INTERPRETERS)
@pytest.mark.parametrize(
    "case",
    TABLE["cases"],
    ids=[
        f"{n}:{c['container']}/{c['schema']}/{c['command']}" for n, c in enumerate(TABLE["cases"])
    ],
)
def test_case(case: dict[str, Any], version: int) -> None:
    check(case["reply"], case["expected"], version)


@pytest.mark.parametrize("version", INTERPRETERS)
@pytest.mark.parametrize(
    "row",
    [row for row in TABLE["templates"] if not row["reachable"]],
    ids=[row["id"] for row in TABLE["templates"] if not row["reachable"]],
)
def test_an_unreachable_template_prints_what_mvu_prints_instead(
    row: dict[str, Any], version: int
) -> None:
    check(row["instead"]["reply"], row["instead"]["expected"], version)
