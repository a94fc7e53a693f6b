"""Bounded data parsers: YAML 1.2 (core schema), JSON5, strict JSON and MVU's ``parseString``.

docs/contract/mvu-dsl.md#compatibility: initialization is bounded YAML/JSON5, tags and aliases
refused. YAML is read through ruamel.yaml's *event* stream and built here, so the result is
exactly the YAML 1.2 core schema that MVU's ``yaml`` v2 uses (``yes``/``on`` stay strings,
``1_000`` and ``2024-01-01`` stay strings, ``0o17`` is 15), anchors, aliases and explicit tags are
refused, and depth and size are checked while parsing instead of afterwards.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Final

import pyjson5
from ruamel.yaml import YAML
from ruamel.yaml import events as yaml_events

from .expr import ExprError, _Parser, tokenize
from .jsvalue import UNDEFINED, Json, normalize_number, to_js_string
from .limits import (
    MAX_DOCUMENT_CHARS,
    MAX_PARSE_DEPTH,
    MAX_YAML_CHARS,
    Budget,
    MvuBudgetError,
)


class ParseError(ValueError):
    """The text is not a document of the expected syntax (the caller decides if it is fatal)."""


# ---------------------------------------------------------------- YAML 1.2 core schema

_YAML_NULL: Final = frozenset(["", "~", "null", "Null", "NULL"])
_YAML_TRUE: Final = frozenset(["true", "True", "TRUE"])
_YAML_FALSE: Final = frozenset(["false", "False", "FALSE"])
_YAML_INT10: Final = re.compile(r"[-+]?[0-9]+\Z")
_YAML_INT8: Final = re.compile(r"0o[0-7]+\Z")
_YAML_INT16: Final = re.compile(r"0x[0-9a-fA-F]+\Z")
_YAML_FLOAT: Final = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?\Z")
_YAML_INF: Final = re.compile(r"[-+]?\.(?:inf|Inf|INF)\Z")
_YAML_NAN: Final = re.compile(r"\.(?:nan|NaN|NAN)\Z")
_MERGE_KEY: Final = "<<"
#: Budget steps charged per YAML character (the pure-Python parser is the slowest step).
YAML_STEPS_PER_CHAR: Final = 8


def _resolve_plain(text: str) -> Json:
    """Resolve an untagged plain scalar with the YAML 1.2 core schema."""
    if text in _YAML_NULL:
        return None
    if text in _YAML_TRUE:
        return True
    if text in _YAML_FALSE:
        return False
    if _YAML_INT10.match(text):
        return normalize_number(int(text))
    if _YAML_INT8.match(text):
        return normalize_number(int(text[2:], 8))
    if _YAML_INT16.match(text):
        return normalize_number(int(text[2:], 16))
    if _YAML_FLOAT.match(text):
        return normalize_number(float(text))
    if _YAML_INF.match(text):
        return -math.inf if text.startswith("-") else math.inf
    if _YAML_NAN.match(text):
        return math.nan
    return text


class _Frame:
    __slots__ = ("container", "key", "merge_pending")

    def __init__(self, container: dict[str, Json] | list[Json]) -> None:
        self.container = container
        self.key: Json = UNDEFINED  # pending mapping key
        self.merge_pending = False


def parse_yaml(text: str, budget: Budget) -> Json:
    """Parse one YAML 1.2 document (core schema). Anchors, aliases and tags are refused."""
    if len(text) > MAX_YAML_CHARS:
        raise MvuBudgetError(f"YAML document longer than {MAX_YAML_CHARS} characters")
    # The parser's cost grows with characters, not only events: charge for both.
    budget.charge(len(text) * YAML_STEPS_PER_CHAR)
    loader = YAML(typ="safe", pure=True)
    stack: list[_Frame] = []
    result: Json = UNDEFINED
    documents = 0

    def add(value: Json) -> None:
        nonlocal result
        budget.charge()
        if not stack:
            result = value
            return
        frame = stack[-1]
        container = frame.container
        if isinstance(container, list):
            container.append(value)
            return
        if frame.key is UNDEFINED:
            if isinstance(value, dict | list):
                raise ParseError("complex mapping keys are not supported")
            if value == _MERGE_KEY and frame.merge_pending:
                frame.key = _MERGE_KEY
                return
            frame.key = value if isinstance(value, str) else to_js_string(value)
            return
        key = frame.key
        frame.key = UNDEFINED
        if key == _MERGE_KEY and frame.merge_pending:
            frame.merge_pending = False
            sources = value if isinstance(value, list) else [value]
            for source in sources:
                if not isinstance(source, dict):
                    raise ParseError("merge key needs a mapping")
                for k, v in source.items():
                    container.setdefault(k, v)
            return
        assert isinstance(key, str)
        container.pop(key, None)
        container[key] = value

    try:
        for event in loader.parse(text):
            budget.charge()
            if isinstance(event, yaml_events.AliasEvent):
                raise ParseError("YAML aliases are not supported")
            if isinstance(event, yaml_events.NodeEvent) and event.anchor is not None:
                raise ParseError("YAML anchors are not supported")
            if isinstance(event, yaml_events.DocumentStartEvent):
                documents += 1
                if documents > 1:
                    raise ParseError("more than one YAML document")
            elif isinstance(event, yaml_events.ScalarEvent):
                if event.tag is not None and not (event.tag == "!" and event.style):
                    raise ParseError("YAML tags are not supported")
                if event.style is None:
                    value: Json = _resolve_plain(event.value)
                    frame = stack[-1] if stack else None
                    if (
                        event.value == _MERGE_KEY
                        and frame is not None
                        and isinstance(frame.container, dict)
                        and frame.key is UNDEFINED
                    ):
                        frame.merge_pending = True
                else:
                    value = event.value
                add(value)
            elif isinstance(event, yaml_events.MappingStartEvent | yaml_events.SequenceStartEvent):
                if event.tag is not None:
                    raise ParseError("YAML tags are not supported")
                if len(stack) >= MAX_PARSE_DEPTH:
                    raise MvuBudgetError("YAML nested too deeply")
                new: dict[str, Json] | list[Json] = (
                    {} if isinstance(event, yaml_events.MappingStartEvent) else []
                )
                add(new)
                stack.append(_Frame(new))
            elif isinstance(event, yaml_events.MappingEndEvent | yaml_events.SequenceEndEvent):
                stack.pop()
    except (ParseError, MvuBudgetError):
        raise
    except RecursionError as exc:
        raise MvuBudgetError("YAML nested too deeply") from exc
    except Exception as exc:  # ruamel raises several unrelated types for bad input
        raise ParseError(f"invalid YAML: {type(exc).__name__}") from exc
    return None if result is UNDEFINED else result


# ---------------------------------------------------------------- JSON and JSON5


def _reject_constant(name: str) -> Json:
    raise ParseError(f"{name} is not JSON")


def _json_number(text: str) -> Json:
    return normalize_number(int(text))


def parse_json(text: str, budget: Budget) -> Json:
    """``JSON.parse``: strict JSON (no NaN/Infinity); integers beyond 2**53 become floats."""
    if len(text) > MAX_DOCUMENT_CHARS:
        raise MvuBudgetError("JSON document too large")
    budget.charge(len(text) // 16 + 1)
    try:
        value = json.loads(text, parse_constant=_reject_constant, parse_int=_json_number)
    except RecursionError as exc:
        raise MvuBudgetError("JSON nested too deeply") from exc
    except ValueError as exc:
        raise ParseError(str(exc)) from exc
    _check_depth(value)
    if value == 0 and isinstance(value, int) and text.strip().startswith("-"):
        return -0.0
    return value


def _check_depth(value: Json) -> None:
    stack: list[tuple[Json, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            if depth > MAX_PARSE_DEPTH:
                raise MvuBudgetError("document nested too deeply")
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in children)


def parse_json5(text: str, budget: Budget) -> Json:
    """Parse a JSON5 document (comments, unquoted keys, single quotes, hex, NaN/Infinity).

    pyjson5 (Cython) passes the whole json5-tests suite and limits nesting itself (deeper than
    32 raises ``Json5NestingTooDeep``, a budget error here).
    """
    if len(text) > MAX_DOCUMENT_CHARS:
        raise MvuBudgetError("JSON5 document too large")
    budget.charge(len(text) // 16 + 1)
    try:
        value: Any = pyjson5.loads(text)
    except pyjson5.Json5NestingTooDeep as exc:
        raise MvuBudgetError("JSON5 nested too deeply") from exc
    except pyjson5.Json5Exception as exc:
        raise ParseError(f"invalid JSON5: {type(exc).__name__}") from exc
    _check_depth(value)
    return _normalize_tree(value)


def _normalize_tree(value: Json) -> Json:
    if isinstance(value, float | int) and not isinstance(value, bool):
        return normalize_number(value)
    if isinstance(value, list):
        return [_normalize_tree(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _normalize_tree(v) for k, v in value.items()}
    return value


def _parse_concatenated_objects(text: str, budget: Budget) -> list[Json]:
    """Several object literals one after another (what models emit for a JSON Patch list).

    This is the one repair kept from MVU's ``jsonrepair`` step: ``{...}\\n{...}`` is read as
    ``[{...}, {...}]``. Anything else that JSON5 and YAML reject stays an error.
    """
    tokens = tokenize(text, js=True, budget=budget, max_chars=MAX_DOCUMENT_CHARS)
    parser = _Parser(tokens, js=True, budget=budget)
    items: list[Json] = []
    while parser.peek()[0] != "end":
        if not parser.at("{"):
            raise ParseError("not a sequence of objects")
        items.append(parser.expression())
        if parser.at(","):
            parser.take()
    if len(items) < 2:
        raise ParseError("not a sequence of objects")
    return [_normalize_tree(v) for v in items]


def parse_string(text: str, budget: Budget) -> Json:
    """MVU ``parseString``: the parser of `[initvar]` entries and JSON Patch bodies.

    Text starting with ``{`` or ``[`` is tried as JSON, JSON5, a sequence of objects, then
    YAML; other text as YAML, then JSON5. Empty text is ``null``. Raises :class:`ParseError`.
    """
    stripped = text.strip()
    if not stripped:
        return None
    attempts = (
        # Strict JSON first: the same result as JSON5 for JSON text, at C speed.
        (parse_json, parse_json5, _parse_concatenated_objects, parse_yaml)
        if stripped[0] in "{["
        else (parse_yaml, parse_json5)
    )
    last: Exception | None = None
    for attempt in attempts:
        try:
            return attempt(stripped, budget)
        except (ParseError, ExprError) as exc:
            last = exc
    raise ParseError(f"not YAML or JSON5: {last}")
