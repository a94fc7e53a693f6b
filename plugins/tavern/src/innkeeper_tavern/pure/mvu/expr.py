"""A bounded evaluator for the two places where MVU would run code on an argument.

MVU evaluates an argument that looks like ``{...}``/``[...]`` as a *JavaScript* expression and
otherwise tries *mathjs* (``docs/mvu.md#command-values``). Neither is executed here. This module
parses a small expression language and computes it with explicit step and depth budgets:

* :func:`eval_js_literal` — object/array literals with JS syntax (unquoted keys, single quotes,
  trailing commas, ``undefined``/``NaN``/``Infinity``, hex and ``.5``/``5.`` numbers) and JS
  arithmetic inside them (``[1+1]`` is ``[2]``). No identifiers other than constants, no calls.
* :func:`eval_math` — mathjs-style arithmetic: ``+ - * / ^ %`` (postfix ``%`` is a percent),
  comparisons and ``and``/``or``/``not`` for conditions, ``? :``, the constants ``e pi tau phi``
  and a fixed set of finite functions (``sqrt``, ``log(x, base)``, ``round``, ``max`` ...),
  reachable bare or through ``math.``/``Math.``. Results are rounded to 12 significant digits.

Anything outside the language raises :class:`ExprError`, so the caller falls through to the next
parse step exactly as MVU does when mathjs throws. Deliberate differences
(docs/contract/mvu-dsl.md#not-equivalent: no complete mathjs, no Date arithmetic) are listed in
docs/mvu.md#deliberate-differences-from-mvu.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from typing import Final

from . import matrix
from .jsvalue import UNDEFINED, Json, is_number, normalize_number, round12, to_js_string
from .limits import MAX_EXPRESSION_CHARS, MAX_PARSE_DEPTH, Budget, MvuBudgetError


class ExprError(ValueError):
    """The text is not an expression of the supported language (not fatal)."""


_PUNCT: Final = (
    "===",
    "!==",
    "**",
    "==",
    "!=",
    "<=",
    ">=",
    "&&",
    "||",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    ",",
    ":",
    "?",
    ".",
    "+",
    "-",
    "*",
    "/",
    "%",
    "^",
    "<",
    ">",
    "!",
    ";",
    "=",
)

_ESCAPES: Final = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "b": "\b",
    "f": "\f",
    "v": "\v",
    "0": "\0",
}

# Token kinds: "num", "str", "id", "op", "end".
Token = tuple[str, object]


def _is_id_start(ch: str) -> bool:
    return ch.isalpha() or ch in "_$"


def _is_id_part(ch: str) -> bool:
    return ch.isalnum() or ch in "_$"


def _read_number(text: str, i: int) -> tuple[float, int]:
    n = len(text)
    if text.startswith(("0x", "0X"), i):
        j = i + 2
        while j < n and text[j] in "0123456789abcdefABCDEF":
            j += 1
        if j == i + 2:
            raise ExprError("empty hex literal")
        return float(int(text[i + 2 : j], 16)), j
    if text.startswith(("0o", "0O", "0b", "0B"), i):
        base = 8 if text[i + 1] in "oO" else 2
        digits = "01234567" if base == 8 else "01"
        j = i + 2
        while j < n and text[j] in digits:
            j += 1
        if j == i + 2:
            raise ExprError("empty literal")
        return float(int(text[i + 2 : j], base)), j
    j = i
    while j < n and text[j].isdigit() and text[j].isascii():
        j += 1
    if j < n and text[j] == ".":
        j += 1
        while j < n and text[j].isdigit() and text[j].isascii():
            j += 1
    if j < n and text[j] in "eE":
        k = j + 1
        if k < n and text[k] in "+-":
            k += 1
        if k < n and text[k].isdigit() and text[k].isascii():
            while k < n and text[k].isdigit() and text[k].isascii():
                k += 1
            j = k
    literal = text[i:j]
    if literal in (".", ""):
        raise ExprError("bad number")
    if j < n and _is_id_start(text[j]):
        raise ExprError("identifier directly after number")
    try:
        return float(literal), j
    except ValueError as exc:  # pragma: no cover - the scan only admits float syntax
        raise ExprError("bad number") from exc


def _read_string(text: str, i: int, *, js: bool) -> tuple[str, int]:
    quote = text[i]
    if quote == "`" and not js:
        raise ExprError("template literal")
    out: list[str] = []
    j = i + 1
    n = len(text)
    while j < n:
        ch = text[j]
        if ch == quote:
            return "".join(out), j + 1
        if ch == "\\":
            j += 1
            if j >= n:
                break
            esc = text[j]
            if esc == "u":
                hex_digits = text[j + 1 : j + 5]
                if len(hex_digits) != 4 or any(
                    c not in "0123456789abcdefABCDEF" for c in hex_digits
                ):
                    raise ExprError("bad unicode escape")
                out.append(chr(int(hex_digits, 16)))
                j += 5
                continue
            if esc == "x":
                hex_digits = text[j + 1 : j + 3]
                if len(hex_digits) != 2 or any(
                    c not in "0123456789abcdefABCDEF" for c in hex_digits
                ):
                    raise ExprError("bad hex escape")
                out.append(chr(int(hex_digits, 16)))
                j += 3
                continue
            if esc in "\r\n\u2028\u2029":
                # Line continuation.
                if esc == "\r" and j + 1 < n and text[j + 1] == "\n":
                    j += 1
                j += 1
                continue
            out.append(_ESCAPES.get(esc, esc))
            j += 1
            continue
        if ch == "$" and quote == "`" and j + 1 < n and text[j + 1] == "{":
            raise ExprError("template substitution")
        if ch in "\r\n" and quote != "`":
            raise ExprError("unterminated string")
        out.append(ch)
        j += 1
    raise ExprError("unterminated string")


def tokenize(
    text: str, *, js: bool, budget: Budget, max_chars: int = MAX_EXPRESSION_CHARS
) -> list[Token]:
    """Split ``text`` into tokens; JS mode also skips ``//`` and ``/* */`` comments."""
    if len(text) > max_chars:
        raise ExprError("expression too long")
    tokens: list[Token] = []
    i = 0
    n = len(text)
    while i < n:
        budget.charge()
        ch = text[i]
        if ch.isspace():
            i += 1
            continue
        if js and text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        if js and text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise ExprError("unterminated comment")
            i = end + 2
            continue
        if (ch.isdigit() and ch.isascii()) or (
            ch == "." and i + 1 < n and text[i + 1].isdigit() and text[i + 1].isascii()
        ):
            value, i = _read_number(text, i)
            tokens.append(("num", value))
            continue
        if ch in "'\"`":
            s, i = _read_string(text, i, js=js)
            tokens.append(("str", s))
            continue
        if _is_id_start(ch):
            j = i + 1
            while j < n and _is_id_part(text[j]):
                j += 1
            tokens.append(("id", text[i:j]))
            i = j
            continue
        for p in _PUNCT:
            if text.startswith(p, i):
                tokens.append(("op", p))
                i += len(p)
                break
        else:
            raise ExprError(f"unexpected character {ch!r}")
    tokens.append(("end", None))
    return tokens


# ---------------------------------------------------------------- math functions


def _num(value: Json) -> float:
    if not is_number(value):
        raise ExprError("not a number")
    return float(value)


def _flatten(args: list[Json]) -> list[float]:
    out: list[float] = []
    for arg in args:
        if isinstance(arg, list):
            out.extend(_flatten(arg))
        else:
            out.append(_num(arg))
    if not out:
        raise ExprError("no values")
    return out


def _round_half_away(x: float, digits: int = 0) -> float:
    if not math.isfinite(x):
        return x
    if not 0 <= digits <= 15:
        raise ExprError("bad digits")
    factor = 10.0**digits
    return math.copysign(math.floor(abs(x) * factor + 0.5) / factor, x)


def _log(x: float, base: float | None = None) -> float:
    if x < 0:
        raise ExprError("complex result")
    if x == 0:
        return -math.inf
    if base is None:
        return math.log(x)
    if base <= 0 or base == 1:
        raise ExprError("bad log base")
    return math.log(x) / math.log(base)


def _pow(a: float, b: float) -> float:
    try:
        result = a**b
    except ZeroDivisionError:
        return math.inf
    except OverflowError:
        return math.inf if a > 0 or b % 2 == 0 else -math.inf
    if isinstance(result, complex):
        raise ExprError("complex result")
    return float(result)


def _sqrt(x: float) -> float:
    if x < 0:
        raise ExprError("complex result")
    return math.sqrt(x)


def _safe(fn: Callable[[float], float]) -> Callable[[float], float]:
    def wrapped(x: float) -> float:
        try:
            return fn(x)
        except (ValueError, OverflowError) as exc:
            raise ExprError("domain error") from exc

    return wrapped


def _mod(a: float, b: float) -> float:
    if b == 0:
        return a  # mathjs: mod(x, 0) is x
    return a - b * math.floor(a / b)


def _std(values: list[float]) -> float:
    if len(values) < 2:
        return 0.0
    return statistics.stdev(values)


_UNARY: Final[dict[str, Callable[[float], float]]] = {
    "abs": abs,
    "ceil": lambda x: float(math.ceil(x)) if math.isfinite(x) else x,
    "floor": lambda x: float(math.floor(x)) if math.isfinite(x) else x,
    "fix": lambda x: float(math.trunc(x)) if math.isfinite(x) else x,
    "trunc": lambda x: float(math.trunc(x)) if math.isfinite(x) else x,
    "sqrt": _sqrt,
    "cbrt": lambda x: math.copysign(abs(x) ** (1.0 / 3.0), x),
    "exp": _safe(math.exp),
    "log10": lambda x: _log(x, 10.0),
    "log2": lambda x: _log(x, 2.0),
    "sin": _safe(math.sin),
    "cos": _safe(math.cos),
    "tan": _safe(math.tan),
    "asin": _safe(math.asin),
    "acos": _safe(math.acos),
    "atan": _safe(math.atan),
    "sign": lambda x: float((x > 0) - (x < 0)) if not math.isnan(x) else x,
}

_AGGREGATE: Final[dict[str, Callable[[list[float]], float]]] = {
    "max": max,
    "min": min,
    "sum": math.fsum,
    "mean": statistics.fmean,
    "median": statistics.median,
    "std": _std,
}

_CONSTANTS: Final[dict[str, float]] = {
    "pi": math.pi,
    "PI": math.pi,
    "e": math.e,
    "E": math.e,
    "tau": math.tau,
    "phi": (1 + math.sqrt(5)) / 2,
    "Infinity": math.inf,
    "NaN": math.nan,
    "LN2": math.log(2),
    "LN10": math.log(10),
    "LOG2E": 1 / math.log(2),
    "LOG10E": 1 / math.log(10),
    "SQRT2": math.sqrt(2),
    "SQRT1_2": math.sqrt(0.5),
}

_FUNCTION_NAMES: Final = frozenset(
    [*_UNARY, *_AGGREGATE, "round", "log", "pow", "atan2", "mod", "hypot"]
)


def _call(name: str, args: list[Json]) -> Json:
    if name in _AGGREGATE:
        return _AGGREGATE[name](_flatten(args))
    if name in _UNARY:
        if len(args) != 1:
            raise ExprError(f"{name} takes one argument")
        return _UNARY[name](_num(args[0]))
    if name == "round":
        if len(args) == 1:
            return _round_half_away(_num(args[0]))
        if len(args) == 2:
            digits = _num(args[1])
            if not digits.is_integer():
                raise ExprError("bad digits")
            return _round_half_away(_num(args[0]), int(digits))
    elif name == "log":
        if len(args) == 1:
            return _log(_num(args[0]))
        if len(args) == 2:
            return _log(_num(args[0]), _num(args[1]))
    elif name == "pow":
        if len(args) == 2:
            return _pow(_num(args[0]), _num(args[1]))
    elif name == "atan2":
        if len(args) == 2:
            return math.atan2(_num(args[0]), _num(args[1]))
    elif name == "mod":
        if len(args) == 2:
            return _mod(_num(args[0]), _num(args[1]))
    elif name == "hypot":
        return math.hypot(*_flatten(args))
    raise ExprError(f"bad call of {name}")


# ---------------------------------------------------------------- parser/evaluator


class _Parser:
    """Recursive descent over the token list, evaluating as it goes (the language is pure)."""

    def __init__(
        self, tokens: list[Token], *, js: bool, budget: Budget, mathjs: bool = False
    ) -> None:
        self.tokens = tokens
        self.pos = 0
        self.js = js
        #: Interpreter version 3: assignment, matrices and one-based indexing (:mod:`.matrix`).
        self.mathjs = mathjs and not js
        self.budget = budget
        self.depth = 0

    # -- helpers
    def peek(self, offset: int = 0) -> Token:
        return self.tokens[min(self.pos + offset, len(self.tokens) - 1)]

    def take(self) -> Token:
        tok = self.tokens[self.pos]
        self.pos += 1
        return tok

    def at(self, op: str) -> bool:
        kind, value = self.peek()
        return kind == "op" and value == op

    def at_word(self, word: str) -> bool:
        kind, value = self.peek()
        return kind == "id" and value == word and not self.js

    def expect(self, op: str) -> None:
        if not self.at(op):
            raise ExprError(f"expected {op!r}")
        self.pos += 1

    def enter(self) -> None:
        self.depth += 1
        self.budget.charge()
        if self.depth > MAX_PARSE_DEPTH:
            raise ExprError("expression nested too deeply")

    def leave(self) -> None:
        self.depth -= 1

    # -- grammar
    def parse(self) -> Json:
        if self.mathjs:
            # mathjs assignment expressions (``x = 5`` evaluates to 5; nothing is kept).
            while self.peek()[0] == "id" and self.peek(1) == ("op", "="):
                self.take()
                self.take()
        value = self.expression()
        if self.peek()[0] != "end":
            raise ExprError("trailing input")
        return value

    def expression(self) -> Json:
        self.enter()
        try:
            cond = self.logical_or()
            if self.at("?"):
                self.take()
                then = self.expression()
                self.expect(":")
                other = self.expression()
                return then if self._truthy(cond) else other
            return cond
        finally:
            self.leave()

    @staticmethod
    def _truthy(value: Json) -> bool:
        if isinstance(value, float) and math.isnan(value):
            return False
        if value is UNDEFINED or value is None:
            return False
        if isinstance(value, list | dict):
            return True
        return bool(value)

    def logical_or(self) -> Json:
        left = self.logical_and()
        while self.at("||") or self.at_word("or"):
            self.take()
            right = self.logical_and()
            left = left if self._truthy(left) else right
            if not self.js:
                left = self._truthy(left)
        return left

    def logical_and(self) -> Json:
        left = self.comparison()
        while self.at("&&") or self.at_word("and"):
            self.take()
            right = self.comparison()
            left = right if self._truthy(left) else left
            if not self.js:
                left = self._truthy(left)
        return left

    def comparison(self) -> Json:
        left = self.additive()
        while True:
            kind, op = self.peek()
            if kind != "op" or op not in ("<", ">", "<=", ">=", "==", "!=", "===", "!=="):
                return left
            if not self.js and op in ("===", "!=="):
                raise ExprError("unsupported operator")
            self.take()
            right = self.additive()
            if not (is_number(left) and is_number(right)):
                if op in ("==", "===", "!=", "!==") and type(left) is type(right):
                    equal = left == right
                    left = equal if op in ("==", "===") else not equal
                    continue
                raise ExprError("comparison of non-numbers")
            a, b = float(left), float(right)
            left = {
                "<": a < b,
                ">": a > b,
                "<=": a <= b,
                ">=": a >= b,
                "==": a == b,
                "===": a == b,
                "!=": a != b,
                "!==": a != b,
            }[str(op)]

    def additive(self) -> Json:
        left = self.multiplicative()
        while self.at("+") or self.at("-"):
            op = self.take()[1]
            right = self.multiplicative()
            self.budget.charge()
            if op == "+" and self.js and (isinstance(left, str) or isinstance(right, str)):
                if not all(isinstance(v, str) or is_number(v) for v in (left, right)):
                    raise ExprError("unsupported concatenation")
                joined = to_js_string(left) + to_js_string(right)
                if len(joined) > MAX_EXPRESSION_CHARS:
                    raise ExprError("string too long")
                left = joined
                continue
            if self.mathjs and (isinstance(left, list) or isinstance(right, list)):
                add = op == "+"
                left = matrix.elementwise(
                    (lambda x, y: x + y) if add else (lambda x, y: x - y), left, right, self.budget
                )
                continue
            a, b = self._operands(left, right)
            left = a + b if op == "+" else a - b
        return left

    def _operands(self, left: Json, right: Json) -> tuple[float, float]:
        if not (is_number(left) and is_number(right)):
            raise ExprError("arithmetic on non-numbers")
        return float(left), float(right)

    def multiplicative(self) -> Json:
        left = self.unary()
        while True:
            if self.at("*") or self.at("/"):
                op = self.take()[1]
                right = self.unary()
                if self.mathjs and (isinstance(left, list) or isinstance(right, list)):
                    if op == "*":
                        left = matrix.multiply(left, right, self.budget)
                    elif is_number(right):
                        left = matrix.elementwise(self._divide, left, right, self.budget)
                    else:
                        raise ExprError("division by a matrix")
                    continue
                a, b = self._operands(left, right)
                left = a * b if op == "*" else self._divide(a, b)
            elif self.at("%") and (self.js or self._operand_follows(1)):
                self.take()
                right = self.unary()
                a, b = self._operands(left, right)
                if self.js:
                    left = math.fmod(a, b) if b != 0 and math.isfinite(a) else math.nan
                else:
                    left = _mod(a, b)
            else:
                return left

    @staticmethod
    def _divide(a: float, b: float) -> float:
        if b == 0:
            if a == 0 or math.isnan(a):
                return math.nan
            return math.copysign(math.inf, a) * math.copysign(1.0, b)
        return a / b

    def _operand_follows(self, offset: int) -> bool:
        kind, value = self.peek(offset)
        if kind in ("num", "id", "str"):
            return True
        return kind == "op" and value in ("(", "[", "-", "+")

    def unary(self) -> Json:
        self.enter()
        try:
            if self.at("-") or self.at("+"):
                op = self.take()[1]
                value = self.unary()
                if self.mathjs and isinstance(value, list):
                    sign = -1.0 if op == "-" else 1.0
                    return matrix.elementwise(lambda x, y: x * y, value, sign, self.budget)
                if not is_number(value):
                    if self.js and op == "+" and isinstance(value, str):
                        raise ExprError("unary plus on string")
                    raise ExprError("unary operator on non-number")
                return -float(value) if op == "-" else float(value)
            if self.at("!") or self.at_word("not"):
                self.take()
                return not self._truthy(self.unary())
            return self.power()
        finally:
            self.leave()

    def power(self) -> Json:
        base = self.postfix()
        if (self.at("^") and not self.js) or self.at("**"):
            self.take()
            exponent = self.unary()
            a, b = self._operands(base, exponent)
            return _pow(a, b)
        return base

    def postfix(self) -> Json:
        value = self.primary()
        while self.mathjs and self.at("[") and isinstance(value, list):
            # mathjs indexing counts from 1: ``[1, 2, 3][1]`` is 1, ``m[2, 1]`` an element.
            self.take()
            indices = [self.expression()]
            while self.at(","):
                self.take()
                indices.append(self.expression())
            self.expect("]")
            value = matrix.index(value, indices)
        # mathjs percent: `10%` when no operand follows.
        if not self.js and self.at("%") and not self._operand_follows(1):
            self.take()
            a, _ = self._operands(value, 0)
            return a / 100
        return value

    def primary(self) -> Json:
        self.budget.charge()
        kind, value = self.take()
        if kind == "num":
            assert isinstance(value, float)
            return value
        if kind == "str":
            if not self.js:
                raise ExprError("string in arithmetic")
            return value
        if kind == "op" and value == "(":
            inner = self.expression()
            self.expect(")")
            return inner
        if kind == "op" and value == "[":
            return self.array()
        if kind == "op" and value == "{":
            if not self.js:
                raise ExprError("object in arithmetic")
            return self.obj()
        if kind == "id":
            assert isinstance(value, str)
            return self.identifier(value)
        raise ExprError("unexpected token")

    def identifier(self, name: str) -> Json:
        if self.js:
            literal = {
                "true": True,
                "false": False,
                "null": None,
                "undefined": UNDEFINED,
                "NaN": math.nan,
                "Infinity": math.inf,
            }
            if name in literal:
                return literal[name]
            raise ExprError(f"unknown identifier {name}")
        if name in ("math", "Math") and self.at("."):
            self.take()
            kind, member = self.take()
            if kind != "id":
                raise ExprError("bad member")
            assert isinstance(member, str)
            name = member
        if self.at("("):
            known = name in _FUNCTION_NAMES or (self.mathjs and name in matrix.FUNCTIONS)
            if not known:
                raise ExprError(f"unknown function {name}")
            self.take()
            args: list[Json] = []
            if not self.at(")"):
                while True:
                    args.append(self.expression())
                    if self.at(","):
                        self.take()
                        continue
                    break
            self.expect(")")
            self.budget.charge(len(args) + 1)
            if self.mathjs and name in matrix.FUNCTIONS:
                return matrix.call(name, args, self.budget)
            return _call(name, args)
        if name in _CONSTANTS:
            return _CONSTANTS[name]
        if name in ("true", "false"):
            return name == "true"
        raise ExprError(f"unknown symbol {name}")

    def array(self) -> list[Json]:
        if self.mathjs:
            return self.matrix_literal()
        items: list[Json] = []
        while not self.at("]"):
            if self.at(","):
                if not self.js:
                    raise ExprError("empty matrix element")
                self.take()
                items.append(UNDEFINED)  # an elision
                continue
            items.append(self.expression())
            self.budget.charge()
            if self.at(","):
                self.take()
            elif not self.at("]"):
                raise ExprError("expected , or ]")
        self.take()
        return items

    def matrix_literal(self) -> list[Json]:
        """mathjs ``[1, 2; 3, 4]`` (rows separated by ``;``) or ``[1, 2, 3]``."""
        rows: list[list[Json]] = [[]]
        while not self.at("]"):
            rows[-1].append(self.expression())
            self.budget.charge()
            if self.at(","):
                self.take()
            elif self.at(";"):
                self.take()
                rows.append([])
            elif not self.at("]"):
                raise ExprError("expected , ; or ]")
        self.take()
        if len(rows) > 1:
            return matrix.rows_to_matrix(rows, self.budget)
        return rows[0]

    def obj(self) -> dict[str, Json]:
        out: dict[str, Json] = {}
        while not self.at("}"):
            kind, key = self.take()
            if kind == "num":
                assert isinstance(key, float)
                name = to_js_string(normalize_number(key))
            elif kind in ("str", "id"):
                name = str(key)
            else:
                raise ExprError("bad object key")
            self.expect(":")
            value = self.expression()
            self.budget.charge()
            # Assigning __proto__ in a JS literal sets the prototype; here it is an ordinary key
            # that the path layer refuses to address. Keep JS's "last duplicate wins".
            out.pop(name, None)
            out[name] = value
            if self.at(","):
                self.take()
            elif not self.at("}"):
                raise ExprError("expected , or }")
        self.take()
        return out


def _finish_js(value: Json) -> Json:
    if isinstance(value, float):
        return normalize_number(value)
    if isinstance(value, list):
        return [_finish_js(v) for v in value]
    if isinstance(value, dict):
        return {k: _finish_js(v) for k, v in value.items()}
    return value


def eval_js_literal(text: str, budget: Budget) -> Json:
    """Evaluate an object/array literal (with arithmetic inside) without running JavaScript.

    Raises :class:`ExprError` unless the result is an object or an array.
    """
    try:
        tokens = tokenize(text, js=True, budget=budget)
        value = _Parser(tokens, js=True, budget=budget).parse()
    except RecursionError as exc:  # pragma: no cover - depth is bounded well below
        raise ExprError("too deep") from exc
    if not isinstance(value, dict | list):
        raise ExprError("not an object or array")
    return _finish_js(value)


def eval_math(text: str, budget: Budget, *, mathjs: bool = False) -> float | int | str:
    """Evaluate a mathjs-style arithmetic expression to a number (12 significant digits).

    Raises :class:`ExprError` when the text is not such an expression or its result is not a
    number (booleans, arrays and strings fall through, as in MVU). ``mathjs=True`` (instances of
    interpreter version 3) adds assignment expressions, matrices, one-based indexing and the
    matrix functions of :data:`.matrix.FUNCTIONS`; a matrix result is its mathjs string form.
    """
    try:
        tokens = tokenize(text, js=False, budget=budget)
        value = _Parser(tokens, js=False, budget=budget, mathjs=mathjs).parse()
        if mathjs and isinstance(value, list):
            matrix.shape(value)
            return matrix.format_matrix(value)
    except RecursionError as exc:  # pragma: no cover - depth is bounded well below
        raise ExprError("too deep") from exc
    except MvuBudgetError:
        raise
    except (ArithmeticError, ValueError) as exc:
        if isinstance(exc, ExprError):
            raise
        raise ExprError(str(exc)) from exc
    if not is_number(value):
        raise ExprError("result is not a number")
    return round12(value)
