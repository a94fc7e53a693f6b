"""Content-addressed message bodies: stored once per distinct section, read back exactly."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import msgspec

from innkeeper_core.sessions import EventStore
from innkeeper_core.sessions.bodies import (
    CHUNKED_TEXT_MIN_CHARS,
    MARK_DEFLATED_JSON,
    MARK_DEFLATED_TEXT,
    MARK_JSON,
    MAX_CHUNK_CHARS,
    BodyCodec,
    split_chunks,
    split_json,
    unpack_chunk,
)
from innkeeper_core.sessions.deltas import is_delta
from innkeeper_hostapi.sessions import (
    AssemblyEntry,
    AssistantMessage,
    RequestAssembly,
    SessionEvent,
    SystemMessage,
    TextBlock,
    UserMessage,
    text_content,
)

from .conftest import legacy_events_table

ENCODE = msgspec.json.Encoder().encode


def prompt(turn: int, paragraphs: int = 300) -> str:
    """A long system prompt whose paragraph ``turn % paragraphs`` changes each turn."""
    parts = [
        f"Rule {i}: " + "the inn keeps its doors open. " * (3 + i % 9) for i in range(paragraphs)
    ]
    parts[turn % paragraphs] = f"Roll for turn {turn}: {turn * 7 % 40}"
    return "\n\n".join(parts)


def undelta(conn: sqlite3.Connection, row: bytes) -> bytes:
    """The row a stored row stands for (a delta row's expansion, ``deltas``)."""
    return BodyCodec().deltas.expand(conn, row) if is_delta(row) else bytes(row)


def test_chunks_join_back_and_stay_bounded() -> None:
    for text in (prompt(1), "x" * (3 * MAX_CHUNK_CHARS + 5), "a\n\n\n\nb", "\n\n" * 3000, ""):
        chunks = split_chunks(text)
        assert "".join(chunks) == text
        assert all(0 < len(c) <= MAX_CHUNK_CHARS for c in chunks)


def test_an_edited_paragraph_changes_few_chunks() -> None:
    before, after = set(split_chunks(prompt(1))), split_chunks(prompt(2))
    changed = [c for c in after if c not in before]
    assert len(changed) <= 3
    assert sum(map(len, changed)) < len(prompt(2)) / 10


def chunk_sizes(conn: sqlite3.Connection) -> list[int]:
    """The length of each stored chunk as written (characters or JSON bytes), whether its
    body is stored deflated or not."""
    return [len(unpack_chunk(body)) for (body,) in conn.execute("SELECT body FROM text_chunks")]


def chunk_rows(path: Path) -> tuple[int, int]:
    with sqlite3.connect(path / "sessions.sqlite3") as conn:
        sizes = chunk_sizes(conn)
    return len(sizes), sum(sizes)


async def test_identical_sections_are_stored_once_and_read_back_exactly(tmp_path: Path) -> None:
    written: list[SystemMessage] = []
    async with await EventStore.open(tmp_path) as store:
        sid = (await store.create_session()).id
        for turn in range(1, 41):
            data = SystemMessage(
                message_id=f"s{turn}", content=text_content(prompt(turn)), turn=turn
            )
            written.append(data)
            await store.append(sid, data)
        await store.append(sid, UserMessage(message_id="u", content=text_content("short")))
        first = await store.read_all(sid)
    count, chars = chunk_rows(tmp_path)
    total = sum(len(d.content[0].text) for d in written)
    # One prompt's worth plus the few changed chunks of each later turn, not 40 copies.
    assert chars < len(prompt(1)) + 39 * 4 * 1024
    assert chars < total / 8
    assert count > 1
    async with await EventStore.open(tmp_path) as store:  # after a restart
        again = await store.read_all(sid)
        page = await store.page(sid, limit=5)
    assert [e.data for e in first[:40]] == written
    assert ENCODE(again) == ENCODE(first)
    assert [ENCODE(e) for e in page.events] == [ENCODE(e) for e in reversed(first[-5:])]


async def test_forks_read_the_shared_chunks(tmp_path: Path) -> None:
    async with await EventStore.open(tmp_path) as store:
        sid = (await store.create_session()).id
        body = prompt(3)
        await store.append(sid, SystemMessage(message_id="s", content=text_content(body)))
        child = await store.fork(sid, 1)
        await store.append(child.id, SystemMessage(message_id="c", content=text_content(body)))
        events = await store.read_all(child.id)
        assert [e.data.content[0].text for e in events] == [body, body]  # type: ignore[union-attr]
    assert chunk_rows(tmp_path)[1] == len(body)  # the child's copy added no chunk


async def test_mixed_blocks_keep_their_order_and_short_texts(tmp_path: Path) -> None:
    long = "p\n\n" * CHUNKED_TEXT_MIN_CHARS
    data = UserMessage(
        message_id="m",
        content=(TextBlock(text="before"), TextBlock(text=long), TextBlock(text="after")),
    )
    async with await EventStore.open(tmp_path) as store:
        sid = (await store.create_session()).id
        event = await store.append(sid, data)
        (read,) = await store.read_all(sid)
    assert read == SessionEvent(seq=event.seq, at=event.at, data=data)


async def test_a_version_1_store_is_read_and_upgraded(tmp_path: Path) -> None:
    """Rows written before chunking (plain JSON) read unchanged next to chunked ones."""
    body = prompt(5)
    async with await EventStore.open(tmp_path) as store:
        sid = (await store.create_session()).id
    legacy = SystemMessage(message_id="old", content=text_content(body))
    with sqlite3.connect(tmp_path / "sessions.sqlite3") as conn:  # what version 1 wrote
        conn.execute("DROP TABLE text_chunks")
        conn.execute("UPDATE store_meta SET value = '1' WHERE key = 'schema_version'")
        legacy_events_table(conn)
        conn.execute(
            "INSERT INTO events (sid, seq, at, type, data) VALUES (1, 1, 5, 'system/message', ?)",
            (ENCODE(legacy),),
        )
        conn.execute("UPDATE sessions SET last_seq = 1")
    async with await EventStore.open(tmp_path) as store:
        await store.append(sid, SystemMessage(message_id="new", content=text_content(body)))
        events = await store.read_all(sid)
    assert [e.data for e in events] == [
        legacy,
        SystemMessage(message_id="new", content=text_content(body)),
    ]
    with sqlite3.connect(tmp_path / "sessions.sqlite3") as conn:
        assert conn.execute("SELECT value FROM store_meta").fetchone() == ("4",)
        rows = [r[0][:1] for r in conn.execute("SELECT data FROM events ORDER BY seq")]
    assert rows == [b"{", b"\x00"]


def test_json_chunks_join_back_on_utf8_boundaries() -> None:
    entries = [{"role": "user", "ref": i} for i in range(3000)]
    blobs = [
        ENCODE({"entries": entries}),
        ENCODE({"content": "é€𝄞" * 20_000}),  # one long string: cut inside it
        b"[]",
    ]
    for blob in blobs:
        chunks = split_json(blob)
        assert b"".join(chunks) == blob
        assert all(0 < len(c) <= MAX_CHUNK_CHARS for c in chunks)
        for chunk in chunks:
            chunk.decode()  # never inside a UTF-8 sequence


async def test_growing_assemblies_store_only_what_changed(tmp_path: Path) -> None:
    """A request/assembly lists every history message: each turn's row adds its new tail."""
    section = AssemblyEntry(role="system", content=prompt(0))
    written: list[RequestAssembly] = []
    async with await EventStore.open(tmp_path) as store:
        sid = (await store.create_session()).id
        for turn in range(1, 201):
            refs = tuple(AssemblyEntry(role="user", ref=seq) for seq in range(1, 2 * turn))
            data = RequestAssembly(
                turn=turn, step=1, projector="p", entries=(section, *refs), sha256="0" * 64
            )
            written.append(data)
            await store.append(sid, data)
        read = await store.read_all(sid)
    assert [e.data for e in read] == written
    total = sum(len(ENCODE(d)) for d in written)
    with sqlite3.connect(tmp_path / "sessions.sqlite3") as conn:
        (stored,) = conn.execute(
            "SELECT total(length(body)) + (SELECT total(length(data)) FROM events) FROM text_chunks"
        ).fetchone()
    assert stored < total / 20


async def test_a_sliding_window_with_sections_at_depth_stores_only_what_changed(
    tmp_path: Path,
) -> None:
    """A trimmed story's request/assembly: request-only sections (with ``{{char}},`` and
    ``[{{user}}]`` in their text, as presets write them) before the history and at depths
    inside it, a window of references that slides every turn, the turn and digest changing.
    Each section is a chunk of its own (never tied to the references beside it), so a turn
    stores the header, the few references that moved and the digest, not its sections."""
    sections = [
        AssemblyEntry(role="system", content=f"## Section {i}: {{{{char}}}}, [{{{{user}}}}] " * n)
        for i, n in enumerate([3, 8, 20, 60, 150] * 6)
    ]
    written: list[RequestAssembly] = []
    async with await EventStore.open(tmp_path) as store:
        sid = (await store.create_session()).id
        for turn in range(1, 121):
            window = [
                AssemblyEntry(role="user" if seq % 2 else "assistant", ref=seq)
                for seq in range(max(1, 2 * turn - 40), 2 * turn)
            ]
            entries = (
                AssemblyEntry(role="system", ref=10_000 + turn),  # the turn's system message
                *sections[:24],
                *window[:-4],
                *sections[24:27],  # at depth 4
                *window[-4:],
                *sections[27:],  # at depth 0
            )
            data = RequestAssembly(
                turn=turn, step=1, projector="p", entries=entries, sha256=f"{turn:064x}"
            )
            written.append(data)
            await store.append(sid, data)
        read = await store.read_all(sid)
    assert [e.data for e in read] == written
    with sqlite3.connect(tmp_path / "sessions.sqlite3") as conn:
        rows = [undelta(conn, r[0]) for r in conn.execute("SELECT data FROM events ORDER BY seq")]
        chunk_bytes = sum(chunk_sizes(conn))
    assert all(r[:1] == MARK_JSON for r in rows)
    first = len(ENCODE(written[0]))
    # The first turn stores everything once (~53 KB); each later one about 2 KB: the header,
    # the chunks of references around the window's ends and the depth, the digest. (Cutting
    # at every "}," stored about 33 KB a turn here: sections were tied to their neighbours.)
    assert (chunk_bytes - first) / (len(written) - 1) < 4_000 < first / 10


def reply(turn: int, chars: int = 3_000) -> str:
    """A roleplay-length reply: prose from a few hundred words, different every turn."""
    words = [f"{stem}{i % 37}" for i, stem in enumerate(("lantern", "cellar", "rain", "ash") * 90)]
    out: list[str] = []
    n = turn * 7919
    while sum(map(len, out)) < chars:
        n = (n * 1103515245 + 12345) % 2**31
        out.append(words[n % len(words)] + (".\n\n" if n % 23 == 0 else " "))
    return "".join(out)


async def test_chunk_bodies_are_stored_deflated_and_read_back_exactly(tmp_path: Path) -> None:
    """A reply's text chunks and an assembly's JSON chunks are deflated on disk; reads (from
    the cache and, after a restart, from disk) return exactly what was written."""
    refs = tuple(AssemblyEntry(role="user" if i % 2 else "assistant", ref=i) for i in range(400))
    written = [
        *(
            AssistantMessage(message_id=f"a{t}", content=text_content(reply(t)), turn=t)
            for t in range(1, 6)
        ),
        RequestAssembly(turn=1, step=1, projector="p", entries=refs, sha256="0" * 64),
    ]
    async with await EventStore.open(tmp_path) as store:
        sid = (await store.create_session()).id
        for data in written:
            await store.append(sid, data)
        assert [e.data for e in await store.read_all(sid)] == written
    with sqlite3.connect(tmp_path / "sessions.sqlite3") as conn:
        bodies = [body for (body,) in conn.execute("SELECT body FROM text_chunks")]
    texts = [b for b in bodies if isinstance(unpack_chunk(b), str)]
    assert texts and all(b[:1] == MARK_DEFLATED_TEXT for b in texts)
    assert sum(map(len, texts)) < 0.7 * sum(len(unpack_chunk(b)) for b in texts)
    jsons = [b for b in bodies if isinstance(unpack_chunk(b), bytes)]
    assert jsons and all(b[:1] == MARK_DEFLATED_JSON for b in jsons)
    assert sum(map(len, jsons)) < 0.2 * sum(len(unpack_chunk(b)) for b in jsons)
    async with await EventStore.open(tmp_path) as store:
        assert [e.data for e in await store.read_all(sid)] == written


async def test_a_version_3_store_with_plain_chunks_reads_and_shares_them(tmp_path: Path) -> None:
    """Version 3 stored chunk bodies plain; they read unchanged, are upgraded to version 4 in
    place, and the same text written again reuses their rows (chunks are keyed by content)."""
    old = AssistantMessage(message_id="old", content=text_content(reply(9)), turn=1)
    async with await EventStore.open(tmp_path) as store:
        sid = (await store.create_session()).id
        await store.append(sid, old)
    with sqlite3.connect(tmp_path / "sessions.sqlite3") as conn:  # what version 3 wrote
        for chunk_id, body in conn.execute("SELECT id, body FROM text_chunks").fetchall():
            conn.execute(
                "UPDATE text_chunks SET body = ? WHERE id = ?", (unpack_chunk(body), chunk_id)
            )
        conn.execute("UPDATE store_meta SET value = '3' WHERE key = 'schema_version'")
        before = conn.execute("SELECT count(*), max(typeof(body)) FROM text_chunks").fetchone()
    assert before[1] == "text"
    again = AssistantMessage(message_id="again", content=text_content(reply(9)), turn=2)
    async with await EventStore.open(tmp_path) as store:
        await store.append(sid, again)
        assert [e.data for e in await store.read_all(sid)] == [old, again]
    with sqlite3.connect(tmp_path / "sessions.sqlite3") as conn:
        assert conn.execute("SELECT count(*) FROM text_chunks").fetchone()[0] == before[0]
        assert conn.execute("SELECT value FROM store_meta").fetchone() == ("4",)


async def test_a_version_3_events_table_loses_its_type_column_and_reads_back(
    tmp_path: Path,
) -> None:
    """Version 4 drops the events' ``type`` column (the type is inside each row): a version 3
    file is rebuilt on open, every row reads back unchanged, forks and appends go on."""
    written = [
        AssistantMessage(message_id=f"a{t}", content=text_content(reply(t)), turn=t)
        for t in range(1, 4)
    ]
    async with await EventStore.open(tmp_path) as store:
        sid = (await store.create_session()).id
        for data in written:
            await store.append(sid, data)
    with sqlite3.connect(tmp_path / "sessions.sqlite3") as conn:
        legacy_events_table(conn)
        conn.execute("UPDATE store_meta SET value = '3' WHERE key = 'schema_version'")
        before = conn.execute("SELECT sid, seq, at, data FROM events ORDER BY seq").fetchall()
    async with await EventStore.open(tmp_path) as store:
        assert [e.data for e in await store.read_all(sid)] == written
        child = (await store.fork(sid, 2)).id
        more = UserMessage(message_id="u", content=text_content("and then?"))
        await store.append(child, more)
        assert [e.data for e in await store.read_all(child)] == [*written[:2], more]
        previews = {s.header.id: s.last_message for s in (await store.list_sessions()).sessions}
        assert previews[sid] is not None and previews[sid].seq == 3  # found by the new flag
        assert previews[child] is not None and previews[child].role == "user"
    with sqlite3.connect(tmp_path / "sessions.sqlite3") as conn:
        columns = [r[1] for r in conn.execute("PRAGMA table_info(events)")]
        after = conn.execute("SELECT sid, seq, at, data FROM events WHERE sid = 1 ORDER BY seq")
        assert columns == ["sid", "seq", "at", "message", "data"]
        assert after.fetchall() == before
        assert conn.execute("SELECT value FROM store_meta").fetchone() == ("4",)
