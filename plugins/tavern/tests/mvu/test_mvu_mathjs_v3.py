"""mathjs parity of command values for interpreter version 3 instances (native mode): assignment
expressions, matrix literals with ``;``, one-based indexing and matrix functions, a matrix stored
as its mathjs string. Instances of version 2 keep their values."""

from __future__ import annotations

from typing import Any

import pytest

from innkeeper_tavern.pure.mvu import apply_reply, initialize_variables
from innkeeper_tavern.pure.mvu import ledger as mvu_ledger
from innkeeper_tavern.pure.mvu.expr import ExprError, eval_math
from innkeeper_tavern.pure.mvu.ledger import InstanceIdentity
from innkeeper_tavern.pure.mvu.limits import Budget, MvuBudgetError
from innkeeper_tavern.pure.mvu.values import parse_command_value


@pytest.mark.parametrize(
    ("text", "v3", "v2"),
    [
        ("x = 5", 5, "x = 5"),
        ("a = b = 2 + 3", 5, "a = b = 2 + 3"),
        ("[1,2,3][1]", 1, "[1,2,3][1]"),  # mathjs counts from 1
        ("[1, 2; 3, 4]", "[[1, 2], [3, 4]]", [1, "2; 3", 4]),
        ("[1, 2; 3, 4][2, 1]", 3, "[1, 2; 3, 4][2, 1]"),
        ("det([1, 2; 3, 4])", -2, "det([1, 2; 3, 4])"),
        ("transpose([1, 2; 3, 4])", "[[1, 3], [2, 4]]", "transpose([1, 2; 3, 4])"),
        ("size([1, 2; 3, 4])", "[2, 2]", "size([1, 2; 3, 4])"),
        ("zeros(2, 3)", "[[0, 0, 0], [0, 0, 0]]", "zeros(2, 3)"),
        ("identity(2)", "[[1, 0], [0, 1]]", "identity(2)"),
        ("[1, 2; 3, 4] * [5; 6]", "[[17], [39]]", "[1, 2; 3, 4] * [5; 6]"),
        ("dot([1, 2], [3, 4])", 11, "dot([1, 2], [3, 4])"),
        ("2 * [1, 2] + 1", "[3, 5]", "2 * [1, 2] + 1"),
        ("sum([1, 2; 3, 4])", 10, "sum([1, 2; 3, 4])"),
        ("trace([1, 2; 3, 4])", 5, "trace([1, 2; 3, 4])"),
        ("1/3", 0.333333333333, 0.333333333333),
    ],
)
def test_command_values(text: str, v3: Any, v2: Any) -> None:
    assert parse_command_value(text, Budget(100_000), mathjs=True) == v3
    assert parse_command_value(text, Budget(100_000)) == v2


@pytest.mark.parametrize(
    "text", ["[1, 2; 3]", "[1, 2, 3][0]", "[1, 2, 3][4]", "det([1, 2])", "f(x) = x^2", "x == 5"]
)
def test_invalid_mathjs_falls_through(text: str) -> None:
    with pytest.raises(ExprError):
        eval_math(text, Budget(100_000), mathjs=True)


def test_matrices_are_bounded() -> None:
    with pytest.raises(ExprError):
        eval_math("zeros(1000, 1000)", Budget(10_000_000), mathjs=True)
    with pytest.raises(ExprError):
        eval_math("zeros(50, 50) * zeros(50, 50)", Budget(10_000_000), mathjs=True)
    with pytest.raises(MvuBudgetError):  # every element charges the reply's budget
        eval_math("zeros(50, 50)", Budget(1_000), mathjs=True)


def test_replies_of_version_3_instances() -> None:
    v = initialize_variables({"m": "", "hp": 1, "x": 0})
    reply = "_.set('m', [1, 2; 3, 4]);_.set('hp', x = 5);_.set('x', [10, 20, 30][2]);"
    assert apply_reply(v, reply, mathjs=True).variables["stat_data"] == {
        "m": "[[1, 2], [3, 4]]",
        "hp": 5,
        "x": 20,
    }
    old = apply_reply(v, reply).variables["stat_data"]
    assert old == {"m": [1, "2; 3", 4], "hp": 1, "x": 0}


def test_new_instances_are_version_3_and_forks_keep_their_parents_version() -> None:
    ledger = mvu_ledger.Ledger()
    content = initialize_variables({"a": 1})
    parent = InstanceIdentity("t", "s1", "2026-01-01T00:00:00Z")
    ledger, record = mvu_ledger.create_instance(ledger, parent, content, now="n")
    assert record.interpreter_version == 3
    old = InstanceIdentity("t", "s0", "2026-01-01T00:00:00Z")
    ledger, stored = mvu_ledger.create_instance(
        ledger, old, content, now="n", interpreter_version=2
    )
    seed = mvu_ledger.capture_seed(ledger, stored.id, ticket="k")
    assert seed is not None
    child = InstanceIdentity("t", "s2", "2026-01-01T00:00:00Z")
    ledger, forked = mvu_ledger.install_seed(ledger, seed, child, now="n")
    assert forked.interpreter_version == 2
    # A record stored before version 3 existed has no field: it reads as 2.
    raw = mvu_ledger.encode_ledger(ledger).replace(b',"interpreter_version":2', b"")
    assert b'interpreter_version":2' not in raw
    assert mvu_ledger.decode_ledger(raw).states[stored.id].interpreter_version == 2
