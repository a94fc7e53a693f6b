"""The interpreter of declaration scripts: evaluates the tuple AST of :mod:`.syntax`.

Values are JSON values, :data:`UNDEFINED`, interpreter functions, built-ins and namespaces (``z``,
``Math``, ``_``, ``Object``, ...). Nothing reaches Python objects, modules, files or the host.
Every node evaluated charges the shared :class:`~innkeeper_tavern.mvu.limits.Budget`; calls are
limited in depth and ``for ... of`` loops to :data:`MAX_LOOP_ITEMS` items (spec/MVU.md
"Compatibility and verification": "Declarations may iterate at most 1000 array items").
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from innkeeper_tavern.mvu.engine import js_to_number
from innkeeper_tavern.mvu.jsvalue import (
    UNDEFINED,
    Json,
    is_number,
    normalize_number,
    to_js_string,
)
from innkeeper_tavern.mvu.limits import Budget, MvuBudgetError, MvuError
from innkeeper_tavern.mvu.paths import PROTOTYPE_KEYS, array_index

from .syntax import Node

#: Items one ``for (const x of array)`` loop may visit.
MAX_LOOP_ITEMS: Final = 1000
#: Nested interpreter calls, function → transform → function ... (execution budget, spec/MVU.md
#: "Compatibility and verification": "static syntax and execution budgets").
MAX_CALL_DEPTH: Final = 64


class ScriptError(MvuError):
    """A declaration function failed (a JavaScript ``TypeError``/``ReferenceError`` analogue)."""

    code = "MVU_SCHEMA_RUNTIME"


class _Return(Exception):
    def __init__(self, value: Any) -> None:
        self.value = value


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


class Interpreter:
    """Evaluates declaration ASTs. ``member_hook`` resolves members of non-JSON values."""

    def __init__(
        self,
        globals_: dict[str, Any],
        budget: Budget,
        member_hook: Callable[[Any, str], Any] | None = None,
        regex_factory: Callable[[str, str], Any] | None = None,
    ) -> None:
        self.globals = Scope(None, function_root=True)
        for name, value in globals_.items():
            self.globals.names[name] = [value, False]
        self.budget = budget
        self.member_hook = member_hook
        self.regex_factory = regex_factory
        self.depth = 0
        # Containers reachable from the globals once the declaration has run: functions may
        # read them but never write them (spec/MVU.md: "immutable lexical captures").
        self.frozen: frozenset[int] = frozenset()

    def freeze(self) -> None:
        """Make every JSON container reachable from the globals read-only."""
        ids: set[int] = set()
        stack = [slot[0] for slot in self.globals.names.values()]
        while stack:
            node = stack.pop()
            if isinstance(node, dict | list) and id(node) not in ids:
                ids.add(id(node))
                stack.extend(node.values() if isinstance(node, dict) else node)
        self.frozen = frozenset(ids)

    def fork(self, budget: Budget) -> Interpreter:
        """An interpreter over the same (frozen) globals with its own budget and call depth,
        so one compiled declaration can validate for several callers."""
        other = Interpreter.__new__(Interpreter)
        other.globals = self.globals
        other.budget = budget
        other.member_hook = self.member_hook
        other.regex_factory = self.regex_factory
        other.depth = 0
        other.frozen = self.frozen
        return other

    # ---------------------------------------------------------------- statements
    def run_program(self, program: Node, on_statement: Callable[[Node], bool]) -> None:
        """Run top-level statements; ``on_statement`` may claim one (returns True)."""
        for statement in program[1]:
            if not on_statement(statement):
                self.execute(statement, self.globals)

    def execute(self, node: Node, scope: Scope) -> None:
        self.budget.charge()
        kind = node[0]
        if kind == "expr":
            self.evaluate(node[1], scope)
        elif kind == "let":
            mutable = node[1] == "let"
            for name, init in node[2]:
                value = UNDEFINED if init is None else self.evaluate(init, scope)
                self.bind(name, value, scope, mutable, declared=True)
        elif kind == "block":
            inner = Scope(scope)
            for statement in node[1]:
                self.execute(statement, inner)
        elif kind == "return":
            raise _Return(UNDEFINED if node[1] is None else self.evaluate(node[1], scope))
        elif kind == "if":
            if truthy(self.evaluate(node[1], scope)):
                self.execute(node[2], Scope(scope))
            elif node[3] is not None:
                self.execute(node[3], Scope(scope))
        elif kind == "forof":
            iterable = self.evaluate(node[2], scope)
            if not isinstance(iterable, list):
                raise ScriptError("for...of needs an array")
            if len(iterable) > MAX_LOOP_ITEMS:
                raise MvuBudgetError(f"a loop may visit at most {MAX_LOOP_ITEMS} items")
            for item in list(iterable):
                inner = Scope(scope)
                self.bind(node[1], item, inner, False)
                self.execute(node[3], inner)
        elif kind == "import":
            raise ScriptError("imports are only allowed at the top level")
        else:  # pragma: no cover - the parser only produces the kinds above
            raise ScriptError(f"unsupported statement {kind}")

    # ---------------------------------------------------------------- expressions
    def evaluate(self, node: Node, scope: Scope) -> Any:
        self.budget.charge()
        kind = node[0]
        if kind == "lit":
            value = node[1]
            return normalize_number(value) if isinstance(value, float) else value
        if kind == "undefined":
            return UNDEFINED
        if kind == "name":
            slot = scope.lookup(node[1])
            if slot is None:
                raise ScriptError(f"{node[1]} is not defined")
            return slot[0]
        if kind == "template":
            return "".join(
                part if isinstance(part, str) else to_js_string(self.evaluate(part, scope))
                for part in node[1]
            )
        if kind == "array":
            items: list[Any] = []
            for item in node[1]:
                if item[0] == "spread":
                    spread = self.evaluate(item[1], scope)
                    if not isinstance(spread, list):
                        raise ScriptError("only arrays can be spread into arrays")
                    items.extend(spread)
                else:
                    items.append(self.evaluate(item, scope))
            return items
        if kind == "object":
            return self.object_literal(node, scope)
        if kind == "function":
            return JsFunction(tuple(node[1]), node[2], scope, node[3])
        if kind == "member":
            target = self.evaluate(node[1], scope)
            if node[3] and (target is UNDEFINED or target is None):
                return UNDEFINED
            return self.get_member(target, self.evaluate(node[2], scope))
        if kind == "call":
            return self.call_expression(node, scope)
        if kind == "unary":
            return self.unary(node[1], self.evaluate(node[2], scope))
        if kind == "binary":
            return self.binary(node, scope)
        if kind == "cond":
            branch = node[2] if truthy(self.evaluate(node[1], scope)) else node[3]
            return self.evaluate(branch, scope)
        if kind == "assign":
            return self.assign(node, scope)
        if kind == "regex":
            if self.regex_factory is None:
                raise ScriptError("regular expressions are not available here")
            return self.regex_factory(node[1], node[2])
        raise ScriptError(f"unsupported expression {kind}")  # pragma: no cover

    def object_literal(self, node: Node, scope: Scope) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for entry in node[1]:
            if entry[0] == "spread":
                spread = self.evaluate(entry[1], scope)
                if isinstance(spread, dict):
                    out.update(spread)
                elif spread is not None and spread is not UNDEFINED:
                    raise ScriptError("only objects can be spread into objects")
                continue
            key = entry[1]
            if not isinstance(key, str):
                key = property_key(self.evaluate(key, scope))
            if key in PROTOTYPE_KEYS:
                raise ScriptError(f"the key {key!r} is reserved")
            out[key] = self.evaluate(entry[2], scope)
        return out

    def call_expression(self, node: Node, scope: Scope) -> Any:
        callee_node, arg_nodes, optional = node[1], node[2], node[3]
        callee = self.evaluate(callee_node, scope)
        if optional and (callee is UNDEFINED or callee is None):
            return UNDEFINED
        args = [self.evaluate(arg, scope) for arg in arg_nodes]
        return self.call(callee, args)

    def call(self, callee: Any, args: list[Any]) -> Any:
        """Call an interpreter function or built-in with ``args``."""
        self.depth += 1
        if self.depth > MAX_CALL_DEPTH:
            self.depth -= 1
            raise MvuBudgetError(f"calls nested deeper than {MAX_CALL_DEPTH}")
        try:
            if isinstance(callee, Builtin):
                return callee.fn(self, args)
            if isinstance(callee, Namespace) and callee.invoke is not None:
                return callee.invoke(self, args)
            if isinstance(callee, JsFunction):
                scope = Scope(callee.closure, function_root=True)
                for index, (name, default) in enumerate(callee.params):
                    value = args[index] if index < len(args) else UNDEFINED
                    if value is UNDEFINED and default is not None:
                        value = self.evaluate(default, scope)
                    self.bind(name, value, scope, True)
                try:
                    body = callee.body
                    if body[0] == "block":
                        for statement in body[1]:
                            self.execute(statement, scope)
                    else:
                        self.execute(body, scope)
                except _Return as ret:
                    return ret.value
                return UNDEFINED
            raise ScriptError(f"{describe(callee)} is not a function")
        finally:
            self.depth -= 1

    def bind(
        self, target: Any, value: Any, scope: Scope, mutable: bool, declared: bool = False
    ) -> None:
        """Bind a name or (interpreter version 3) an object/array pattern to ``value``."""
        if isinstance(target, str):
            if declared and target in scope.names:
                raise ScriptError(f"{target!r} is declared twice")
            scope.names[target] = [value, mutable]
            return
        self.budget.charge()
        if target[0] == "objpat":
            if value is UNDEFINED or value is None:
                raise ScriptError(f"cannot destructure {to_js_string(value)}")
            used: set[str] = set()
            for key, sub, default in target[1]:
                item = self.get_member(value, key)
                used.add(key)
                if item is UNDEFINED and default is not None:
                    item = self.evaluate(default, scope)
                self.bind(sub, item, scope, mutable, declared)
            if target[2] is not None:
                if not isinstance(value, dict):
                    raise ScriptError("only objects can be destructured with ...rest")
                rest = {k: v for k, v in value.items() if k not in used}
                self.bind(target[2], rest, scope, mutable, declared)
            return
        if not isinstance(value, list):
            raise ScriptError("only arrays can be destructured by position")
        for index, entry in enumerate(target[1]):
            if entry is None:
                continue
            sub, default = entry
            item = value[index] if index < len(value) else UNDEFINED
            if item is UNDEFINED and default is not None:
                item = self.evaluate(default, scope)
            self.bind(sub, item, scope, mutable, declared)
        if target[2] is not None:
            self.bind(target[2], list(value[len(target[1]) :]), scope, mutable, declared)

    def assign(self, node: Node, scope: Scope) -> Any:
        op, target, value_node = node[1], node[2], node[3]
        value = self.evaluate(value_node, scope)
        if target[0] == "name":
            slot = scope.lookup_local(target[1])
            if slot is None:
                raise ScriptError(f"cannot assign to {target[1]!r} (not a local variable)")
            if not slot[1]:
                raise ScriptError(f"cannot assign to constant {target[1]!r}")
            if op != "=":
                value = self.arith(op[0], slot[0], value)
            slot[0] = value
            return value
        container = self.evaluate(target[1], scope)
        key = self.evaluate(target[2], scope)
        if op != "=":
            value = self.arith(op[0], self.get_member(container, key), value)
        if id(container) in self.frozen:
            raise ScriptError("captured values are read-only")
        set_member(container, key, value)
        return value

    # ---------------------------------------------------------------- members
    def get_member(self, target: Any, key: Any) -> Any:
        name = property_key(key)
        if name in PROTOTYPE_KEYS and not isinstance(target, Namespace):
            raise ScriptError(f"the property {name!r} is not accessible")
        if isinstance(target, Namespace):
            if name not in target.members:
                raise ScriptError(f"{target.name}.{name} is not supported")
            return target.members[name]
        if isinstance(target, dict):
            return target.get(name, UNDEFINED)
        if isinstance(target, list):
            if name == "length":
                return len(target)
            index = array_index(name)
            if index is not None:
                return target[index] if index < len(target) else UNDEFINED
            return array_method(target, name)
        if isinstance(target, str):
            if name == "length":
                return len(target)
            index = array_index(name)
            if index is not None:
                return target[index] if index < len(target) else UNDEFINED
            return string_method(target, name)
        if is_number(target) and name == "toFixed":
            return Builtin("toFixed", lambda _i, a: _to_fixed(target, a))
        if target is UNDEFINED or target is None:
            raise ScriptError(f"cannot read {name!r} of {to_js_string(target)}")
        if self.member_hook is not None:
            return self.member_hook(target, name)
        raise ScriptError(f"{describe(target)} has no property {name!r}")

    # ---------------------------------------------------------------- operators
    def unary(self, op: str, value: Any) -> Any:
        if op == "!":
            return not truthy(value)
        if op == "typeof":
            return typeof(value)
        number = self.to_number(value)
        return normalize_number(-number if op == "-" else number)

    def to_number(self, value: Any) -> float | int:
        if isinstance(value, dict | list) or value is UNDEFINED:
            return math.nan if not isinstance(value, list) else js_to_number(value)
        if not is_json_scalar(value):
            raise ScriptError(f"{describe(value)} is not a number")
        return js_to_number(value)

    def binary(self, node: Node, scope: Scope) -> Any:
        op = node[1]
        left = self.evaluate(node[2], scope)
        if op == "&&":
            return self.evaluate(node[3], scope) if truthy(left) else left
        if op == "||":
            return left if truthy(left) else self.evaluate(node[3], scope)
        if op == "??":
            return self.evaluate(node[3], scope) if left is None or left is UNDEFINED else left
        right = self.evaluate(node[3], scope)
        if op in ("===", "!=="):
            same = strict_equal(left, right)
            return same if op == "===" else not same
        if op in ("==", "!="):
            same = loose_equal(left, right)
            return same if op == "==" else not same
        if op in ("<", ">", "<=", ">="):
            if isinstance(left, str) and isinstance(right, str):
                a: Any = left
                b: Any = right
            else:
                a, b = self.to_number(left), self.to_number(right)
                if math.isnan(a) or math.isnan(b):
                    return False
            return {"<": a < b, ">": a > b, "<=": a <= b, ">=": a >= b}[op]
        return self.arith(op, left, right)

    def arith(self, op: str, left: Any, right: Any) -> Any:
        if op == "+" and (
            isinstance(left, str)
            or isinstance(right, str)
            or isinstance(left, dict | list)
            or isinstance(right, dict | list)
        ):
            joined = to_js_string(left) + to_js_string(right)
            self.budget.charge(len(joined) // 64 + 1)
            return joined
        a, b = self.to_number(left), self.to_number(right)
        try:
            if op == "+":
                result: float = a + b
            elif op == "-":
                result = a - b
            elif op == "*":
                result = a * b
            elif op == "/":
                result = (
                    a / b
                    if b
                    else (
                        math.nan
                        if a == 0 or math.isnan(a)
                        else math.copysign(math.inf, a) * math.copysign(1, b)
                    )
                )
            elif op == "%":
                result = math.fmod(a, b) if b and math.isfinite(a) else math.nan
            elif op == "**":
                result = float(a) ** float(b)
                if isinstance(result, complex):
                    result = math.nan
            else:
                raise ScriptError(f"operator {op!r} is not supported")
        except OverflowError:
            result = math.inf
        except ZeroDivisionError:
            result = math.inf
        return normalize_number(result)


# -------------------------------------------------------------------- JS helpers


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
