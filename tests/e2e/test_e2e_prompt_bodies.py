"""Durable prompts without copies: an old turn's v3 assembly detail reads byte for byte the same
whether its system prompt row is stored whole (as before content addressing) or as shared
chunks, and after restarts; nothing a row references is deleted."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import msgspec
import pytest

from innkeeper_core.sessions.bodies import MARK, MARK_JSON, BodyCodec
from innkeeper_core.sessions.deltas import is_delta
from innkeeper_core.testing import CoreTestHost, start_test_host
from innkeeper_hostapi.agents import AGENTS, SESSIONS
from innkeeper_hostapi.sessions import event_type as hostapi_event_type
from innkeeper_tavern.plugin import TAVERN_RESOURCES
from innkeeper_tavern.state.session_bindings import SESSION_SELECTIONS, Selection

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "sillytavern-corpus"
PRESET = CORPUS / "prolix-oc-st-presets" / "presets" / "Lucid Loom v2.8.json"
CARD = CORPUS / "prolix-oc-st-presets" / "cards" / "Pxansatu.json"
V3 = "/pmp-dsh-tavern/api/v3"


async def tavern_host(data_dir: Path, assembler: bool) -> CoreTestHost:
    host = await start_test_host(data_dir)
    if assembler:
        await host.load("assembler", "innkeeper_assembler.plugin")
    await host.load("tavern", "innkeeper_tavern.plugin")
    return host


async def detail(host: CoreTestHost, session: str, record: str) -> bytes:
    resp = await host.client.get(f"{V3}/sessions/{session}/assemblies/{record}")
    assert resp.status == 200
    return await resp.read()


def rows_of(data_dir: Path, event_type: str) -> list[bytes]:
    """The rows of ``event_type`` as stored; a delta row as the row it stands for."""
    codec = BodyCodec()
    with closing(sqlite3.connect(data_dir / "sessions.sqlite3")) as conn:
        rows = conn.execute("SELECT data FROM events ORDER BY sid, seq").fetchall()
        return [
            codec.deltas.expand(conn, r[0]) if is_delta(r[0]) else bytes(r[0])
            for r in rows
            if hostapi_event_type(codec.load(conn, r[0])) == event_type
        ]


def system_rows(data_dir: Path) -> list[bytes]:
    return rows_of(data_dir, "system/message")


def section_metadata_bytes(row: bytes) -> int:
    """Bytes of the ``sections`` list inside a chunked ``system/message`` row (0 otherwise)."""
    if row[:1] != MARK:
        return 0
    event = msgspec.json.decode(row[1:])[0]
    sections = event.get("sections") if isinstance(event, dict) else None
    return len(msgspec.json.encode(sections)) if sections else 0


def unchunk(data_dir: Path) -> int:
    """Rewrite every chunked or delta row the way the store wrote it before chunking (whole
    JSON); returns the chunk count, which must not change."""
    codec, encode = BodyCodec(), msgspec.json.Encoder().encode
    with closing(sqlite3.connect(data_dir / "sessions.sqlite3")) as conn, conn:
        rows = conn.execute("SELECT sid, seq, data FROM events").fetchall()
        # Everything read before anything is rewritten: a delta inflates against its keyframe.
        wholes = [
            (encode(codec.load(conn, data)), sid, seq)
            for sid, seq, data in rows
            if data[:1] in (MARK, MARK_JSON) or is_delta(data)
        ]
        conn.executemany("UPDATE events SET data = ? WHERE sid = ? AND seq = ?", wholes)
        (count,) = conn.execute("SELECT count(*) FROM text_chunks").fetchone()
        return int(count)


@pytest.mark.parametrize("assembler", [False, True], ids=["compatibility", "rp-strategy"])
async def test_old_assembly_detail_is_byte_identical_across_storage_and_restarts(
    tmp_path: Path, assembler: bool
) -> None:
    data_dir = tmp_path / "data"
    host = await tavern_host(data_dir, assembler)
    try:
        resources = host.get(TAVERN_RESOURCES)
        preset = await resources.import_preset(PRESET.read_text(encoding="utf-8"), None)
        card = await resources.import_character(CARD.read_bytes(), CARD.name)
        user = await resources.create_user({"name": "Ada", "description": "A ranger."})
        session = (await host.get(SESSIONS).create(title="bodies")).id
        await host.get(SESSION_SELECTIONS).set(
            session,
            Selection(preset_id=preset.id, character_card_id=card.record.id, user_id=user.id),
        )
        agents = host.get(AGENTS)
        for text in ("I raise the lantern.", "We walk on.", "The gate opens."):
            await agents.prompt(session, text)
            await agents.wait_idle(session)
        first = await detail(host, session, "t1-s1")
        second = await detail(host, session, "t2-s1")
    finally:
        await host.close()
    assert b'"verified"' in first
    assert len(first) > 20_000  # the verified prompt bodies are part of the detail
    if assembler:  # the RP strategy: request-only sections and history refs, as JSON chunks
        rows = rows_of(data_dir, "request/assembly")
        assert len(rows) == 3 and all(r[:1] == MARK_JSON for r in rows)
    else:  # the compatibility renderer: one system prompt per turn, as text chunks
        rows = system_rows(data_dir)
        assert len(rows) == 3 and all(r[:1] == MARK for r in rows)
    # Prompts of tens of KB each: references only. A system message row also names the
    # sections it was assembled from (names and byte spans: metadata, never text).
    assert sum(len(r) - section_metadata_bytes(r) for r in rows) < 3 * 1024

    host = await tavern_host(data_dir, assembler)  # a restart reads the same bytes
    try:
        assert await detail(host, session, "t1-s1") == first
        assert await detail(host, session, "t2-s1") == second
    finally:
        await host.close()

    chunks = unchunk(data_dir)  # the rows as the store wrote them before content addressing
    assert all(r[:1] == b"{" for r in rows_of(data_dir, "request/assembly") + system_rows(data_dir))
    host = await tavern_host(data_dir, assembler)
    try:
        assert await detail(host, session, "t1-s1") == first
        assert await detail(host, session, "t2-s1") == second
    finally:
        await host.close()
    with closing(sqlite3.connect(data_dir / "sessions.sqlite3")) as conn:
        assert conn.execute("SELECT count(*) FROM text_chunks").fetchone() == (chunks,)
