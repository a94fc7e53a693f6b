"""Property test: random appends and forks, then paging and reads match a plain-list model."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from innkeeper_core.sessions import EventStore
from innkeeper_core.sessions.store import forks as store_forks
from innkeeper_hostapi.sessions import UserMessage, text_content

# ("append", session index, count) | ("fork", session index, cut fraction)
Op = tuple[str, int, int]
ops_strategy = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(0, 7), st.integers(1, 12)),
        st.tuples(st.just("fork"), st.integers(0, 7), st.integers(0, 100)),
    ),
    min_size=1,
    max_size=25,
)


async def run(ops: list[Op], limit: int, data_dir: Path) -> None:
    async with await EventStore.open(data_dir) as store:
        ids = [(await store.create_session()).id]
        model: dict[str, list[str]] = {ids[0]: []}
        counter = 0
        for kind, index, amount in ops:
            sid = ids[index % len(ids)]
            if kind == "append":
                texts = [f"e{counter + i}" for i in range(amount)]
                counter += amount
                await store.append_many(
                    sid, [UserMessage(message_id=t, content=text_content(t)) for t in texts]
                )
                model[sid].extend(texts)
            else:
                cut = len(model[sid]) * amount // 100
                child = (await store.fork(sid, cut)).id
                ids.append(child)
                model[child] = model[sid][:cut]
        for sid, expected in model.items():
            events = await store.read_all(sid)
            assert [
                e.data.message_id for e in events if isinstance(e.data, UserMessage)
            ] == expected
            seen: list[str] = []
            page = await store.page(sid, limit=limit)
            through = page.through_seq
            assert through == len(expected)
            while True:
                seen.extend(
                    e.data.message_id for e in page.events if isinstance(e.data, UserMessage)
                )
                if not page.has_more:
                    break
                page = await store.page(
                    sid, before_seq=page.next_before_seq, limit=limit, through_seq=through
                )
            assert seen == expected[::-1]


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=ops_strategy, limit=st.integers(1, 9))
def test_random_appends_and_forks_match_the_model(
    ops: list[Op], limit: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A small share depth so copied prefixes and shared chains are both exercised.
    monkeypatch.setattr(store_forks, "MAX_FORK_SHARE_DEPTH", 2)
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(run(ops, limit, Path(tmp)))
