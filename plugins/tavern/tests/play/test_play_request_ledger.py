"""A user-message ``requestId`` is accepted once across server restarts, including a crash
between the ledger's ``pending`` record and its ``accepted`` update (``play/requests.py``)."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from play_harness import Play
from tavern_harness import HostStarter

from innkeeper_tavern.features.play import TAVERN_PLAY, requests
from innkeeper_tavern.features.play.requests import MAX_REQUESTS_PER_SESSION

DATA = "data"


def ledger_file(tmp_path: Path, sid: str) -> Path:
    found = list((tmp_path / DATA).rglob(f"play-requests/{sid}.json"))
    assert len(found) == 1, found
    return found[0]


async def user_texts(play: Play, sid: str) -> list[str]:
    await play.idle(sid)
    data = await play.v2("GET", f"/sessions/{sid}/messages")
    return [m["text"] for m in data["messages"] if m["origin"]["kind"] == "user"]


async def send(play: Play, sid: str, text: str, rid: str) -> dict[str, Any]:
    body = {"text": text, "requestId": rid}
    answer: dict[str, Any] = await play.v2("POST", f"/sessions/{sid}/user-message", body, 202)
    return answer


async def test_replay_after_restart_sends_nothing(start_play: HostStarter, tmp_path: Path) -> None:
    host, play = await start_play(tmp_path / DATA)
    await play.bind()
    sid = (await play.v2("POST", "/sessions", {}, 201))["sessionId"]
    first = await send(play, sid, "marker-once", "req-1")
    assert first["replayed"] is False
    assert await user_texts(play, sid) == ["marker-once"]
    raw = ledger_file(tmp_path, sid).read_text()
    assert "marker-once" not in raw  # the ledger keeps a hash, never the text
    await host.close()

    host, play = await start_play(tmp_path / DATA)
    again = await send(play, sid, "marker-once", "req-1")
    assert again["replayed"] is True
    assert (again["spliceSeq"], again["itemId"]) == (first["spliceSeq"], first["itemId"])
    status, body = await play.raw(
        "POST", f"/sessions/{sid}/user-message", {"text": "other", "requestId": "req-1"}
    )
    assert (status, body["code"]) == (409, "PLAY_REQUEST_ID_CONFLICT")
    assert await user_texts(play, sid) == ["marker-once"]


async def test_crash_after_the_splice_settles_from_the_log(
    start_play: HostStarter, tmp_path: Path
) -> None:
    """The prompt reached the log but the ledger still says ``pending``: a replay after the
    restart finds the splice and answers it, sending nothing."""
    host, play = await start_play(tmp_path / DATA)
    await play.bind()
    sid = (await play.v2("POST", "/sessions", {}, 201))["sessionId"]
    await send(play, sid, "earlier", "req-0")
    first = await send(play, sid, "hello", "req-1")
    assert await user_texts(play, sid) == ["earlier", "hello"]
    await host.close()
    path = ledger_file(tmp_path, sid)
    doc = json.loads(path.read_text())
    entry = next(e for e in doc["requests"] if e["requestId"] == "req-1")
    entry.update(state="pending", itemId=None, spliceSeq=None)
    path.write_text(json.dumps(doc))

    host, play = await start_play(tmp_path / DATA)
    again = await send(play, sid, "hello", "req-1")
    assert again["replayed"] is True
    assert (again["spliceSeq"], again["itemId"]) == (first["spliceSeq"], first["itemId"])
    assert await user_texts(play, sid) == ["earlier", "hello"]
    assert json.loads(path.read_text())["requests"][-1]["state"] == "accepted"


async def test_crash_before_the_prompt_sends_exactly_once(
    start_play: HostStarter, tmp_path: Path
) -> None:
    """``pending`` was written but the prompt never reached the log (a crash between the two):
    the replay after the restart sends it, once; the same text sent earlier does not count."""
    host, play = await start_play(tmp_path / DATA)
    await play.bind()
    sid = (await play.v2("POST", "/sessions", {}, 201))["sessionId"]
    await send(play, sid, "hello", "req-0")
    await play.idle(sid)
    last_seq = (await play.v2("GET", f"/sessions/{sid}/messages"))["throughSeq"]
    await host.close()
    path = ledger_file(tmp_path, sid)
    doc = json.loads(path.read_text())
    doc["requests"].append(
        {
            "requestId": "req-1",
            "textSha256": hashlib.sha256(b"hello").hexdigest(),
            "afterSeq": last_seq,
            "state": "pending",
        }
    )
    path.write_text(json.dumps(doc))

    host, play = await start_play(tmp_path / DATA)
    sent = await send(play, sid, "hello", "req-1")
    assert sent["replayed"] is False and sent["spliceSeq"] > last_seq
    again = await send(play, sid, "hello", "req-1")
    assert again["replayed"] is True and again["spliceSeq"] == sent["spliceSeq"]
    assert await user_texts(play, sid) == ["hello", "hello"]


async def test_the_ledger_is_bounded_per_session(
    start_play: HostStarter, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert MAX_REQUESTS_PER_SESSION == 256
    monkeypatch.setattr(requests, "MAX_REQUESTS_PER_SESSION", 4)
    _host, play = await start_play(tmp_path / DATA)
    await play.bind()
    sid = (await play.v2("POST", "/sessions", {}, 201))["sessionId"]
    other = (await play.v2("POST", "/sessions", {}, 201))["sessionId"]
    for n in range(5):
        await send(play, sid, f"t{n}", f"r{n}")
    await send(play, other, "t0", "r0")  # another session's ids are its own
    ids = [e["requestId"] for e in json.loads(ledger_file(tmp_path, sid).read_text())["requests"]]
    assert len(ids) == 4 and ids[0] == "r1" and ids[-1] == f"r{n}"
    await play.idle(sid)
    assert (await send(play, other, "t0", "r0"))["replayed"] is True


async def test_concurrent_replays_send_once_and_leave_no_guard(
    start_play: HostStarter, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(requests, "MAX_CACHED_SESSIONS", 1)
    _host, play = await start_play(tmp_path / DATA)
    await play.bind()
    sid = (await play.v2("POST", "/sessions", {}, 201))["sessionId"]
    other = (await play.v2("POST", "/sessions", {}, 201))["sessionId"]
    answers = await asyncio.gather(*(send(play, sid, "same", "req-1") for _ in range(5)))
    assert sorted(a["replayed"] for a in answers) == [False, True, True, True, True]
    assert len({a["spliceSeq"] for a in answers}) == 1
    await send(play, other, "x", "req-1")  # pushes the first session out of the memory cache
    assert (await send(play, sid, "same", "req-1"))["replayed"] is True  # re-read from its file
    assert await user_texts(play, sid) == ["same"]
    ledger = play.host.get(TAVERN_PLAY).sessions.requests
    assert ledger._locks == {}  # the guards do not outlive their holders
