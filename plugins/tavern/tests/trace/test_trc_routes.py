"""A bound turn over HTTP → one canonical record; /traces, v3 index/detail, capabilities."""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

from innkeeper_tavern.state.trace import ASSEMBLY_TRACE

TraceHost = Any


async def _stored_bytes(trace_host: TraceHost, session: str) -> bytes:
    """Every stored record's JSON (rows are deltas against deflated chunks on disk: what they
    decode to is what must hold no body)."""
    store = trace_host.host.get(ASSEMBLY_TRACE)
    return b"".join(await store.stored_json(session))


async def test_bound_turn_records_one_verified_assembly(trace_host: TraceHost) -> None:
    ids = await trace_host.bound_session()
    session = ids["session"]
    await trace_host.prompt(session, "I raise the lantern.")
    records = await trace_host.host.get(ASSEMBLY_TRACE).records(session)
    assert len(records) == 1
    record = records[0]
    assert (record.schema_version, record.turn, record.step, record.status) == (4, 1, 1, "sent")

    events = await trace_host.events(session)
    by_seq = {e["seq"]: e for e in events}
    refs = record.references
    assert refs.system is not None and by_seq[refs.system.seq]["data"]["type"] == "system/message"
    assert [by_seq[r.seq]["data"]["type"] for r in refs.input] == ["user/message"]
    assert [by_seq[r.seq]["data"]["type"] for r in refs.headers] == ["request/header"]
    assert refs.reply is not None and refs.turn_end is not None
    assert record.authority.tavern_profile_present is True
    assert record.authority.tavern_call_config_applied is True
    system_text = by_seq[refs.system.seq]["data"]["content"][0]["text"]
    assert record.system.bytes == len(system_text.encode())

    # v3 index: no bodies.
    index = await trace_host.v3(f"/sessions/{session}/assemblies")
    assert [a["recordId"] for a in index["assemblies"]] == [record.record_id]
    assert "The lantern of the glade" not in str(index)
    # v3 detail: bodies verified from history.
    detail = await trace_host.v3(f"/sessions/{session}/assemblies/{record.record_id}")
    assert detail["verification"]["status"] == "verified"
    assert detail["system"]["text"] == system_text
    assert all(s["status"] == "verified" for s in detail["sections"])
    assert "".join(s["text"] for s in detail["sections"] if "lore" in str(s["sources"]))
    assert any("The lantern of the glade" in s["text"] for s in detail["sections"])
    assert detail["context"][0]["text"] == "I raise the lantern."
    assert detail["request"]["headers"][0]["status"] == "verified"

    traces = await trace_host.v1("GET", f"/traces?sessionId={session}")
    assert len(traces["records"]) == 1
    book = traces["records"][0]["worldBooks"]
    assert any(
        d["decision"] == "included" and d["entryName"] == "Lantern"
        for b in book
        for d in b["decisions"]
    )
    assert "The lantern of the glade" not in str(traces)

    # The stored file holds no body: no lore text, no card text, no message text.
    stored = await _stored_bytes(trace_host, session)
    assert b"t1-s1" in stored
    system_lines = [line for line in system_text.splitlines() if len(line) > 30]
    assert system_lines
    for body in ("The lantern of the glade", "I raise the lantern.", *system_lines):
        assert body.encode() not in stored

    # /active runs an assembly but never writes a historical record.
    await trace_host.v1("GET", f"/active?sessionId={session}")
    assert len(await trace_host.host.get(ASSEMBLY_TRACE).records(session)) == 1


async def test_capabilities_and_no_sources_route(trace_host: TraceHost) -> None:
    caps = await trace_host.v3("/capabilities")
    assert caps["ok"] is True and caps["version"] == 3 and caps["schemaVersion"] == 4
    assert caps["capabilities"]["sourceText"] is False
    assert caps["capabilities"]["sourcesRoute"] is False
    assert caps["limits"]["maxWorldBooks"] == 16 and caps["limits"]["maxDecisions"] == 128
    assert caps["sourceMapping"]["bodies"]["system"] == "system/message"
    session = await trace_host.new_session()
    for path in (f"/sessions/{session}/sources", "/sessions/nobody/sources"):
        resp = await trace_host.host.client.get("/pmp-dsh-tavern/api/v3" + path)
        assert resp.status == 404
        assert (await resp.json())["ok"] is False


async def test_route_errors(trace_host: TraceHost) -> None:
    missing = await trace_host.v1("GET", "/traces", status=400)
    assert missing["code"] == "SESSION_ID_INVALID"
    bad = await trace_host.v1("GET", "/traces?sessionId=..%2Fetc", status=400)
    assert bad["code"] == "SESSION_ID_INVALID"
    empty = await trace_host.v1("GET", "/traces?sessionId=unknown-session")
    assert empty["records"] == [] and empty["storage"]["maxRecordsPerSession"] == 128
    assert (await trace_host.v3("/sessions/unknown/assemblies", 404))["code"] == "SESSION_NOT_FOUND"
    session = await trace_host.new_session()
    assert (await trace_host.v3(f"/sessions/{session}/assemblies"))["assemblies"] == []
    gone = await trace_host.v3(f"/sessions/{session}/assemblies/t9-s1", 404)
    assert gone["code"] == "ASSEMBLY_RECORD_NOT_FOUND"
    nobody = await trace_host.v3("/sessions/unknown/assemblies/t1-s1", 404)
    assert nobody["code"] == "SESSION_NOT_FOUND"


async def test_parameter_fallback_is_recorded_per_attempt(trace_host: TraceHost) -> None:
    ids = await trace_host.bound_session()
    session = ids["session"]
    trace_host.provider.reject = ("temperature",)
    await trace_host.prompt(session, "Hello there")
    detail = await trace_host.v3(f"/sessions/{session}/assemblies/t1-s1")
    record = detail["assembly"]
    assert record["status"] == "sent"
    parameters = record["parameters"]
    assert parameters["requested"]["temperature"] == 1.0
    assert parameters["omitted"] == ["temperature"]
    assert [a["attempt"] for a in parameters["attempts"]] == [1, 2]
    assert parameters["effective"]["temperature"] is None
    assert [h["status"] for h in detail["request"]["headers"]] == ["verified", "verified"]
    assert [e["code"] for e in detail["request"]["errors"]] == ["PROVIDER_INVALID_PARAMETER"]
    traces = await trace_host.v1("GET", f"/traces?sessionId={session}")
    row = traces["records"][0]
    assert row["id"] == "1:1:2" and row["status"] == "header-observed"
    assert row["authority"]["tavernCallConfigApplied"] is True


async def test_failed_turn_reports_verified_failure(trace_host: TraceHost) -> None:
    from innkeeper_core.providers.synthetic import SyntheticReply
    from innkeeper_hostapi.providers import ProviderError

    ids = await trace_host.bound_session()
    session = ids["session"]
    trace_host.provider.enqueue(SyntheticReply(text="", error=ProviderError("server", "boom")))
    await trace_host.prompt(session, "Hello")
    index = await trace_host.v3(f"/sessions/{session}/assemblies")
    assert [a["status"] for a in index["assemblies"]] == ["failed"]
    detail = await trace_host.v3(f"/sessions/{session}/assemblies/t1-s1")
    assert detail["failure"]["status"] == "verified"
    assert detail["failure"]["code"] == "PROVIDER_SERVER"
    assert detail["reply"] is None
    traces = await trace_host.v1("GET", f"/traces?sessionId={session}")
    assert traces["records"][0]["status"] == "request-error"


async def test_turns_accumulate_newest_first(trace_host: TraceHost) -> None:
    ids = await trace_host.bound_session()
    session = ids["session"]
    await trace_host.prompt(session, "one")
    await trace_host.prompt(session, "two dragon")
    index = await trace_host.v3(f"/sessions/{session}/assemblies")
    assert [a["recordId"] for a in index["assemblies"]] == ["t2-s1", "t1-s1"]
    for entry in index["assemblies"]:
        detail = await trace_host.v3(f"/sessions/{session}/assemblies/{entry['recordId']}")
        assert detail["verification"]["status"] == "verified"
    second = await trace_host.v3(f"/sessions/{session}/assemblies/t2-s1")
    assert [c["text"] for c in second["context"]] == ["two dragon"]


async def test_a_fork_records_its_own_assemblies(trace_host: TraceHost) -> None:
    ids = await trace_host.bound_session()
    session = ids["session"]
    await trace_host.prompt(session, "one")
    events = await trace_host.events(session)
    fork = await trace_host.call(
        "POST", f"/host/api/sessions/{session}/fork", {"atEventId": events[-1]["seq"]}, 201
    )
    child = fork["session"]["id"]
    assert (await trace_host.v3(f"/sessions/{child}/assemblies"))["assemblies"] == []
    await trace_host.prompt(child, "two in the fork")
    (entry,) = (await trace_host.v3(f"/sessions/{child}/assemblies"))["assemblies"]
    assert entry["turn"] == 2
    detail = await trace_host.v3(f"/sessions/{child}/assemblies/{entry['recordId']}")
    assert detail["verification"]["status"] == "verified"
    assert [c["text"] for c in detail["context"]] == ["two in the fork"]
    parent = await trace_host.v3(f"/sessions/{session}/assemblies")
    assert [a["recordId"] for a in parent["assemblies"]] == ["t1-s1"]


async def test_a_tool_step_is_its_own_verified_record(trace_host: TraceHost) -> None:
    from innkeeper_core.providers.synthetic import SyntheticReply
    from innkeeper_hostapi.tools import ToolInvocation

    async def look(call: ToolInvocation) -> str:
        return "The lantern burns."

    tools = trace_host.host.plugins.registries.tools
    entry = tools.add(
        "test", "look", "Look.", {"type": "object"}, look, risk="read-only", timeout_s=None
    )
    try:
        ids = await trace_host.bound_session()
        session = ids["session"]
        trace_host.provider.enqueue(SyntheticReply.calling(("look", {})), "It glows.")
        await trace_host.prompt(session, "I look at the lantern.")
        records = await trace_host.host.get(ASSEMBLY_TRACE).records(session)
        assert [(r.turn, r.step, r.status) for r in records] == [(1, 1, "sent"), (1, 2, "sent")]
        first, second = (r.references for r in records)
        assert first.claim is not None and second.claim is None
        assert len(first.headers) == len(second.headers) == 1
        assert first.headers[0].seq < first.reply.seq < second.headers[0].seq  # type: ignore[union-attr]
        assert second.turn_end is not None and first.turn_end is None
        for record in records:
            detail = await trace_host.v3(f"/sessions/{session}/assemblies/{record.record_id}")
            assert detail["verification"]["status"] == "verified"
    finally:
        await tools.remove(entry)


async def _audit_views(trace_host: TraceHost, session: str) -> list[bytes]:
    """The raw bodies of /traces, the v3 index and every v3 detail of the session."""
    paths = [
        f"/pmp-dsh-tavern/api/v1/traces?sessionId={session}",
        f"/pmp-dsh-tavern/api/v3/sessions/{session}/assemblies",
        *(f"/pmp-dsh-tavern/api/v3/sessions/{session}/assemblies/t{t}-s1" for t in (1, 2, 3)),
    ]
    out: list[bytes] = []
    for path in paths:
        resp = await trace_host.host.client.get(path)
        assert resp.status == 200, path
        out.append(await resp.read())
    return out


def _rewrite_as_pre_chunk_database(path: Path, rows: list[tuple[str, str, bytes]]) -> None:
    """Replace the audit database with one in the layout every version before chunks wrote:
    one row of record JSON each, no ``base`` column, no ``chunks`` table."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.executescript(
            "CREATE TABLE records (seq INTEGER PRIMARY KEY, session TEXT NOT NULL, "
            "record_id TEXT NOT NULL, bytes INTEGER NOT NULL, data BLOB NOT NULL);"
            "CREATE UNIQUE INDEX records_by_id ON records (session, record_id);"
            "CREATE INDEX records_by_session ON records (session, seq);"
        )
        conn.executemany(
            "INSERT INTO records (session, record_id, bytes, data) VALUES (?, ?, ?, ?)",
            [(s, r, len(d), d) for s, r, d in rows],
        )


async def test_audit_reads_are_identical_across_layouts_and_restarts(
    trace_host: TraceHost,
) -> None:
    """An old turn's /traces row and v3 detail are the same bytes whether its record was stored
    as a delta or (as before chunks) whole, and after the store restarts."""
    ids = await trace_host.bound_session()
    session = ids["session"]
    for text in ("I raise the lantern.", "A dragon?", "We walk on."):
        await trace_host.prompt(session, text)
    store = trace_host.host.get(ASSEMBLY_TRACE)
    chunked = await _audit_views(trace_host, session)
    assert store.chunk_stats()["chunks"] == 1  # turns 2 and 3 are deltas against turn 1
    stored = await store.stored_json(session)
    records = await store.records(session)

    await store.close()
    await store.open()
    assert await _audit_views(trace_host, session) == chunked

    await store.close()
    rows = [(session, r.record_id, data) for r, data in zip(records, stored, strict=True)]
    await asyncio.to_thread(_rewrite_as_pre_chunk_database, store.path, rows)
    await store.open()
    assert store.chunk_stats() == {
        "records": 3,
        "recordBytes": sum(map(len, stored)),
        "rowBytes": sum(map(len, stored)),
        "chunks": 0,
        "chunkBytes": 0,
    }
    assert await _audit_views(trace_host, session) == chunked
    # The next turn is stored as a delta again, next to the old rows.
    await trace_host.prompt(session, "And rest.")
    assert store.chunk_stats()["chunks"] == 1
    assert (await _audit_views(trace_host, session))[2:] == chunked[2:]
