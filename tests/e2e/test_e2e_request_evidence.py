"""What a long story's request leaves as evidence is exactly what was sent, and reads the same
after a restart.

The host no longer maps the whole history to seqs for every request (issue 18 "Long stories"):
it asks for the seq of each *sent* message by identity. With a realistic context window the
Assembler's history trim drops the oldest turns, so this plays a story past that point under
the Tavern's ``tavern-rp`` strategy and checks, for every turn:

* each ``request/assembly`` entry resolves (its ``ref`` to the durable event's body, or its
  inline content) to the very message the provider received, in order, and its ``sha256`` is
  the digest of that array;
* the oldest turns really stop being sent (the trim applied) while every sent history message is
  still recorded by reference, not inline;
* the v3 assembly index and details and ``/traces`` read byte for byte the same after a restart.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

from innkeeper_core.agents.evidence import wire_message
from innkeeper_core.agents.manager import AgentManager
from innkeeper_core.testing import CoreTestHost, start_test_host
from innkeeper_hostapi.agents import AGENTS, SESSIONS
from innkeeper_hostapi.providers import (
    ChatMessage,
    ParamName,
    Provider,
    ProviderRequest,
    StreamItem,
)
from innkeeper_hostapi.sessions import RequestAssembly, SessionEvent, text_of
from innkeeper_tavern.plugin import TAVERN_RESOURCES
from innkeeper_tavern.state.session_bindings import SESSION_SELECTIONS, Selection

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "sillytavern-corpus"
PRESET = CORPUS / "prolix-oc-st-presets" / "presets" / "Lucid Loom v2.8.json"
CARD = CORPUS / "prolix-oc-st-presets" / "cards" / "Pxansatu.json"
V1, V3 = "/pmp-dsh-tavern/api/v1", "/pmp-dsh-tavern/api/v3"
TURNS = 14
#: The preset's window: its reply reserve (16,384 tokens), its system prompts (about 14,500)
#: and room for about 9 of these turns, so the oldest turns are trimmed before the last one.
CONTEXT_TOKENS = 40_000


class Recording:
    """Wraps the provider and keeps every request it was sent."""

    def __init__(self, inner: Provider) -> None:
        self.inner = inner
        self.requests: list[ProviderRequest] = []

    @property
    def name(self) -> str:
        return self.inner.name

    def accepts(self, name: ParamName, value: object = None) -> bool:
        return self.inner.accepts(name, value)

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamItem]:
        self.requests.append(request)
        async for item in self.inner.stream(request):
            yield item


async def tavern_host(data_dir: Path) -> CoreTestHost:
    host = await start_test_host(data_dir)
    await host.load("assembler", "innkeeper_assembler.plugin")
    await host.load("tavern", "innkeeper_tavern.plugin")
    return host


async def all_events(host: CoreTestHost, session: str) -> dict[int, SessionEvent]:
    page = await host.get(SESSIONS).page(session, limit=1000)
    assert not page.has_more
    return {event.seq: event for event in page.events}


def resolved(entry_ref: int | None, content: str | None, events: dict[int, SessionEvent]) -> str:
    if entry_ref is None:
        assert content is not None
        return content
    return text_of(events[entry_ref].data.content)  # type: ignore[union-attr]


async def observables(host: CoreTestHost, session: str) -> list[bytes]:
    """The v3 index, every v3 detail and ``/traces``, as the bytes a client reads."""
    out: list[bytes] = []
    index = await host.client.get(f"{V3}/sessions/{session}/assemblies")
    assert index.status == 200
    out.append(await index.read())
    records = [a["recordId"] for a in json.loads(out[0])["assemblies"]]
    assert len(records) == TURNS
    for record in records:
        resp = await host.client.get(f"{V3}/sessions/{session}/assemblies/{record}")
        assert resp.status == 200
        out.append(await resp.read())
    traces = await host.client.get(f"{V1}/traces", params={"sessionId": session})
    assert traces.status == 200
    out.append(await traces.read())
    return out


async def test_a_trimmed_storys_evidence_is_what_was_sent_and_survives_a_restart(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    host = await tavern_host(data_dir)
    try:
        resources = host.get(TAVERN_RESOURCES)
        raw = json.loads(PRESET.read_text(encoding="utf-8"))
        raw["openai_max_context"] = CONTEXT_TOKENS
        preset = await resources.import_preset(json.dumps(raw), None)
        card = await resources.import_character(CARD.read_bytes(), CARD.name)
        session = (await host.get(SESSIONS).create(title="evidence")).id
        await host.get(SESSION_SELECTIONS).set(
            session, Selection(preset_id=preset.id, character_card_id=card.record.id)
        )
        manager = host.get(AGENTS)
        assert isinstance(manager, AgentManager)
        recording = Recording(manager.provider)
        manager.provider = recording
        for turn in range(1, TURNS + 1):
            await manager.prompt(session, f"turn {turn}: " + "we walk on through the ash. " * 110)
            await manager.wait_idle(session)
        events = await all_events(host, session)
        before = await observables(host, session)
    finally:
        await host.close()

    assemblies = [e.data for e in events.values() if isinstance(e.data, RequestAssembly)]
    assemblies.sort(key=lambda a: a.turn)
    assert [a.turn for a in assemblies] == list(range(1, TURNS + 1))
    assert len(recording.requests) == TURNS
    first_user_sent: list[int] = []
    for assembly, request in zip(assemblies, recording.requests, strict=True):
        sent: tuple[ChatMessage, ...] = request.messages
        assert [e.role for e in assembly.entries] == [m.role for m in sent]
        assert [resolved(e.ref, e.content, events) for e in assembly.entries] == [
            m.content for m in sent
        ]
        digest = json.dumps([wire_message(m) for m in sent], ensure_ascii=False)
        assert assembly.sha256 == hashlib.sha256(digest.encode()).hexdigest()
        # Every sent history message (user input, replies) is a reference, never a copy.
        for entry, message in zip(assembly.entries, sent, strict=True):
            if message.content.startswith("turn "):
                assert entry.ref is not None and entry.content is None
        users = [m.content for m in sent if m.role == "user" and m.content.startswith("turn ")]
        first_user_sent.append(int(users[0].split(":")[0].removeprefix("turn ")))
    assert first_user_sent[0] == 1
    assert first_user_sent[-1] > 1, "the window trimmed the oldest turns"

    host = await tavern_host(data_dir)  # a restart reads the same bytes
    try:
        assert await observables(host, session) == before
    finally:
        await host.close()
