"""A bound turn over HTTP → one canonical record; /traces, v3 index/detail, capabilities."""

from __future__ import annotations

from typing import Any

from innkeeper_tavern.trace import ASSEMBLY_TRACE

TraceHost = Any


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
