"""Small events stored as deltas against a keyframe: read back exactly, across restarts, forks
and rollbacks, and an older store reads unchanged."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import random
import sqlite3
import zlib
from pathlib import Path

import msgspec
import pytest

from innkeeper_core.sessions import EventStore
from innkeeper_core.sessions import deltas as deltas_module
from innkeeper_core.sessions.bodies import INLINE_JSON_CHUNK_BYTES, MARK_JSON, BodyCodec
from innkeeper_core.sessions.deltas import (
    MARK_BASED_DELTA,
    MARK_DELTA,
    DeltaCodec,
    PendingDeltas,
    raw_deflate,
)
from innkeeper_core.sessions.store import STORE_SCHEMA_VERSION
from innkeeper_core.sessions.store import forks as store_forks
from innkeeper_hostapi.sessions import (
    AssemblyEntry,
    AssistantMessage,
    EventData,
    ExtensionEvent,
    InboxItem,
    InboxSpliced,
    RequestAssembly,
    SessionError,
    TurnConflict,
    TurnEnd,
    TurnEndReason,
    TurnStart,
    UserMessage,
    event_type,
    text_content,
)

from .conftest import legacy_events_table

ENCODE = msgspec.json.Encoder().encode


def turn(n: int) -> list[EventData]:
    """One turn of a story: the events around a user message and a reply."""
    said = f"I open door {n} and look for the keeper of the inn, who was here {n} days ago."
    return [
        TurnStart(turn=n),
        UserMessage(message_id=f"u{n:04}", content=text_content(said), turn=n),
        ExtensionEvent(name="demo:placement", payload={"turn": n, "kept": list(range(20))}),
        ExtensionEvent(name="other:note", payload={"note": f"seen {n}", "flags": [1, 2, 3]}),
        AssistantMessage(
            message_id=f"a{n:04}",
            content=text_content(f"The keeper answers: door {n} leads to the cellar."),
            turn=n,
            finish_reason="stop",
        ),
        TurnEnd(turn=n, reason=TurnEndReason(kind="completed")),
    ]


def rows(path: Path) -> list[bytes]:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return [bytes(r[0]) for r in conn.execute("SELECT data FROM events ORDER BY sid, seq")]


async def play(store: EventStore, sid: str, turns: range) -> list[EventData]:
    written: list[EventData] = []
    for n in turns:
        events = turn(n)
        if n % 2:  # both append paths: one call per event, and one call per turn
            for data in events:
                await store.append(sid, data)
        else:
            await store.append_many(sid, events)
        written.extend(events)
    return written


async def test_a_story_reads_back_exactly_and_its_small_events_are_deltas(
    tmp_path: Path,
) -> None:
    async with await EventStore.open(tmp_path) as store:
        sid = (await store.create_session()).id
        written = await play(store, sid, range(1, 41))
        assert [e.data for e in await store.read_all(sid)] == written
        assert store.cache_stats()["keyframeBytes"] > 0
    stored = rows(store.path)
    plain = [r for r in stored if r[:1] == b"{"]
    assert len(plain) == 6  # one keyframe per kind: turn/start and /end, user, reply, 2 ext
    assert all(r[:1] == MARK_DELTA for r in stored if r[:1] != b"{")
    assert sum(map(len, stored)) < 0.35 * sum(len(ENCODE(d)) for d in written)

    async with await EventStore.open(tmp_path) as store:  # a restart reads the same events
        assert [e.data for e in await store.read_all(sid)] == written
        more = await play(store, sid, range(41, 51))  # and starts new keyframes
        events = await store.read_all(sid)
        assert [e.data for e in events] == written + more
        assert (await store.page(sid, limit=7)).events == tuple(reversed(events[-7:]))
    assert len([r for r in rows(store.path) if r[:1] == b"{"]) == 12


async def test_a_rolled_back_append_is_never_a_keyframe(tmp_path: Path) -> None:
    async with await EventStore.open(tmp_path) as store:
        sid = (await store.create_session()).id
        # The first user message of the session would be its keyframe: rolled back instead
        # (the second turn/start conflicts), so its seq goes to another event.
        doomed = [TurnStart(turn=1), *turn(1)[1:2], TurnStart(turn=1)]
        with pytest.raises(TurnConflict):
            await store.append_many(sid, doomed)
        # The same inside a shared writer transaction (each job in its own savepoint).
        results = await asyncio.gather(
            store.append_many(sid, doomed),
            store.append_many(sid, turn(1)),
            return_exceptions=True,
        )
        assert isinstance(results[0], TurnConflict)
        written = turn(1) + await play(store, sid, range(2, 6))
        assert [e.data for e in await store.read_all(sid)] == written
    async with await EventStore.open(tmp_path) as store:
        assert [e.data for e in await store.read_all(sid)] == written


async def test_forks_read_shared_and_copied_deltas(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with await EventStore.open(tmp_path) as store:
        parent = (await store.create_session()).id
        written = await play(store, parent, range(1, 9))
        shared = await store.fork(parent, 24)  # shares the parent's rows
        monkeypatch.setattr(store_forks, "MAX_FORK_SHARE_DEPTH", 0)
        copied = await store.fork(parent, 30)  # copies them (delta rows name their keyframe)
        assert [e.data for e in await store.read_all(shared.id)] == written[:24]
        assert [e.data for e in await store.read_all(copied.id)] == written[:30]
        more = await play(store, copied.id, range(11, 14))
        assert [e.data for e in await store.read_all(copied.id)] == written[:30] + more


async def test_a_version_2_store_is_read_and_upgraded(tmp_path: Path) -> None:
    """Rows a version 2 store wrote (whole JSON) read unchanged; new rows are deltas."""
    async with await EventStore.open(tmp_path) as store:
        sid = (await store.create_session()).id
    old = [d for n in range(1, 4) for d in turn(n)]
    with contextlib.closing(sqlite3.connect(tmp_path / "sessions.sqlite3")) as conn, conn:
        conn.execute("UPDATE store_meta SET value = '2' WHERE key = 'schema_version'")
        legacy_events_table(conn)
        conn.executemany(
            "INSERT INTO events (sid, seq, at, type, data) VALUES (1, ?, 5, ?, ?)",
            [(i, event_type(d), ENCODE(d)) for i, d in enumerate(old, 1)],
        )
        conn.execute("UPDATE sessions SET last_seq = ?, last_turn = 3", (len(old),))
    async with await EventStore.open(tmp_path) as store:
        new = await play(store, sid, range(4, 8))
        assert [e.data for e in await store.read_all(sid)] == old + new
    with contextlib.closing(sqlite3.connect(tmp_path / "sessions.sqlite3")) as conn:
        version = conn.execute("SELECT value FROM store_meta WHERE key = 'schema_version'")
        assert version.fetchone() == (str(STORE_SCHEMA_VERSION),)
    stored = rows(tmp_path / "sessions.sqlite3")
    assert stored[: len(old)] == [ENCODE(d) for d in old]
    assert any(r[:1] == MARK_DELTA for r in stored[len(old) :])


async def test_a_delta_whose_keyframe_is_missing_is_a_clear_error(tmp_path: Path) -> None:
    async with await EventStore.open(tmp_path) as store:
        sid = (await store.create_session()).id
        await play(store, sid, range(1, 3))
        with contextlib.closing(sqlite3.connect(store.path)) as conn, conn:
            conn.execute("UPDATE events SET data = ? WHERE seq = 8", (MARK_DELTA + b"1,99,xx",))
            conn.execute("UPDATE events SET data = ? WHERE seq = 9", (MARK_DELTA + b"1,2",))
        for seq in (8, 9):
            with pytest.raises(SessionError, match=r"keyframe|delta"):
                await store.read_seqs(sid, [seq])


def test_remembered_keyframes_stay_within_their_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deltas_module, "MAX_KEYFRAME_BYTES", 1000)
    codec = DeltaCodec()
    for sid in range(1, 200):
        codec.publish(PendingDeltas(frames={(sid, "user/message"): (1, b"{" + b"x" * 99)}))
        assert codec.stats()["keyframeBytes"] <= 1000


def assembly(n: int) -> RequestAssembly:
    """A trimmed story's request/assembly: sections, a sliding window of references."""
    sections = [AssemblyEntry(role="system", content=f"Section {i}. " * 90) for i in range(12)]
    window = [AssemblyEntry(role="user", ref=seq) for seq in range(max(1, 2 * n - 30), 2 * n)]
    return RequestAssembly(
        turn=n,
        step=1,
        projector="p",
        entries=(AssemblyEntry(role="system", ref=10_000 + n), *sections, *window),
        sha256=f"{n:064x}",
    )


async def test_chunked_rows_keep_short_pieces_inline_and_are_deltas_too(tmp_path: Path) -> None:
    written = [assembly(n) for n in range(1, 31)]
    async with await EventStore.open(tmp_path) as store:
        sid = (await store.create_session()).id
        for data in written:
            await store.append(sid, data)
        assert [e.data for e in await store.read_all(sid)] == written
    codec = BodyCodec()
    with contextlib.closing(sqlite3.connect(tmp_path / "sessions.sqlite3")) as conn:
        stored = [bytes(r[0]) for r in conn.execute("SELECT data FROM events ORDER BY seq")]
        expanded = [codec.deltas.expand(conn, r) if r[:1] == MARK_DELTA else r for r in stored]
        (chunks,) = conn.execute("SELECT count(*) FROM text_chunks").fetchone()
    assert stored[0][:1] == MARK_JSON and all(r[:1] == MARK_DELTA for r in stored[1:])
    assert all(r[:1] == MARK_JSON for r in expanded)
    pieces = msgspec.json.decode(expanded[-1][1:])
    assert any(isinstance(p, str) for p in pieces) and any(isinstance(p, int) for p in pieces)
    short = [p for p in pieces if isinstance(p, str)]
    assert all(len(p) < INLINE_JSON_CHUNK_BYTES or p.endswith('":[') for p in short)
    assert sum(map(len, stored[1:])) / len(stored[1:]) < 200  # a few dozen bytes of references
    assert chunks < 12 + 2 * len(written)  # the sections once, then a window chunk or two a turn
    async with await EventStore.open(tmp_path) as store:
        assert [e.data for e in await store.read_all(sid)] == written


async def test_a_version_2_chunked_row_reads_unchanged(tmp_path: Path) -> None:
    """Version 2 stored every JSON chunk as a row (ids only in the event row)."""
    data = assembly(40)
    async with await EventStore.open(tmp_path) as store:
        sid = (await store.create_session()).id
        await store.append(sid, data)
    with contextlib.closing(sqlite3.connect(tmp_path / "sessions.sqlite3")) as conn, conn:
        (row,) = conn.execute("SELECT data FROM events").fetchone()
        ids: list[int] = []
        for piece in msgspec.json.decode(row[1:]):
            if isinstance(piece, str):  # what version 2 made a text_chunks row
                body = piece.encode()
                digest = hashlib.sha256(b"json\x00" + body).digest()
                cursor = conn.execute(
                    "INSERT INTO text_chunks (hash, body) VALUES (?, ?)", (digest, body)
                )
                piece = cursor.lastrowid
            ids.append(piece)
        conn.execute("UPDATE events SET data = ?", (MARK_JSON + ENCODE(ids),))
        conn.execute("UPDATE store_meta SET value = '2' WHERE key = 'schema_version'")
    async with await EventStore.open(tmp_path) as store:
        assert [e.data for e in await store.read_all(sid)] == [data]


async def test_a_plugin_event_header_with_per_turn_values_adds_no_chunk(tmp_path: Path) -> None:
    """The fields before an event's array (here 400 bytes, with the turn and sizes in them)
    stay in the row, where the delta against the keyframe keeps only what changed."""
    fixed = {f"setting{i}": f"value {i} " * 3 for i in range(12)}

    def placement(n: int) -> ExtensionEvent:
        carriers = [{"order": i, "keys": [f"preset:{i:04}"], "bytes": 200 + i} for i in range(200)]
        payload = {"turn": n, "profileBytes": 52_000 + n, **fixed, "carriers": carriers}
        return ExtensionEvent(name="demo:placement", payload=payload)

    written = [placement(n) for n in range(1, 31)]
    async with await EventStore.open(tmp_path) as store:
        sid = (await store.create_session()).id
        for data in written[:2]:
            await store.append(sid, data)
        with contextlib.closing(sqlite3.connect(store.path)) as conn:
            (before,) = conn.execute("SELECT count(*) FROM text_chunks").fetchone()
        for data in written[2:]:
            await store.append(sid, data)
        assert [e.data for e in await store.read_all(sid)] == written
    with contextlib.closing(sqlite3.connect(tmp_path / "sessions.sqlite3")) as conn:
        (after,) = conn.execute("SELECT count(*) FROM text_chunks").fetchone()
        sizes = [len(r[0]) for r in conn.execute("SELECT data FROM events ORDER BY seq")]
    assert len(ENCODE(written[0])) > 8192 and after == before
    assert max(sizes[1:]) < 100


def words(n: int, count: int = 60) -> str:
    """What a player types: ``count`` words, different every turn."""
    return " ".join(f"w{(n * 7919 + i * 104729) % 5003}" for i in range(count))


def prompted_turn(n: int) -> list[list[EventData]]:
    """The appends of one agent turn: the prompt queued (its own transaction), then the turn
    claiming it and repeating its text in the user message."""
    item = InboxItem(id=f"in{n}", content=text_content(words(n)))
    return [
        [InboxSpliced(op="insert", target="next-turn", start=0, inserted=(item,))],
        [
            TurnStart(turn=n),
            InboxSpliced(op="claim", target="next-turn", start=0, removed_count=1, turn=n),
            UserMessage(message_id=f"in{n}", content=text_content(words(n)), turn=n),
        ],
        [
            AssistantMessage(message_id=f"a{n}", content=text_content(f"Reply {n}."), turn=n),
            TurnEnd(turn=n, reason=TurnEndReason(kind="completed")),
        ],
    ]


def stored_rows(path: Path) -> dict[int, bytes]:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return {seq: bytes(data) for seq, data in conn.execute("SELECT seq, data FROM events")}


async def test_a_user_message_is_a_delta_against_the_splice_that_queued_its_text(
    tmp_path: Path,
) -> None:
    """The user's words are stored once: the user message names the inbox splice as its
    base and keeps only what differs; reads (warm and after a restart) are exact."""
    written: list[EventData] = []
    async with await EventStore.open(tmp_path) as store:
        sid = (await store.create_session()).id
        for n in range(1, 21):
            for batch in prompted_turn(n):
                await store.append_many(sid, batch)
                written.extend(batch)
        assert [e.data for e in await store.read_all(sid)] == written
    stored = stored_rows(tmp_path / "sessions.sqlite3")
    users = [seq for seq, data in enumerate(written, 1) if isinstance(data, UserMessage)]
    based = [stored[seq] for seq in users[2:] if stored[seq][:1] == MARK_BASED_DELTA]
    assert len(based) == len(users) - 2
    for row in based:
        base_seq = int(row[1:].split(b",")[2])
        assert isinstance(written[base_seq - 1], InboxSpliced)  # the splice that queued it
        assert stored[base_seq][:1] != MARK_BASED_DELTA  # never two levels of bases
    text = len(words(1).encode())
    assert max(map(len, based)) < text / 4  # the words are not stored a second time
    async with await EventStore.open(tmp_path) as store:
        assert [e.data for e in await store.read_all(sid)] == written
        for seq in users:  # one event at a time, from a cold cache
            assert (await store.read_seqs(sid, [seq]))[seq].data == written[seq - 1]


async def test_a_rolled_back_row_is_never_a_base(tmp_path: Path) -> None:
    """A splice whose transaction rolled back gives its seq to the next event; a later user
    message with the same words must not be inflated against what that seq holds now."""
    async with await EventStore.open(tmp_path) as store:
        sid = (await store.create_session()).id
        for batch in prompted_turn(1):
            await store.append_many(sid, batch)
        item = InboxItem(id="gone", content=text_content(words(2)))
        doomed = InboxSpliced(op="insert", target="next-turn", start=0, inserted=(item,))
        with pytest.raises(TurnConflict):
            await store.append_many(
                sid, [doomed, TurnEnd(turn=9, reason=TurnEndReason(kind="completed"))]
            )
        other = ExtensionEvent(name="demo:note", payload={"note": "x" * 300})
        await store.append(sid, other)
        user = UserMessage(message_id="u2", content=text_content(words(2)), turn=2)
        await store.append_many(sid, [TurnStart(turn=2), user])
        events = await store.read_all(sid)
        assert [e.data for e in events[-3:]] == [other, TurnStart(turn=2), user]
    async with await EventStore.open(tmp_path) as store:
        assert (await store.read_all(sid))[-1].data == user


def test_bases_are_bounded_and_forgotten() -> None:
    codec = DeltaCodec()
    blob = b'{"type":"x","text":"' + b"y" * 1000 + b'"}'
    for sid in range(1, 4000):
        pending = PendingDeltas()
        for seq in range(1, 12):
            codec.encode((sid, "x"), seq, blob, pending)
        codec.publish(pending)
        assert codec.stats()["baseBytes"] <= deltas_module.MAX_RECENT_BYTES
    codec.forget()
    assert codec.stats()["baseBytes"] == 0


def test_sized_deflate_streams_inflate_with_the_full_window() -> None:
    """Rows are deflated with a window sized to them; reads inflate with zlib's full window
    and the same dictionary, whatever the sizes (dictionaries past the window included)."""
    rng = random.Random(7)
    vocabulary = [f"w{i}".encode() for i in range(300)]
    for _ in range(300):
        zdict = b" ".join(rng.choices(vocabulary, k=rng.choice([0, 5, 100, 3000, 12000])))
        data = b" ".join(rng.choices(vocabulary, k=rng.choice([1, 40, 400, 5000])))
        stream = raw_deflate(data, zdict or None, 6)
        inflater = zlib.decompressobj(-15, zdict=zdict) if zdict else zlib.decompressobj(-15)
        assert inflater.decompress(stream) + inflater.flush() == data
