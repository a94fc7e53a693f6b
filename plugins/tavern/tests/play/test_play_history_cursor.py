"""The paged history read refuses a host cursor that stalls (502 PLAY_HISTORY_CURSOR_STALLED)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from innkeeper_hostapi.sessions import HistoryPage, SessionEvent, TurnStart
from innkeeper_tavern.features.play.errors import PlayError
from innkeeper_tavern.features.play.sessions import PlaySessions
from innkeeper_tavern.features.play.workspace import PlayWorkspace


def event(seq: int) -> SessionEvent:
    return SessionEvent(seq=seq, at=0, data=TurnStart(turn=seq))


class FakeHost:
    def __init__(self, pages: list[HistoryPage]) -> None:
        self.pages = pages
        self.calls: list[tuple[int | None, int | None]] = []

    async def page(self, session_id: str, **kw: Any) -> HistoryPage:
        self.calls.append((kw.get("before_seq"), kw.get("through_seq")))
        return self.pages[len(self.calls) - 1]


def sessions(host: FakeHost, tmp_path: Path) -> PlaySessions:
    return PlaySessions(
        workspace=PlayWorkspace(tmp_path, lambda: None, clock=lambda: "t"),
        selections=None,  # type: ignore[arg-type]
        resources=None,  # type: ignore[arg-type]
        sessions=lambda: host,  # type: ignore[arg-type,return-value]
        agents=lambda: None,
        mvu=lambda: None,
        logger=logging.getLogger("t"),
        data_dir=tmp_path,
    )


def page(seqs: list[int], more: bool, following: int | None) -> HistoryPage:
    return HistoryPage(
        events=tuple(event(s) for s in seqs),
        has_more=more,
        through_seq=9,
        next_before_seq=following,
    )


async def test_pages_are_pinned_and_joined_oldest_first(tmp_path: Path) -> None:
    host = FakeHost([page([9, 8], True, 8), page([7, 6], True, 6), page([5], False, None)])
    events, through = await sessions(host, tmp_path).history("s")
    assert [e.seq for e in events] == [5, 6, 7, 8, 9] and through == 9
    assert host.calls == [(None, None), (8, 9), (6, 9)]


@pytest.mark.parametrize(
    "pages",
    [
        [page([], True, 5)],  # an empty page that claims more
        [page([9, 8], True, 8), page([7], True, 8)],  # a cursor that does not advance
        [page([9, 8], True, 9)],  # a cursor above the oldest seq
        [page([0], True, 0)],  # an illegal seq
        [page([9], True, None)],  # no cursor although there is more
    ],
)
async def test_a_stalled_cursor_is_502(tmp_path: Path, pages: list[HistoryPage]) -> None:
    with pytest.raises(PlayError) as caught:
        await sessions(FakeHost(pages), tmp_path).history("s")
    assert (caught.value.status, caught.value.code) == (502, "PLAY_HISTORY_CURSOR_STALLED")
