"""The official json5-tests suite (../shared/mvu-corpus/upstream/json5-tests).

The extension carries the verdict: ``.json`` and ``.json5`` files are valid JSON5, ``.js`` and
``.txt`` files are not. `[initvar]` entries and JSON Patch bodies use this parser.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from innkeeper_tavern.pure.mvu.limits import Budget
from innkeeper_tavern.pure.mvu.textparse import ParseError, parse_json5

SUITE = Path(__file__).resolve().parents[4].parent / "shared/mvu-corpus/upstream/json5-tests"
CASES = sorted(p for p in SUITE.rglob("*") if p.suffix in (".json", ".json5", ".js", ".txt"))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b) and isinstance(a, bool) == isinstance(b, bool)


def test_suite_is_present() -> None:
    assert len(CASES) == 111


@pytest.mark.parametrize("path", CASES, ids=[str(p.relative_to(SUITE)) for p in CASES])
def test_json5_suite(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    if path.suffix in (".js", ".txt"):
        with pytest.raises(ParseError):
            parse_json5(text, Budget())
        return
    value = parse_json5(text, Budget())
    if path.suffix == ".json":
        # Plain JSON files must give exactly what a JSON parser gives.
        assert _same(value, json.loads(text))
