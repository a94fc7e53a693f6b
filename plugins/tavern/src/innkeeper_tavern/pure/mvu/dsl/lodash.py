"""The lodash subset of interpreter version 3 (``_.pickBy``, ``_.clamp``, ``_(x).values()`` ...).

Real MVU card schemas (the MVU + mvu_zod template) call lodash inside transforms and refinements:
``_.clamp`` on every bounded number, ``_.pickBy(d, ({数量}) => 数量 > 0)`` to clean an inventory,
``_(data.子任务).values().every(...)`` in a derived field. This module implements the functions
listed in docs/mvu.md "Schema declarations" as interpreter built-ins over JSON values: callbacks
run through the interpreter (each call charges the shared budget), iteratees may be a function,
a property name or a ``{key: value}`` matcher, writes (``set``, ``merge``) refuse the declaration's
captured (frozen) values, and nothing reaches host objects. Versions 1 and 2 keep ``_`` =
``{clamp}``.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from typing import Any, Final

from innkeeper_tavern.pure.mvu.jsvalue import (
    UNDEFINED,
    clone,
    deep_equal,
    normalize_number,
    to_js_string,
)
from innkeeper_tavern.pure.mvu.paths import PROTOTYPE_KEYS

from .builtins import _clamp, _js_round
from .interp import Interpreter
from .runtime import (
    Builtin,
    JsFunction,
    Namespace,
    ScriptError,
    set_member,
    strict_equal,
    truthy,
)

_PATH_PART: Final = re.compile(r"[^.[\]]+")

Impl = Callable[[Interpreter, list[Any]], Any]


def _arg(args: list[Any], index: int) -> Any:
    return args[index] if index < len(args) else UNDEFINED


def _iteratee(interp: Interpreter, callback: Any) -> Callable[[Any, Any, Any], Any]:
    """lodash's iteratee shorthands: a function, a property name, a matcher or identity."""
    if isinstance(callback, JsFunction | Builtin):
        return lambda value, key, coll: interp.call(callback, [value, key, coll])
    if isinstance(callback, str):
        return lambda value, key, coll: _get(interp, value, callback, UNDEFINED)
    if isinstance(callback, dict):
        wanted = callback

        def matches(value: Any, key: Any, coll: Any) -> bool:
            interp.budget.charge()
            return isinstance(value, dict) and all(
                deep_equal(value.get(k, UNDEFINED), v) for k, v in wanted.items()
            )

        return matches
    if callback is UNDEFINED or callback is None:
        return lambda value, key, coll: value
    raise ScriptError("a lodash iteratee is a function, a property name or an object")


def _pairs(coll: Any) -> list[tuple[Any, Any]]:
    if isinstance(coll, list):
        return list(enumerate(coll))
    if isinstance(coll, dict):
        return list(coll.items())
    if isinstance(coll, str):
        return list(enumerate(coll))
    return []


def _path(path: Any) -> list[str]:
    if isinstance(path, list):
        return [to_js_string(p) for p in path]
    text = to_js_string(path)
    parts = _PATH_PART.findall(text)
    return [p.strip("'\"") for p in parts]


def _get(interp: Interpreter, obj: Any, path: Any, default: Any) -> Any:
    value = obj
    for part in _path(path):
        interp.budget.charge()
        if part in PROTOTYPE_KEYS:
            return default
        if isinstance(value, dict):
            value = value.get(part, UNDEFINED)
        elif isinstance(value, list) and part.isdigit():
            index = int(part)
            value = value[index] if index < len(value) else UNDEFINED
        else:
            return default
        if value is UNDEFINED:
            return default
    return value


def _writable(interp: Interpreter, container: Any) -> None:
    if id(container) in interp.frozen:
        raise ScriptError("captured values are read-only")


def _set(interp: Interpreter, args: list[Any]) -> Any:
    obj, path, value = _arg(args, 0), _arg(args, 1), _arg(args, 2)
    if not isinstance(obj, dict | list):
        return obj
    parts = _path(path)
    if not parts:
        return obj
    target = obj
    for index, part in enumerate(parts[:-1]):
        interp.budget.charge()
        _writable(interp, target)
        nxt = target.get(part) if isinstance(target, dict) else None
        if isinstance(target, list) and part.isdigit() and int(part) < len(target):
            nxt = target[int(part)]
        if not isinstance(nxt, dict | list):
            nxt = [] if parts[index + 1].isdigit() else {}
            set_member(target, part, nxt)
        target = nxt
    _writable(interp, target)
    set_member(target, parts[-1], value)
    return obj


def _merge_into(interp: Interpreter, target: dict[str, Any], source: Any) -> None:
    if not isinstance(source, dict):
        return
    for key, value in source.items():
        interp.budget.charge()
        if key in PROTOTYPE_KEYS or value is UNDEFINED:
            continue
        current = target.get(key)
        if isinstance(value, dict) and isinstance(current, dict):
            _writable(interp, current)
            _merge_into(interp, current, value)
        else:
            target[key] = clone(value)


def _merge(interp: Interpreter, args: list[Any]) -> Any:
    target = _arg(args, 0)
    if not isinstance(target, dict):
        return target
    _writable(interp, target)
    for source in args[1:]:
        _merge_into(interp, target, source)
    return target


def _number(interp: Interpreter, value: Any) -> float | int:
    return interp.to_number(value)


def _compare(a: Any, b: Any) -> int:
    """Ascending order of sort keys: numbers, then strings, then the rest (lodash puts
    ``undefined``/``NaN`` last)."""

    def rank(v: Any) -> tuple[int, Any]:
        if isinstance(v, bool):
            return (0, int(v))
        if isinstance(v, int | float):
            return (0, v) if not math.isnan(v) else (3, 0)
        if isinstance(v, str):
            return (1, v)
        if v is UNDEFINED:
            return (4, 0)
        return (2, 0)

    ra, rb = rank(a), rank(b)
    return (ra > rb) - (ra < rb)


def _order_by(interp: Interpreter, args: list[Any]) -> Any:
    coll, iteratees, orders = _arg(args, 0), _arg(args, 1), _arg(args, 2)
    if not isinstance(iteratees, list):
        iteratees = [iteratees]
    if not isinstance(orders, list):
        orders = [orders] * len(iteratees) if isinstance(orders, str) else []
    fns = [_iteratee(interp, i) for i in iteratees]
    keyed = [([fn(v, k, coll) for fn in fns], v) for k, v in _pairs(coll)]

    def cmp(x: tuple[list[Any], Any], y: tuple[list[Any], Any]) -> int:
        for index, (a, b) in enumerate(zip(x[0], y[0], strict=True)):
            result = _compare(a, b)
            if result:
                desc = index < len(orders) and orders[index] == "desc"
                return -result if desc else result
        return 0

    return [v for _, v in sorted(keyed, key=functools.cmp_to_key(cmp))]


def _sort_by(interp: Interpreter, args: list[Any]) -> Any:
    return _order_by(interp, [_arg(args, 0), _arg(args, 1), []])


def _uniq(interp: Interpreter, args: list[Any]) -> Any:
    out: list[Any] = []
    for value in _arg(args, 0) if isinstance(_arg(args, 0), list) else []:
        interp.budget.charge()
        if not any(strict_equal(value, seen) for seen in out):
            out.append(value)
    return out


def _includes(interp: Interpreter, args: list[Any]) -> bool:
    coll, value = _arg(args, 0), _arg(args, 1)
    if isinstance(coll, str):
        return to_js_string(value) in coll
    return any(strict_equal(v, value) for _, v in _pairs(coll))


def _size(interp: Interpreter, args: list[Any]) -> int:
    coll = _arg(args, 0)
    return len(coll) if isinstance(coll, list | dict | str) else 0


def _is_empty(interp: Interpreter, args: list[Any]) -> bool:
    coll = _arg(args, 0)
    return len(coll) == 0 if isinstance(coll, list | dict | str) else True


def _precise(rounder: Callable[[float], float]) -> Impl:
    def impl(interp: Interpreter, args: list[Any]) -> Any:
        number = _number(interp, _arg(args, 0))
        precision = int(_number(interp, _arg(args, 1))) if len(args) > 1 else 0
        if not math.isfinite(number):
            return number
        factor = 10.0**precision
        return normalize_number(rounder(number * factor) / factor)

    return impl


def _extreme(pick: Callable[..., Any], by: bool) -> Impl:
    def impl(interp: Interpreter, args: list[Any]) -> Any:
        coll = _arg(args, 0)
        if not isinstance(coll, list) or not coll:
            return UNDEFINED
        fn = _iteratee(interp, _arg(args, 1) if by else UNDEFINED)
        keyed = [(fn(v, k, coll), k) for k, v in enumerate(coll)]
        keyed = [(key, k) for key, k in keyed if isinstance(key, int | float | str)]
        if not keyed:
            return UNDEFINED
        return coll[pick(keyed, key=lambda item: item[0])[1]]

    return impl


def _sum_by(by: bool) -> Impl:
    def impl(interp: Interpreter, args: list[Any]) -> Any:
        coll = _arg(args, 0)
        fn = _iteratee(interp, _arg(args, 1) if by else UNDEFINED)
        total: float = 0
        for k, v in _pairs(coll) if isinstance(coll, list) else []:
            value = fn(v, k, coll)
            if value is not UNDEFINED:
                total += _number(interp, value)
        return normalize_number(total)

    return impl


def _collection(kind: str) -> Impl:
    """``filter``, ``map``, ``find``, ``some``, ``every``, ``pickBy``, ``omitBy``,
    ``mapValues``: one callback per member, in order."""

    def impl(interp: Interpreter, args: list[Any]) -> Any:
        coll = _arg(args, 0)
        fn = _iteratee(interp, _arg(args, 1))
        pairs = _pairs(coll)
        if kind == "filter":
            return [v for k, v in pairs if truthy(fn(v, k, coll))]
        if kind == "map":
            return [fn(v, k, coll) for k, v in pairs]
        if kind == "find":
            return next((v for k, v in pairs if truthy(fn(v, k, coll))), UNDEFINED)
        if kind == "some":
            return any(truthy(fn(v, k, coll)) for k, v in pairs)
        if kind == "every":
            return all(truthy(fn(v, k, coll)) for k, v in pairs)
        if not isinstance(coll, dict):
            return {}
        if kind == "pickBy":
            return {k: v for k, v in pairs if truthy(fn(v, k, coll))}
        if kind == "omitBy":
            return {k: v for k, v in pairs if not truthy(fn(v, k, coll))}
        return {k: fn(v, k, coll) for k, v in pairs}  # mapValues

    return impl


def _reduce(interp: Interpreter, args: list[Any]) -> Any:
    coll, callback = _arg(args, 0), _arg(args, 1)
    pairs = _pairs(coll)
    if len(args) > 2:
        acc = args[2]
    elif pairs:
        acc = pairs.pop(0)[1]
    else:
        return UNDEFINED
    for k, v in pairs:
        acc = interp.call(callback, [acc, v, k, coll])
    return acc


def _keys_of(pick: bool) -> Impl:
    def impl(interp: Interpreter, args: list[Any]) -> Any:
        obj = _arg(args, 0)
        names: set[str] = set()
        for arg in args[1:]:
            names.update(to_js_string(a) for a in (arg if isinstance(arg, list) else [arg]))
        if not isinstance(obj, dict):
            return {}
        return {k: v for k, v in obj.items() if (k in names) == pick}

    return impl


def _is(test: Callable[[Any], bool]) -> Impl:
    return lambda interp, args: test(_arg(args, 0))


def _plain(fn: Callable[[Any], Any]) -> Impl:
    return lambda interp, args: fn(_arg(args, 0))


def _array(fn: Callable[[list[Any]], Any]) -> Impl:
    """A function of an array (anything else counts as ``[]``)."""

    def impl(interp: Interpreter, args: list[Any]) -> Any:
        coll = _arg(args, 0)
        return fn(coll if isinstance(coll, list) else [])

    return impl


def _take(interp: Interpreter, args: list[Any]) -> Any:
    coll = _arg(args, 0)
    count = int(_number(interp, _arg(args, 1))) if len(args) > 1 else 1
    return list(coll[: max(count, 0)]) if isinstance(coll, list) else []


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


#: The functions ``_`` offers in interpreter version 3 (documented in docs/mvu.md).
FUNCTIONS: Final[dict[str, Impl]] = {
    "clamp": _clamp,
    "round": _precise(_js_round),
    "floor": _precise(math.floor),
    "ceil": _precise(math.ceil),
    "sum": _sum_by(False),
    "sumBy": _sum_by(True),
    "max": _extreme(max, False),
    "min": _extreme(min, False),
    "maxBy": _extreme(max, True),
    "minBy": _extreme(min, True),
    "filter": _collection("filter"),
    "map": _collection("map"),
    "find": _collection("find"),
    "some": _collection("some"),
    "every": _collection("every"),
    "pickBy": _collection("pickBy"),
    "omitBy": _collection("omitBy"),
    "mapValues": _collection("mapValues"),
    "reduce": _reduce,
    "sortBy": _sort_by,
    "orderBy": _order_by,
    "uniq": _uniq,
    "take": _take,
    "head": _array(lambda xs: xs[0] if xs else UNDEFINED),
    "last": _array(lambda xs: xs[-1] if xs else UNDEFINED),
    "compact": _array(lambda xs: [v for v in xs if truthy(v)]),
    "flatten": _array(lambda xs: [x for v in xs for x in (v if isinstance(v, list) else [v])]),
    "keys": lambda i, a: [str(k) for k, _ in _pairs(_arg(a, 0))],
    "values": lambda i, a: [v for _, v in _pairs(_arg(a, 0))],
    "entries": lambda i, a: [[str(k), v] for k, v in _pairs(_arg(a, 0))],
    "toPairs": lambda i, a: [[str(k), v] for k, v in _pairs(_arg(a, 0))],
    "pick": _keys_of(True),
    "omit": _keys_of(False),
    "has": lambda i, a: _get(i, _arg(a, 0), _arg(a, 1), UNDEFINED) is not UNDEFINED,
    "get": lambda i, a: _get(i, _arg(a, 0), _arg(a, 1), _arg(a, 2)),
    "set": _set,
    "merge": _merge,
    "cloneDeep": _plain(clone),
    "isEqual": lambda i, a: deep_equal(_arg(a, 0), _arg(a, 1)),
    "includes": _includes,
    "size": _size,
    "isEmpty": _is_empty,
    "isNumber": _is(_is_number),
    "isFinite": _is(lambda v: _is_number(v) and math.isfinite(v)),
    "isInteger": _is(lambda v: _is_number(v) and math.isfinite(v) and float(v).is_integer()),
    "isString": _is(lambda v: isinstance(v, str)),
    "isBoolean": _is(lambda v: isinstance(v, bool)),
    "isArray": _is(lambda v: isinstance(v, list)),
    "isPlainObject": _is(lambda v: isinstance(v, dict)),
    "isObject": _is(lambda v: isinstance(v, dict | list | JsFunction | Builtin)),
    "isNil": _is(lambda v: v is None or v is UNDEFINED),
    "isNull": _is(lambda v: v is None),
    "isUndefined": _is(lambda v: v is UNDEFINED),
    "toNumber": lambda i, a: normalize_number(_number(i, _arg(a, 0))),
    "toString": lambda i, a: "" if _arg(a, 0) in (None, UNDEFINED) else to_js_string(_arg(a, 0)),
}


def _chain(value: Any) -> Namespace:
    """``_(value)``: every function with ``value`` first; array/object results chain on,
    others are returned as they are (lodash's implicit chain); ``.value()`` unwraps."""
    members: dict[str, Any] = {"value": Builtin("value", lambda i, a: value)}
    for name, impl in FUNCTIONS.items():

        def bound(interp: Interpreter, args: list[Any], impl: Impl = impl) -> Any:
            result = impl(interp, [value, *args])
            return _chain(result) if isinstance(result, list | dict) else result

        members[name] = Builtin(name, bound)
    return Namespace("_(...)", members)


def lodash_namespace() -> Namespace:
    """The ``_`` of interpreter version 3."""
    members = {name: Builtin(name, impl) for name, impl in FUNCTIONS.items()}
    return Namespace("_", members, invoke=lambda interp, args: _chain(_arg(args, 0)))
