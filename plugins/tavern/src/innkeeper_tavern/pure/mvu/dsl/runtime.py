"""The values of the declaration interpreter and the pure helpers over them.

Scopes, interpreter functions, built-ins and namespaces, JavaScript-like truthiness, ``typeof``
and equality, property keys, member writes and the checks that keep results JSON
(:mod:`.interp` evaluates; :mod:`.builtins` holds the standard globals).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from innkeeper_tavern.pure.mvu.jsvalue import (
    UNDEFINED,
    Json,
    is_number,
    js_to_number,
    to_js_string,
)
from innkeeper_tavern.pure.mvu.limits import MvuError
from innkeeper_tavern.pure.mvu.paths import PROTOTYPE_KEYS, array_index

from .syntax import Node

if TYPE_CHECKING:
    from .interp import Interpreter

#: Items one ``for (const x of array)`` loop may visit.
MAX_LOOP_ITEMS: Final = 1000


class ScriptError(MvuError):
    """A declaration function failed (a JavaScript ``TypeError``/``ReferenceError`` analogue)."""

    code = "MVU_SCHEMA_RUNTIME"


@dataclass(slots=True)
class Scope:
    """Variables of one block; ``function_root`` marks the outermost scope of a call."""

    parent: Scope | None
    function_root: bool = False
    names: dict[str, list[Any]] = field(default_factory=dict)  # name -> [value, mutable]

    def lookup(self, name: str) -> list[Any] | None:
        scope: Scope | None = self
        while scope is not None:
            if name in scope.names:
                return scope.names[name]
            scope = scope.parent
        return None

    def lookup_local(self, name: str) -> list[Any] | None:
        """Within the current function only: captured variables are immutable."""
        scope: Scope | None = self
        while scope is not None:
            if name in scope.names:
                return scope.names[name]
            if scope.function_root:
                return None
            scope = scope.parent
        return None


@dataclass(frozen=True, slots=True)
class JsFunction:
    """A function value: parameters, body and the scope it closes over."""

    params: tuple[tuple[Any, Node | None], ...]
    body: Node
    closure: Scope
    name: str


@dataclass(frozen=True, slots=True)
class Builtin:
    """A host-provided function; ``fn(interp, args)``."""

    name: str
    fn: Callable[[Interpreter, list[Any]], Any]


@dataclass(frozen=True, slots=True)
class Namespace:
    """A read-only object of built-ins (``Math``, ``z`` ...); ``invoke`` makes it callable too
    (lodash's ``_(value)``)."""

    name: str
    members: dict[str, Any]
    invoke: Callable[[Interpreter, list[Any]], Any] | None = None


def is_json_scalar(value: Any) -> bool:
    return value is None or value is UNDEFINED or isinstance(value, bool | int | float | str)


def truthy(value: Any) -> bool:
    if value is UNDEFINED or value is None or value is False:
        return False
    if isinstance(value, int | float) and not isinstance(value, bool):
        return not (value == 0 or (isinstance(value, float) and math.isnan(value)))
    if isinstance(value, str):
        return value != ""
    return True


def typeof(value: Any) -> str:
    if value is UNDEFINED:
        return "undefined"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, JsFunction | Builtin):
        return "function"
    return "object"


def strict_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if is_number(a) and is_number(b):
        return bool(a == b)
    if isinstance(a, dict | list) or isinstance(b, dict | list):
        return a is b
    return type(a) is type(b) and a == b


def loose_equal(a: Any, b: Any) -> bool:
    if (a is None or a is UNDEFINED) and (b is None or b is UNDEFINED):
        return True
    if a is None or a is UNDEFINED or b is None or b is UNDEFINED:
        return False
    if isinstance(a, str | int | float) and isinstance(b, str | int | float):
        if isinstance(a, str) and isinstance(b, str):
            return a == b
        return bool(js_to_number(a) == js_to_number(b))
    return strict_equal(a, b)


def property_key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if is_json_scalar(key):
        return to_js_string(key)
    raise ScriptError("object keys must be strings or numbers")


def describe(value: Any) -> str:
    if isinstance(value, Namespace):
        return value.name
    if isinstance(value, JsFunction | Builtin):
        return f"function {value.name}"
    return typeof(value)


def set_member(container: Any, key: Any, value: Any) -> None:
    """Input-field assignment on a JSON object or array (never on built-ins)."""
    name = property_key(key)
    if name in PROTOTYPE_KEYS:
        raise ScriptError(f"the property {name!r} is not writable")
    if not is_json_value(value):
        raise ScriptError("only JSON values can be stored in objects")
    if isinstance(container, dict):
        container[name] = value
        return
    if isinstance(container, list):
        index = array_index(name)
        if index is None or index > len(container):
            raise ScriptError(f"cannot write {name!r} of an array (dense indices only)")
        if index == len(container):
            container.append(value)
        else:
            container[index] = value
        return
    raise ScriptError(f"cannot set {name!r} on {describe(container)}")


def is_json_value(value: Any) -> bool:
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
        elif not is_json_scalar(node):
            return False
    return True


def storable(value: Any) -> str | None:
    """Why ``value`` cannot be stored as state (``None`` when it can): non-JSON members,
    non-finite numbers or prototype-style keys."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            bad = PROTOTYPE_KEYS.intersection(node)
            if bad:
                return f"the reserved key {sorted(bad)[0]!r}"
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, float) and not math.isfinite(node):
            return "a number that is not finite"
        elif not is_json_scalar(node):
            return f"a {describe(node)}"
    return None


def to_json(value: Any, where: str) -> Json:
    """Check that a script result is JSON (functions, schemas and namespaces never leak)."""
    if not is_json_value(value):
        raise ScriptError(f"{where} returned a non-JSON value")
    return value
