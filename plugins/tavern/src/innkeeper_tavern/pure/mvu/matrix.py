"""mathjs matrices for command values (interpreter version 3).

MagVarUpdate evaluates an unquoted command argument with mathjs (docs/mvu.md#command-values), where
``[1, 2; 3, 4]`` is a 2×2 matrix, ``[1, 2, 3][1]`` is ``1`` (mathjs counts from 1),
``det([1, 2; 3, 4])`` is ``-2`` and a matrix result is stored as its string form
(``"[[1, 2], [3, 4]]"``). This module holds the matrix part of that: vectors and matrices are
nested Python lists of floats (one or two dimensions), every operation charges the expression
budget per element, and sizes are bounded. The parser of :mod:`.expr` calls it only for
instances created with interpreter version 3; older instances keep their values.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Final

from .jsvalue import Json, is_number, normalize_number, to_js_string
from .limits import Budget

#: Elements one matrix value may have.
MAX_MATRIX_ELEMENTS: Final = 10_000

Matrix = list[Json]


class MatrixError(ValueError):
    """Not a valid matrix operation (the argument then falls through, as when mathjs throws)."""


def is_matrix(value: Json) -> bool:
    return isinstance(value, list)


def shape(value: Json) -> tuple[int, ...]:
    """``(n,)`` for a vector, ``(rows, cols)`` for a matrix; raises for ragged or deeper data."""
    if not isinstance(value, list):
        raise MatrixError("not a matrix")
    if value and all(isinstance(row, list) for row in value):
        cols = len(value[0])
        for row in value:
            assert isinstance(row, list)
            if len(row) != cols or not all(is_number(x) for x in row):
                raise MatrixError("dimension mismatch")
        return (len(value), cols)
    if not all(is_number(x) for x in value):
        raise MatrixError("a matrix holds numbers")
    return (len(value),)


def _check_size(count: int, budget: Budget) -> None:
    if count > MAX_MATRIX_ELEMENTS:
        raise MatrixError(f"matrices are limited to {MAX_MATRIX_ELEMENTS} elements")
    budget.charge(count + 1)


def rows_to_matrix(rows: list[list[Json]], budget: Budget) -> Matrix:
    """``[a, b; c, d]``: rows of equal length."""
    if len({len(r) for r in rows}) > 1:
        raise MatrixError("dimension mismatch: rows of different lengths")
    _check_size(sum(len(r) for r in rows), budget)
    out: Matrix = [list(r) for r in rows]
    shape(out)
    return out


def elementwise(op: Callable[[float, float], float], a: Json, b: Json, budget: Budget) -> Json:
    """``a op b`` with scalar broadcasting (mathjs ``add``, ``subtract``, ``dotMultiply``...)."""
    if is_number(a) and is_number(b):
        return op(float(a), float(b))
    if isinstance(a, list) and isinstance(b, list):
        if shape(a) != shape(b):
            raise MatrixError("dimension mismatch")
        _check_size(len(a), budget)
        return [elementwise(op, x, y, budget) for x, y in zip(a, b, strict=True)]
    if isinstance(a, list) and is_number(b):
        shape(a)
        _check_size(len(a), budget)
        return [elementwise(op, x, b, budget) for x in a]
    if is_number(a) and isinstance(b, list):
        shape(b)
        _check_size(len(b), budget)
        return [elementwise(op, a, y, budget) for y in b]
    raise MatrixError("arithmetic on non-numbers")


def multiply(a: Json, b: Json, budget: Budget) -> Json:
    """mathjs ``*``: scalars scale, vector·vector is the dot product, else the matrix product."""
    if is_number(a) or is_number(b):
        return elementwise(lambda x, y: x * y, a, b, budget)
    sa, sb = shape(a), shape(b)
    assert isinstance(a, list) and isinstance(b, list)
    if len(sa) == 1 and len(sb) == 1:
        return dot(a, b, budget)
    left = [a] if len(sa) == 1 else a
    right = [[x] for x in b] if len(sb) == 1 else b
    rows, inner = shape(left)
    inner_b, cols = shape(right)
    if inner != inner_b:
        raise MatrixError("dimension mismatch in matrix product")
    _check_size(rows * cols * max(inner, 1), budget)
    product = [
        [
            math.fsum(float(left[i][k]) * float(right[k][j]) for k in range(inner))
            for j in range(cols)
        ]
        for i in range(rows)
    ]
    if len(sa) == 1:
        return product[0]
    if len(sb) == 1:
        return [row[0] for row in product]
    return product


def dot(a: Json, b: Json, budget: Budget) -> float:
    if shape(a) != shape(b) or len(shape(a)) != 1:
        raise MatrixError("dot needs two vectors of one length")
    assert isinstance(a, list) and isinstance(b, list)
    budget.charge(len(a) + 1)
    return math.fsum(float(x) * float(y) for x, y in zip(a, b, strict=True))


def transpose(a: Json, budget: Budget) -> Json:
    dims = shape(a)
    assert isinstance(a, list)
    if len(dims) == 1:
        return list(a)
    budget.charge(dims[0] * dims[1] + 1)
    return [[a[i][j] for i in range(dims[0])] for j in range(dims[1])]


def det(a: Json, budget: Budget) -> float:
    dims = shape(a)
    if len(dims) != 2 or dims[0] != dims[1]:
        raise MatrixError("det needs a square matrix")
    n = dims[0]
    _check_size(n * n * n, budget)
    m = [[float(x) for x in row] for row in a]
    result = 1.0
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(m[r][col]))
        if m[pivot][col] == 0:
            return 0.0
        if pivot != col:
            m[col], m[pivot] = m[pivot], m[col]
            result = -result
        result *= m[col][col]
        for r in range(col + 1, n):
            factor = m[r][col] / m[col][col]
            for c in range(col, n):
                m[r][c] -= factor * m[col][c]
    return result


def filled(value: float, dims: list[float], budget: Budget) -> Matrix:
    """``zeros(n)``, ``ones(r, c)``."""
    sizes = [int(d) for d in dims]
    if not 1 <= len(sizes) <= 2 or any(d < 0 or d != f for d, f in zip(sizes, dims, strict=True)):
        raise MatrixError("sizes are one or two non-negative integers")
    _check_size(math.prod(sizes), budget)
    if len(sizes) == 1:
        return [value] * sizes[0]
    return [[value] * sizes[1] for _ in range(sizes[0])]


def identity(dims: list[float], budget: Budget) -> Matrix:
    sizes = [int(d) for d in dims] * (2 if len(dims) == 1 else 1)
    out = filled(0.0, [float(s) for s in sizes], budget)
    for i in range(min(sizes)):
        out[i][i] = 1.0
    return out


def index(value: Json, indices: list[Json]) -> Json:
    """mathjs ``m[i]`` / ``m[i, j]``: one-based integer indices."""
    dims = shape(value)
    if len(indices) != len(dims):
        raise MatrixError("dimension mismatch in index")
    positions = []
    for i, size in zip(indices, dims, strict=True):
        if not is_number(i) or not float(i).is_integer() or not 1 <= int(i) <= size:
            raise MatrixError("index out of range")
        positions.append(int(i) - 1)
    out: Json = value
    for p in positions:
        assert isinstance(out, list)
        out = out[p]
    return out


def format_matrix(value: Json) -> str:
    """mathjs ``Matrix.toString()``: ``[[1, 2], [3, 4]]``."""
    if isinstance(value, list):
        return "[" + ", ".join(format_matrix(v) for v in value) + "]"
    if is_number(value):
        return to_js_string(normalize_number(float(value)))
    raise MatrixError("a matrix holds numbers")


def _number(value: Json) -> float:
    if not is_number(value):
        raise MatrixError("not a number")
    return float(value)


#: Matrix functions of interpreter version 3 (mathjs names).
FUNCTIONS: Final = frozenset(
    ["size", "transpose", "det", "zeros", "ones", "identity", "dot", "trace", "multiply", "add"]
)


def call(name: str, args: list[Json], budget: Budget) -> Json:
    """Call the matrix function ``name`` (one of :data:`FUNCTIONS`)."""
    if name in ("zeros", "ones", "identity"):
        dims = [
            _number(a) for a in (args[0] if len(args) == 1 and isinstance(args[0], list) else args)
        ]
        if name == "identity":
            return identity(dims, budget)
        return filled(0.0 if name == "zeros" else 1.0, dims, budget)
    if name in ("dot", "multiply", "add") and len(args) == 2:
        if name == "dot":
            return dot(args[0], args[1], budget)
        if name == "add":
            return elementwise(lambda x, y: x + y, args[0], args[1], budget)
        return multiply(args[0], args[1], budget)
    if len(args) != 1:
        raise MatrixError(f"bad call of {name}")
    value = args[0]
    if name == "size":
        return [float(d) for d in shape(value)] if isinstance(value, list) else []
    if name == "transpose":
        return transpose(value, budget)
    if name == "det":
        return det(value, budget)
    square = shape(value)  # trace
    if len(square) != 2 or square[0] != square[1]:
        raise MatrixError("trace needs a square matrix")
    assert isinstance(value, list)
    return math.fsum(float(value[i][i]) for i in range(square[0]))
