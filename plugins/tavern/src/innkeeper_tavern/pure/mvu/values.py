"""How one command argument becomes a value (MVU ``parseCommandValue``, docs/mvu.md#command-values).

The steps, on the trimmed argument: the words ``true false null undefined``; strict JSON; an
object/array literal (evaluated by :mod:`.expr`, never by JavaScript); arithmetic (mathjs subset,
12 significant digits); YAML 1.2; finally the text with quotes, backslashes and backticks
stripped from both ends.

Deliberate difference: a bare date or clock time (``2024-01-01``, ``2024/01/01``, ``09:15``) is
*not* arithmetic. MVU turns them into ``2022``, ``2024`` and a mathjs range string; here they stay
the strings the model wrote (docs/mvu.md#deliberate-differences-from-mvu).
"""

from __future__ import annotations

import re
from typing import Final

from .expr import ExprError, eval_js_literal, eval_math
from .jsvalue import UNDEFINED, Json
from .limits import MAX_EXPRESSION_CHARS, MAX_YAML_VALUE_CHARS, Budget
from .textparse import ParseError, parse_json, parse_yaml

_TRIM_RE: Final = re.compile(r"^[\s'\"`\\]+|[\s'\"`\\]+$")
_DATE_LIKE: Final = re.compile(r"\d{1,4}[-/.]\d{1,2}[-/.]\d{1,4}\Z")
_TIME_LIKE: Final = re.compile(r"\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?\Z")
_WORDS: Final[dict[str, Json]] = {
    "true": True,
    "false": False,
    "null": None,
    "undefined": UNDEFINED,
}


def trim_quotes_and_backslashes(text: str) -> str:
    """Strip every run of whitespace, quotes, backticks and backslashes from both ends."""
    return _TRIM_RE.sub("", text)


def looks_like_date_or_time(text: str) -> bool:
    """True for a bare calendar date or clock time, which is never read as arithmetic."""
    return bool(_DATE_LIKE.match(text) or _TIME_LIKE.match(text))


def parse_command_value(
    raw: str, budget: Budget, *, arithmetic: bool = True, mathjs: bool = False
) -> Json:
    """Turn one raw argument (quotes included) into a value. Never raises for bad text.

    ``arithmetic=False`` skips the arithmetic step, as MVU's schema (zod) mode does.
    ``mathjs=True`` (instances of interpreter version 3) evaluates mathjs assignment
    expressions, matrices and one-based indexing as MVU does; a matrix is stored as its string.
    """
    text = raw.strip()
    if text in _WORDS:
        return _WORDS[text]
    if not text:
        return ""
    try:
        return parse_json(text, budget)
    except ParseError:
        pass
    if (text[0] == "{" and text[-1] == "}") or (text[0] == "[" and text[-1] == "]"):
        try:
            return eval_js_literal(text, budget)
        except ExprError:
            pass
    if arithmetic and len(text) <= MAX_EXPRESSION_CHARS and not looks_like_date_or_time(text):
        try:
            return eval_math(text, budget, mathjs=mathjs)
        except ExprError:
            pass
    value: Json = UNDEFINED
    if len(text) <= MAX_YAML_VALUE_CHARS:
        try:
            value = parse_yaml(text, budget)
        except ParseError:
            value = UNDEFINED
    if value is not UNDEFINED and (value is not None or text in ("~", "Null", "NULL")):
        return value
    return trim_quotes_and_backslashes(text)
