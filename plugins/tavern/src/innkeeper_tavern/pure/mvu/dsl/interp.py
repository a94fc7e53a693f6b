"""The interpreter of declaration scripts: evaluates the tuple AST of :mod:`.syntax`.

Its values and their helpers are in :mod:`.runtime`, the standard globals and the array/string
methods in :mod:`.builtins`.

Values are JSON values, :data:`UNDEFINED`, interpreter functions, built-ins and namespaces (``z``,
``Math``, ``_``, ``Object``, ...). Nothing reaches Python objects, modules, files or the host.
Every node evaluated charges the shared :class:`~innkeeper_tavern.pure.mvu.limits.Budget`; calls are
limited in depth and ``for ... of`` loops to :data:`MAX_LOOP_ITEMS` items
(docs/contract/mvu-dsl.md#declarations).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Final

from innkeeper_tavern.pure.mvu.jsvalue import (
    UNDEFINED,
    is_number,
    js_to_number,
    normalize_number,
    to_js_string,
)
from innkeeper_tavern.pure.mvu.limits import Budget, MvuBudgetError
from innkeeper_tavern.pure.mvu.paths import PROTOTYPE_KEYS, array_index

from .builtins import _to_fixed, array_method, string_method
from .runtime import (
    MAX_LOOP_ITEMS,
    Builtin,
    JsFunction,
    Namespace,
    Scope,
    ScriptError,
    describe,
    is_json_scalar,
    loose_equal,
    property_key,
    set_member,
    strict_equal,
    truthy,
    typeof,
)
from .syntax import Node

#: Nested interpreter calls, function → transform → function ... (execution budget,
#: docs/contract/mvu-dsl.md#declarations).
MAX_CALL_DEPTH: Final = 64


class _Return(Exception):
    def __init__(self, value: Any) -> None:
        self.value = value


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
        # read them but never write them (immutable captures:
        # docs/contract/mvu-dsl.md#compatibility).
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
