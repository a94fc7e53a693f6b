"""A long story keeps the loader's in-memory audit bounded: one turn's records, not one per turn.

Each assembly's audit record carries up to 128 lore decisions (tens of KB with a big book); the
durable copy is the trace store's. A scripted story over the real plugin checks that what stays
in memory does not grow with the turns while every turn still reaches the durable audit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from innkeeper_hostapi.agents import SESSIONS
from innkeeper_tavern.features.prompt_profile import (
    ASSEMBLY_AUDIT,
    PROFILE_LOADER,
    AssemblyAuditLog,
)
from innkeeper_tavern.state.trace import ASSEMBLY_TRACE
from innkeeper_tavern.state.trace.limits import SCAN_FIRST_PAGE

CORPUS = Path(__file__).resolve().parents[5] / "shared" / "sillytavern-corpus"
ST = CORPUS / "sillytavern-repo" / "staging-1ac6780"
RECLAMATION = CORPUS / "prolix-oc-st-presets" / "worldbooks" / "The Long Reclamation.json"
MESSAGE = "I limp into the glade and ask about the deadlands."
Tavern = Any
TURNS = 24


async def bind_story(tavern: Tavern) -> str:
    """A session with the Default preset, Seraphina (and her book) and a corpus world book."""
    preset = await tavern.import_preset(ST / "presets_openai_Default.json")
    card = await tavern.import_card(ST / "default_Seraphina.png")
    book = await tavern.import_world_book(RECLAMATION)
    session: str = await tavern.new_session()
    await tavern.v1("POST", "/select", {"id": preset, "sessionId": session})
    await tavern.v1("POST", "/character-selection", {"sessionId": session, "characterCardId": card})
    await tavern.v1("POST", "/world-book-selection", {"sessionId": session, "worldBookIds": [book]})
    return session


async def test_a_long_story_keeps_only_the_newest_turns_audit_in_memory(tavern: Tavern) -> None:
    session = await bind_story(tavern)
    other = await tavern.new_session()
    await tavern.prompt(other, "hello")
    audit = tavern.host.get(ASSEMBLY_AUDIT)
    loader = tavern.host.get(PROFILE_LOADER)
    for turn in range(1, TURNS + 1):
        await tavern.prompt(session, f"{MESSAGE} ({turn})")
        kept = audit.records(session)
        assert [r["turn"] for r in kept] == [turn]
        assert kept[0]["lore"]["books"], "the newest record keeps its lore decisions"
        assert kept[0]["parameters"]["turnEnd"] == "completed"  # completed at turn end
        assert len(audit) == 2  # this session's newest turn and the other session's
        assert loader._snapshots == {}  # snapshots are dropped at turn end
    assert audit.latest(other) is not None and audit.latest(other)["turn"] == 1

    # Completing the audit at turn end reads that turn's events, not the story's newest 200.
    sessions = tavern.host.get(SESSIONS)
    read: list[int] = []
    page = sessions.page

    async def counting_page(*args: Any, **kwargs: Any) -> Any:
        result = await page(*args, **kwargs)
        read.append(len(result.events))
        return result

    sessions.page = counting_page
    try:
        await tavern.prompt(session, f"{MESSAGE} (last)")
    finally:
        del sessions.page
    assert audit.latest(session)["parameters"]["turnEnd"] == "completed"
    assert read and sum(read) <= 2 * SCAN_FIRST_PAGE  # the loader's and the recorder's read
    durable = await tavern.host.get(ASSEMBLY_TRACE).records(session)
    assert [r.turn for r in durable] == list(range(1, TURNS + 2))


def record(session: str, turn: int, step: int = 1) -> dict[str, Any]:
    return {"sessionId": session, "turn": turn, "step": step, "preview": False}


def test_the_log_keeps_each_sessions_newest_turn_and_bounds_sessions_and_steps() -> None:
    log = AssemblyAuditLog(max_sessions=2, max_steps=3)
    log.add(record("a", 1))
    log.add(record("a", 2, 1))
    log.add(record("a", 2, 2))
    assert [(r["turn"], r["step"]) for r in log.records("a")] == [(2, 1), (2, 2)]
    log.add(record("b", 1))
    log.add(record("a", 3))  # "a" is now the most recent session
    log.add(record("c", 1))  # evicts "b", the least recently written
    assert log.records("b") == [] and log.latest("b") is None
    assert [r["sessionId"] for r in log.records()] == ["a", "c"]
    for step in range(1, 6):
        log.add(record("c", 1, step))
    assert [r["step"] for r in log.records("c")] == [3, 4, 5]
    assert log.latest("c", turn=1) == record("c", 1, 5)
    assert log.latest("c", turn=2) is None
    assert len(log) == 4
