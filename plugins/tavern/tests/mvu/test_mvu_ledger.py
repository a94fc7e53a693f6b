"""The pure ledger model behind tavernMvu: identity, CAS, idempotency, history, seeds, cap."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from innkeeper_tavern.pure.mvu.engine import apply_reply
from innkeeper_tavern.pure.mvu.initvar import initialize_variables
from innkeeper_tavern.pure.mvu.ledger import (
    MAX_LEDGER_BYTES,
    InstanceIdentity,
    Ledger,
    LedgerError,
    capture_seed,
    create_instance,
    decode_ledger,
    encode_ledger,
    history,
    install_seed,
    instance_id,
    ledger_bytes,
    update,
)

T0, T1, T2, T3 = (f"2026-11-30T12:0{i}:00Z" for i in range(4))
ALICE = InstanceIdentity("character:lyra", "session-a", "2026-11-30T11:00:00Z")


def content(hp: int = 100) -> dict[str, Any]:
    v = initialize_variables({"$meta": {"extensible": True}, "hp": hp, "log": []})
    return v


def test_instance_ids_are_stable_and_per_session() -> None:
    same = InstanceIdentity("character:lyra", "session-a", "2026-11-30T11:00:00Z")
    assert instance_id(ALICE) == instance_id(same)
    assert instance_id(ALICE).startswith("mvu:instance-")
    recreated = InstanceIdentity("character:lyra", "session-a", "2026-11-30T11:05:00Z")
    other_template = InstanceIdentity("character:kai", "session-a", "2026-11-30T11:00:00Z")
    assert len({instance_id(ALICE), instance_id(recreated), instance_id(other_template)}) == 3


def test_create_is_idempotent_and_never_reinitializes() -> None:
    ledger, record = create_instance(Ledger(), ALICE, content(), now=T0)
    again, same = create_instance(ledger, ALICE, content(hp=1), now=T1)
    assert again is ledger and same is record
    assert same.content["stat_data"]["hp"] == 100 and same.revision == 1


def test_cas_and_operation_receipts() -> None:
    empty = Ledger()
    ledger, record = create_instance(empty, ALICE, content(), now=T0)
    frozen = copy.deepcopy(encode_ledger(ledger))
    edited = apply_reply(record.content, "_.set('hp', 80);").variables
    l2, receipt = update(
        ledger, record.id, edited, expected_revision=1, operation_id="op-1", now=T1
    )
    assert receipt.revision == 2 and receipt.changed
    assert encode_ledger(ledger) == frozen, "operations never change their input ledger"
    # An identical replay returns the original receipt and changes nothing.
    l3, replay = update(l2, record.id, edited, expected_revision=1, operation_id="op-1", now=T2)
    assert replay == receipt and l3 is l2
    # Reusing the operation id for something else is refused.
    with pytest.raises(LedgerError) as conflict:
        update(l2, record.id, content(hp=5), expected_revision=2, operation_id="op-1", now=T2)
    assert conflict.value.code == "MVU_OPERATION_CONFLICT"
    # A stale revision is refused.
    with pytest.raises(LedgerError) as stale:
        update(l2, record.id, content(hp=5), expected_revision=1, operation_id="op-2", now=T2)
    assert stale.value.code == "MVU_REVISION_CONFLICT"
    # Writing the same content again is a receipt without a new revision.
    l4, same = update(l2, record.id, edited, expected_revision=2, operation_id="op-3", now=T3)
    assert not same.changed and l4.states[record.id].revision == 2


def test_history_has_verified_before_evidence() -> None:
    ledger, record = create_instance(Ledger(), ALICE, content(), now=T0)
    ledger, _ = update(
        ledger, record.id, content(90), expected_revision=1, operation_id="a", now=T1
    )
    ledger, _ = update(
        ledger, record.id, content(70), expected_revision=2, operation_id="b", now=T2
    )
    rows = history(ledger, record.id, include_before=True)
    assert [r["revision"] for r in rows] == [1, 2, 3]
    assert rows[0]["beforeAvailable"] is False
    assert rows[2]["beforeAvailable"] is True
    assert rows[2]["before"] == {"hp": 90, "log": []}
    assert "before" not in history(ledger, record.id)[2]


def test_seeds_freeze_the_source_and_do_not_carry_receipts() -> None:
    ledger, parent = create_instance(Ledger(), ALICE, content(), now=T0)
    ledger, _ = update(
        ledger, parent.id, content(90), expected_revision=1, operation_id="op", now=T1
    )
    seed = capture_seed(ledger, parent.id, ticket="fork-1", revision=1)
    assert seed is not None
    # Later parent changes cannot alter the seed.
    ledger, _ = update(
        ledger, parent.id, content(10), expected_revision=2, operation_id="x", now=T2
    )
    child = InstanceIdentity("character:lyra", "session-b", "2026-11-30T12:30:00Z")
    ledger, record = install_seed(ledger, seed, child, now=T3)
    assert record.content["stat_data"]["hp"] == 100
    assert record.inherited_from == {"id": parent.id, "revision": 1}
    again, same = install_seed(ledger, seed, child, now=T3)
    assert again is ledger and same == record
    other = InstanceIdentity("character:lyra", "session-c", "2026-11-30T12:40:00Z")
    with pytest.raises(LedgerError):
        install_seed(ledger, seed, other, now=T3)
    rows = history(ledger, record.id, include_before=True)
    assert rows[0]["inherited"] is True and rows[0]["beforeAvailable"] is False
    # The child's operation ids are its own: "op" is free there.
    _, receipt = update(
        ledger, record.id, content(55), expected_revision=record.revision, operation_id="op", now=T3
    )
    assert receipt.changed


def test_ledger_cap_refuses_the_operation() -> None:
    big = initialize_variables({"blob": "x" * (1900 * 1024)})
    ledger = Ledger()
    refused: LedgerError | None = None
    for n in range(40):
        identity = InstanceIdentity("character:lyra", f"s{n}", T0)
        try:
            ledger, _ = create_instance(ledger, identity, big, now=T0)
        except LedgerError as exc:
            refused = exc
            break
    assert refused is not None and refused.code == "MVU_LEDGER_TOO_LARGE"
    # The refused operation produced nothing: the last good ledger is intact and within the cap.
    assert len(ledger.states) == n >= 7
    assert ledger_bytes(ledger) <= MAX_LEDGER_BYTES


def test_encoding_round_trips() -> None:
    ledger, record = create_instance(Ledger(), ALICE, content(), now=T0)
    ledger, _ = update(ledger, record.id, content(1), expected_revision=1, operation_id="o", now=T1)
    assert decode_ledger(encode_ledger(ledger)) == ledger


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 4), st.integers(0, 3), st.integers(0, 6)),
        min_size=1,
        max_size=25,
    )
)
def test_random_operation_sequences_keep_the_ledger_consistent(
    steps: list[tuple[int, int, int]],
) -> None:
    """(operation id, revision offset, hp) triples: receipts, revisions and history agree."""
    ledger, record = create_instance(Ledger(), ALICE, content(), now=T0)
    seen: dict[str, Any] = {}
    for op, offset, hp in steps:
        current = ledger.states[record.id]
        expected = current.revision - offset
        operation = f"op-{op}"
        try:
            new, receipt = update(
                ledger, record.id, content(hp), expected_revision=expected, operation_id=operation,
                now=T1,
            )  # fmt: skip
        except LedgerError as exc:
            refused = exc.code
        else:
            refused = None
        if refused is not None:
            assert refused in ("MVU_REVISION_CONFLICT", "MVU_OPERATION_CONFLICT")
            assert refused != "MVU_OPERATION_CONFLICT" or operation in seen
            continue
        if operation in seen:
            assert receipt == seen[operation] and new is ledger  # replay: nothing changes
        else:
            assert offset == 0
            seen[operation] = receipt
        ledger = new
        state = ledger.states[record.id]
        rows = ledger.history[record.id]
        assert rows[-1].revision == state.revision == len(rows)
        assert rows[-1].content_sha256 == state.content_sha256
    assert decode_ledger(encode_ledger(ledger)) == ledger
