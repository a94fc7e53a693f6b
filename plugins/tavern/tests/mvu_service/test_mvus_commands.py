"""The processor output check: only filters and offered recoveries ever pass (property tests)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from innkeeper_hostapi.mvu import MvuCommandView
from innkeeper_tavern.features.mvu_service.commands import (
    ProcessorOutputRejected,
    prepare,
    select,
    view_of,
)
from innkeeper_tavern.pure.mvu import MvuSyntaxError

PATHS = ["hp", "gold", "mood", "bag", "a.b", "x[0]"]
BROKEN = '<JSONPatch>[{"op": "replace", "path": "/mood" "value": "sad"}]</JSONPatch>'


def _reply(paths: list[str], values: list[int], broken_at: int | None) -> str:
    parts = [
        f"_.set('{p}', {v});//r{i}" for i, (p, v) in enumerate(zip(paths, values, strict=False))
    ]
    if broken_at is not None:
        parts.insert(min(broken_at, len(parts)), BROKEN)
    return "\n".join(parts)


def _is_subsequence(small: list[MvuCommandView], big: list[MvuCommandView]) -> bool:
    it = iter(big)
    return all(any(x == y for y in it) for x in small)


replies = st.builds(
    _reply,
    st.lists(st.sampled_from(PATHS), max_size=6),
    st.lists(st.integers(-5, 5), min_size=6, max_size=6),
    st.one_of(st.none(), st.integers(0, 6)),
)


@settings(max_examples=150, deadline=None)
@given(reply=replies, data=st.data())
def test_any_output_is_a_filter_a_recovery_or_rejected(reply: str, data: st.DataObject) -> None:
    prepared = prepare(reply)
    originals = list(prepared.views())
    offered = [v for r in prepared.recoveries for v in r.offer.commands]
    pool = originals + offered
    forged = MvuCommandView("set", ("'gold'", "1000"), "_.set('gold', 1000);", "")
    output = data.draw(st.lists(st.sampled_from([*pool, forged]), max_size=8))
    try:
        chosen = select(prepared, output)
    except (ProcessorOutputRejected, MvuSyntaxError):
        return
    views = [view_of(c) for c in chosen]
    assert views == output
    assert forged not in views or forged in pool
    kept = [v for v in views if v in originals]
    assert _is_subsequence(kept, originals)
    recovered = [v for v in views if v not in originals]
    assert _is_subsequence(recovered, offered)
    if prepared.broken:
        assert recovered  # an unrecovered broken block never passes


def test_filtering_keeps_order_and_recovery_goes_in_place() -> None:
    prepared = prepare(_reply(["hp", "gold"], [1, 2, 0, 0, 0, 0], broken_at=1))
    hp, gold = prepared.views()
    (recovery,) = prepared.recoveries
    assert recovery.offer.index == 1 and recovery.offer.kind == "json-patch-separator"
    chosen = select(prepared, [hp, *recovery.offer.commands, gold])
    assert [c.type for c in chosen] == ["set", "set", "set"]
    with pytest.raises(ProcessorOutputRejected):
        select(prepared, [gold, hp, *recovery.offer.commands])
    with pytest.raises(MvuSyntaxError):
        select(prepared, [hp, gold])  # dropping the broken block does not make it valid
    with pytest.raises(MvuSyntaxError):
        select(prepared, None)
