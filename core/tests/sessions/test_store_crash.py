"""A writer process killed with SIGKILL mid-append leaves a readable store, no partial event."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sqlite3
import sys
import textwrap
from pathlib import Path

import pytest

from innkeeper_core.sessions import EventStore
from innkeeper_core.sessions.bodies import BodyCodec
from innkeeper_core.sessions.deltas import MARK_DELTA
from innkeeper_core.sessions.store import STORE_FILE_NAME
from innkeeper_hostapi.sessions import UserMessage

WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from innkeeper_core.sessions import EventStore
    from innkeeper_hostapi.sessions import UserMessage, text_content

    async def main() -> None:
        store = await EventStore.open(sys.argv[1])
        sid = (await store.create_session()).id
        print(sid, flush=True)
        i = 0
        body = "x" * 3000  # spans pages, so a torn write would show
        while True:
            batch = [
                UserMessage(message_id=f"{i}-{j}", content=text_content(f"{i}-{j}:{body}"))
                for j in range(1 + i % 7)
            ]
            await asyncio.gather(
                store.append_many(sid, batch), store.append(sid, batch[0])
            )
            i += 1
            if i == 50:
                print("running", flush=True)

    asyncio.run(main())
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("delay", [0.05, 0.3])
async def test_sigkill_mid_append_leaves_store_consistent(tmp_path: Path, delay: float) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", WRITER, str(tmp_path), stdout=asyncio.subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        sid = (await proc.stdout.readline()).decode().strip()
        assert (await proc.stdout.readline()).decode().strip() == "running"
        await asyncio.sleep(delay)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        await asyncio.wait_for(proc.wait(), timeout=30)
    assert proc.returncode == -signal.SIGKILL

    # Raw check: every row decodes (plain, or a delta against a committed row), seqs are
    # contiguous and match the header.
    codec = BodyCodec()
    with contextlib.closing(sqlite3.connect(tmp_path / STORE_FILE_NAME)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        # The header's last seq: its stored floor or the session's newest row.
        (last_seq,) = conn.execute(
            "SELECT MAX(last_seq, (SELECT COALESCE(MAX(seq), 0) FROM events e WHERE e.sid = s.sid))"
            " FROM sessions s WHERE id = ?",
            (sid,),
        ).fetchone()
        rows = conn.execute("SELECT seq, data FROM events ORDER BY seq").fetchall()
        datas = [codec.load(conn, blob) for _, blob in rows]
    assert last_seq > 0
    assert [seq for seq, _ in rows] == list(range(1, last_seq + 1))
    assert any(blob[:1] == MARK_DELTA for _, blob in rows)
    batches: dict[int, list[int]] = {}
    for data in datas:
        assert isinstance(data, UserMessage)
        prefix, _, body = data.content[0].text.partition(":")
        assert data.message_id == prefix
        assert body == "x" * 3000
        i, j = map(int, prefix.split("-"))
        batches.setdefault(i, []).append(j)
    # append_many is all-or-nothing: a batch's tail items are present exactly once, or none.
    for i, js in batches.items():
        tail = sorted(j for j in js if j > 0)
        assert tail in ([], list(range(1, 1 + i % 7))), (i, js)

    # And the store reopens and keeps appending after the crash.
    async with await EventStore.open(tmp_path) as store:
        inspection = await store.inspect(sid)
        assert inspection.last_seq == last_seq
        assert len(await store.read_all(sid)) == last_seq
        event = await store.append(sid, UserMessage(message_id="after", content=()))
        assert event.seq == last_seq + 1
