"""References are verified against durable history; anything else is reported, never filled in."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

from innkeeper_core.providers.synthetic import SyntheticReply
from innkeeper_hostapi.agents import AGENTS
from innkeeper_tavern.state.trace import ASSEMBLY_TRACE, EventRef, resolve
from innkeeper_tavern.state.trace.delta import apply_delta, inflate

TraceHost = Any


def _file(trace_host: TraceHost, session: str) -> tuple[Path, str]:
    store = trace_host.host.get(ASSEMBLY_TRACE)
    return store.path, session


def _edit(where: tuple[Path, str], edit: Any, *, section_sha: str | None = None) -> None:
    """Rewrite the stored record behind the store's back (a blocking test helper)."""
    path, session = where
    with closing(sqlite3.connect(path)) as conn, conn:
        ((seq, data, base),) = conn.execute(
            "SELECT seq, data, base FROM records WHERE session = ? ORDER BY seq LIMIT 1",
            (session,),
        ).fetchall()
        if base is not None:  # a delta against its chunk: rebuild the JSON
            ((size, packed),) = conn.execute(
                "SELECT bytes, data FROM chunks WHERE id = ?", (base,)
            ).fetchall()
            data = apply_delta(data, inflate(packed, size))
        record = json.loads(data)
        edit(record["references"])
        if section_sha is not None:
            record["sections"][0]["sha256"] = section_sha
        # Written back as a row of the pre-chunk layout (JSON, no base): still readable.
        conn.execute(
            "UPDATE records SET data = ?, base = NULL WHERE seq = ?", (json.dumps(record), seq)
        )


async def test_tampered_and_missing_references_are_reported(trace_host: TraceHost) -> None:
    ids = await trace_host.bound_session()
    session = ids["session"]
    await trace_host.prompt(session, "I raise the lantern.")
    path = _file(trace_host, session)

    def tamper(refs: dict[str, Any]) -> None:
        refs["system"]["sha256"] = "0" * 64  # the history no longer matches the record
        refs["input"][0]["seq"] = 10_000  # beyond the log: missing
        refs["headers"][0]["type"] = "system/message"  # points at a different kind of event

    _edit(path, tamper)
    detail = await trace_host.v3(f"/sessions/{session}/assemblies/t1-s1")
    verification = detail["verification"]
    assert verification["status"] == "partial"
    statuses = {(u["ref"], u["status"]) for u in verification["unavailable"]}
    assert statuses == {
        ("system", "hash-mismatch"),
        ("input", "missing"),
        ("header", "type-mismatch"),
    }
    # No body is returned for anything that did not verify.
    assert detail["system"]["text"] is None and detail["system"]["status"] == "hash-mismatch"
    assert all(s["text"] is None and s["status"] == "unavailable" for s in detail["sections"])
    assert detail["context"][0]["text"] is None and detail["context"][0]["status"] == "missing"
    assert "requested" not in detail["request"]["headers"][0]
    # The rest still verifies (the reply, the turn end).
    assert detail["reply"]["status"] == "verified"


async def test_section_span_mismatch_withholds_only_that_section(trace_host: TraceHost) -> None:
    ids = await trace_host.bound_session()
    session = ids["session"]
    await trace_host.prompt(session, "Hello")
    _edit(_file(trace_host, session), lambda refs: None, section_sha="f" * 64)
    detail = await trace_host.v3(f"/sessions/{session}/assemblies/t1-s1")
    assert detail["verification"]["status"] == "verified"  # the history itself is intact
    first, *rest = detail["sections"]
    assert (first["status"], first["text"]) == ("hash-mismatch", None)
    assert rest and all(s["status"] == "verified" and s["text"] for s in rest)


async def test_resolve_without_sessions_service_is_unavailable() -> None:
    ref = EventRef(type="system/message", seq=3, sha256="0" * 64)
    resolution = await resolve(None, "s", ref)
    assert resolution.status == "unavailable" and resolution.event is None


async def test_steering_makes_one_record_per_step(trace_host: TraceHost) -> None:
    ids = await trace_host.bound_session()
    session = ids["session"]
    agents = trace_host.host.get(AGENTS)
    trace_host.provider.enqueue(
        SyntheticReply(text="a slow first reply with words", delay_s=0.05), "second reply"
    )
    await agents.prompt(session, "first input")
    for _ in range(100):
        if trace_host.provider.requests:
            break
        await asyncio.sleep(0.01)
    await agents.prompt(session, "steering input", "steer")
    await agents.wait_idle(session)
    index = await trace_host.v3(f"/sessions/{session}/assemblies")
    assert [a["recordId"] for a in index["assemblies"]] == ["t1-s2", "t1-s1"]
    texts = {}
    for entry in index["assemblies"]:
        detail = await trace_host.v3(f"/sessions/{session}/assemblies/{entry['recordId']}")
        assert detail["verification"]["status"] == "verified"
        texts[entry["recordId"]] = [c["text"] for c in detail["context"]]
        assert detail["assembly"]["status"] == "sent"
    assert texts == {"t1-s1": ["first input"], "t1-s2": ["steering input"]}
    first, second = (await trace_host.host.get(ASSEMBLY_TRACE).records(session))[:2]
    assert first.references.turn_end is None and second.references.turn_end is not None
    assert first.references.system != second.references.system
