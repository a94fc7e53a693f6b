"""The standard globals of declarations (``Math``, ``_``, ``Object``, ``Number`` ...) and the
methods of arrays and strings, as interpreter built-ins over JSON values."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from innkeeper_tavern.pure.mvu.jsvalue import (
    UNDEFINED,
    js_to_number,
    normalize_number,
    to_js_string,
)
from innkeeper_tavern.pure.mvu.limits import MvuBudgetError
from innkeeper_tavern.pure.mvu.paths import PROTOTYPE_KEYS

from .runtime import (
    MAX_LOOP_ITEMS,
    Builtin,
    Namespace,
    ScriptError,
    property_key,
    strict_equal,
    truthy,
)

if TYPE_CHECKING:
    from .interp import Interpreter


def _to_fixed(number: Any, args: list[Any]) -> str:
    digits = int(js_to_number(args[0])) if args else 0
    if not 0 <= digits <= 20:
        raise ScriptError("toFixed digits must be between 0 and 20")
    return f"{float(number):.{digits}f}"


def _fn(interp: Interpreter, callback: Any, *args: Any) -> Any:
    return interp.call(callback, list(args))


def array_method(target: list[Any], name: str) -> Builtin:
    """Array methods that take callbacks (each call charges the shared budget)."""

    def check(interp: Interpreter) -> None:
        if len(target) > MAX_LOOP_ITEMS:
            raise MvuBudgetError(f"array methods visit at most {MAX_LOOP_ITEMS} items")
        interp.budget.charge(len(target))

    def impl(interp: Interpreter, args: list[Any]) -> Any:
        check(interp)
        cb = args[0] if args else UNDEFINED
        if name == "map":
            return [_fn(interp, cb, x, i) for i, x in enumerate(target)]
        if name == "filter":
            return [x for i, x in enumerate(target) if truthy(_fn(interp, cb, x, i))]
        if name == "some":
            return any(truthy(_fn(interp, cb, x, i)) for i, x in enumerate(target))
        if name == "every":
            return all(truthy(_fn(interp, cb, x, i)) for i, x in enumerate(target))
        if name == "find":
            return next(
                (x for i, x in enumerate(target) if truthy(_fn(interp, cb, x, i))), UNDEFINED
            )
        if name == "findIndex":
            return next((i for i, x in enumerate(target) if truthy(_fn(interp, cb, x, i))), -1)
        if name == "forEach":
            for i, x in enumerate(target):
                _fn(interp, cb, x, i)
            return UNDEFINED
        if name == "reduce":
            items = list(target)
            if len(args) > 1:
                acc = args[1]
            elif items:
                acc = items.pop(0)
            else:
                raise ScriptError("reduce of empty array with no initial value")
            for i, x in enumerate(items):
                acc = _fn(interp, cb, acc, x, i)
            return acc
        if name == "includes":
            return any(strict_equal(x, cb) for x in target)
        if name == "indexOf":
            return next((i for i, x in enumerate(target) if strict_equal(x, cb)), -1)
        if name == "join":
            sep = "," if cb is UNDEFINED else to_js_string(cb)
            return sep.join("" if x is None or x is UNDEFINED else to_js_string(x) for x in target)
        if name == "slice":
            start = int(js_to_number(args[0])) if args else 0
            end = (
                int(js_to_number(args[1]))
                if len(args) > 1 and args[1] is not UNDEFINED
                else len(target)
            )
            return target[start:end]
        if name == "concat":
            out = list(target)
            for arg in args:
                out.extend(arg if isinstance(arg, list) else [arg])
            return out
        raise ScriptError(f"array method {name!r} is not supported")

    if name not in (
        "map", "filter", "some", "every", "find", "findIndex", "forEach", "reduce", "includes",
        "indexOf", "join", "slice", "concat",
    ):  # fmt: skip
        raise ScriptError(f"array method {name!r} is not supported")
    return Builtin(name, impl)


def string_method(target: str, name: str) -> Builtin:
    """String methods without regular expressions."""

    def arg(args: list[Any], index: int) -> str:
        return to_js_string(args[index]) if index < len(args) else ""

    table: dict[str, Callable[[list[Any]], Any]] = {
        "includes": lambda a: arg(a, 0) in target,
        "startsWith": lambda a: target.startswith(arg(a, 0)),
        "endsWith": lambda a: target.endswith(arg(a, 0)),
        "trim": lambda a: target.strip(),
        "toLowerCase": lambda a: target.lower(),
        "toUpperCase": lambda a: target.upper(),
        "slice": lambda a: target[
            int(js_to_number(a[0])) if a else 0 : int(js_to_number(a[1]))
            if len(a) > 1
            else len(target)
        ],
        "split": lambda a: target.split(arg(a, 0)) if a and arg(a, 0) else list(target),
        "indexOf": lambda a: target.find(arg(a, 0)),
        "padStart": lambda a: target.rjust(int(js_to_number(a[0])), arg(a, 1) or " ")[
            : max(len(target), int(js_to_number(a[0])))
        ],
    }
    if name not in table:
        raise ScriptError(f"string method {name!r} is not supported")
    method = table[name]
    return Builtin(name, lambda interp, a: method(a))


def _clamp(interp: Interpreter, args: list[Any]) -> Any:
    value, low, high = (interp.to_number(a) for a in (args + [UNDEFINED] * 3)[:3])
    if math.isnan(value):
        return value
    return normalize_number(min(max(value, low), high))


def _math(fn: Callable[..., float]) -> Builtin:
    def impl(interp: Interpreter, args: list[Any]) -> Any:
        numbers = [interp.to_number(a) for a in args]
        try:
            return normalize_number(fn(*numbers))
        except (ValueError, OverflowError, TypeError):
            return math.nan

    return Builtin(getattr(fn, "__name__", "math"), impl)


def _js_round(x: float) -> float:
    return float(math.floor(x + 0.5)) if math.isfinite(x) else x


def _has_own(interp: Interpreter, args: list[Any]) -> bool:
    if len(args) < 2 or not isinstance(args[0], dict):
        return False
    key = property_key(args[1])
    return key in args[0] and key not in PROTOTYPE_KEYS


def standard_globals() -> dict[str, Any]:
    """``Math``, ``_`` (clamp), ``Object``, ``Number``, ``String``, ``Boolean``, ``Array``."""
    math_ns = Namespace(
        "Math",
        {
            "abs": _math(abs),
            "floor": _math(lambda x: float(math.floor(x)) if math.isfinite(x) else x),
            "ceil": _math(lambda x: float(math.ceil(x)) if math.isfinite(x) else x),
            "round": _math(_js_round),
            "trunc": _math(lambda x: float(math.trunc(x)) if math.isfinite(x) else x),
            "sign": _math(lambda x: float((x > 0) - (x < 0))),
            "sqrt": _math(lambda x: math.sqrt(x) if x >= 0 else math.nan),
            "pow": _math(lambda a, b: float(a) ** float(b)),
            "min": _math(lambda *xs: min(xs) if xs else math.inf),
            "max": _math(lambda *xs: max(xs) if xs else -math.inf),
            "log": _math(lambda x: math.log(x) if x > 0 else (-math.inf if x == 0 else math.nan)),
            "PI": math.pi,
            "E": math.e,
        },
    )
    has_own = Namespace("hasOwnProperty", {"call": Builtin("call", _has_own)})
    return {
        "Math": math_ns,
        "_": Namespace("_", {"clamp": Builtin("clamp", _clamp)}),
        "Object": Namespace(
            "Object",
            {
                "keys": Builtin(
                    "keys", lambda i, a: list(a[0]) if a and isinstance(a[0], dict) else []
                ),
                "values": Builtin(
                    "values",
                    lambda i, a: list(a[0].values()) if a and isinstance(a[0], dict) else [],
                ),
                "entries": Builtin(
                    "entries",
                    lambda i, a: (
                        [[k, v] for k, v in a[0].items()] if a and isinstance(a[0], dict) else []
                    ),
                ),
                "prototype": Namespace("Object.prototype", {"hasOwnProperty": has_own}),
            },
        ),
        "Number": Builtin("Number", lambda i, a: normalize_number(i.to_number(a[0]) if a else 0)),
        "String": Builtin("String", lambda i, a: to_js_string(a[0]) if a else ""),
        "Boolean": Builtin("Boolean", lambda i, a: truthy(a[0]) if a else False),
        "Array": Namespace(
            "Array",
            {"isArray": Builtin("isArray", lambda i, a: bool(a) and isinstance(a[0], list))},
        ),
        "isNaN": Builtin("isNaN", lambda i, a: math.isnan(i.to_number(a[0] if a else UNDEFINED))),
        "Infinity": math.inf,
        "NaN": math.nan,
    }
