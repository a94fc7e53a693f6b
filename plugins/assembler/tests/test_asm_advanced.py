"""The advanced backend places request-only messages in the array actually sent; durable
history is unchanged and ``request/assembly`` references verify."""

from __future__ import annotations

import hashlib
import json

from innkeeper_hostapi.assembly import AuthorsNoteSetting, Module, Strategy
from innkeeper_hostapi.testing import RunningHost

from .conftest import Api

LORE = """[
    Contribution(key="main", text="Main prompt."),
    Contribution(key="greeting", text="Welcome, traveller.", placement=ChatStart(role="assistant")),
    Contribution(key="d0", text="Depth zero, system.", placement=AtDepth(depth=0)),
    Contribution(key="d1u", text="Depth one, user.", placement=AtDepth(depth=1, role="user")),
    Contribution(key="d2a", text="Depth two, assistant.",
                 placement=AtDepth(depth=2, role="assistant")),
    Contribution(key="d2s", text="Depth two, system.", placement=AtDepth(depth=2)),
    Contribution(key="d2s-low", text="Depth two, order 50.", placement=AtDepth(depth=2, order=50)),
    Contribution(key="d9", text="Deeper than the chat.", placement=AtDepth(depth=9)),
    Contribution(key="an-top", text="Above the note.", placement=AuthorsNote(edge="top")),
]"""
NOTE = """[Contribution(key="extra", text="Second source, depth one system.",
                        placement=AtDepth(depth=1))]"""


async def _setup(innkeeper_host: RunningHost, api: Api, backend: str) -> str:
    await innkeeper_host.load("assembler", "innkeeper_assembler.plugin")
    await innkeeper_host.load("lore", api.source_plugin("lore", "test.lore", LORE))
    await innkeeper_host.load("notes", api.source_plugin("notes", "test.notes", NOTE))
    session = await api.new_session()
    await api.turn(session, "First")  # history before the strategy: one user, one assistant
    strategy = Strategy(
        id=f"placed-{backend}",
        name="placed",
        backend=backend,  # type: ignore[arg-type]
        modules=(Module(source="test.lore"), Module(source="test.notes")),
        authors_note=AuthorsNoteSetting(depth=1, role="system", text="The note."),
    )
    await api.use(session, strategy)
    await api.turn(session, "Second")
    return session


async def test_advanced_places_depth_and_role_in_the_sent_array(
    innkeeper_host: RunningHost, api: Api
) -> None:
    session = await _setup(innkeeper_host, api, "advanced")
    sent = [(m.role, m.content) for m in api.provider.requests[-1].messages]
    assert sent == [
        ("system", "Main prompt."),
        ("assistant", "Welcome, traveller."),
        ("system", "Deeper than the chat."),  # depth 9 > 3 history messages: clamped to start
        ("user", "First"),
        ("system", "Depth two, order 50."),  # depth 2: order 50 before order 100
        ("assistant", "Depth two, assistant."),  # then assistant, (user), system
        ("system", "Depth two, system."),
        ("assistant", "Synthetic reply to: First"),
        ("user", "Depth one, user."),
        ("system", "Second source, depth one system.\nAbove the note.\nThe note."),
        ("user", "Second"),
        ("system", "Depth zero, system."),
    ]

    events = await api.events(session)
    by_seq = {e["seq"]: e["data"] for e in events}
    (assembly,) = [e["data"] for e in events if e["data"]["type"] == "request/assembly"]
    assert assembly["projector"] == "dsh-assembler"
    assert assembly["turn"] == 2 and assembly["step"] == 1
    rebuilt = []
    for entry in assembly["entries"]:
        if entry["ref"] is not None:
            durable = by_seq[entry["ref"]]
            assert durable["type"] in ("system/message", "user/message", "assistant/message")
            text = "".join(block["text"] for block in durable["content"])
            rebuilt.append((entry["role"], text))
        else:
            rebuilt.append((entry["role"], entry["content"]))
    assert rebuilt == sent  # every reference resolves to what was sent
    inline = [e["content"] for e in assembly["entries"] if e["ref"] is None]
    assert len(inline) == 8  # exactly the request-only carriers are inline
    wire = [{"role": r, "content": c, "name": None} for r, c in sent]
    digest = hashlib.sha256(json.dumps(wire, ensure_ascii=False).encode()).hexdigest()
    assert assembly["sha256"] == digest

    # The Assembler's own body-free placement record of the same step.
    (record,) = [
        e["data"]["payload"]
        for e in events
        if e["data"]["type"] == "ext" and e["data"]["name"] == "dsh-assembler:placement"
    ]
    assert (record["turn"], record["step"], record["strategyId"]) == (2, 1, "placed-advanced")
    assert record["backend"] == "advanced" and record["rejected"] is False
    assert [c["depth"] for c in record["carriers"]] == [None, 9, 2, 2, 2, 1, 1, 0]
    assert record["carriers"][6]["keys"] == ["test.notes:extra", "assembler:authors-note"]
    assert [p["key"] for p in record["system"]] == ["main"]
    assert "Main prompt." not in json.dumps(record)  # metadata only, never text

    # Durable history holds none of the request-only messages.
    texts = [m["text"] for m in await api.messages(session)]
    assert not set(inline) & set(texts)
    assert [m["text"] for m in await api.messages(session) if m["role"] != "system"] == [
        "First",
        "Synthetic reply to: First",
        "Second",
        "Synthetic reply to: Second",
    ]


async def test_standard_backend_stays_within_native_delivery(
    innkeeper_host: RunningHost, api: Api
) -> None:
    session = await _setup(innkeeper_host, api, "standard")
    sent = [(m.role, m.content) for m in api.provider.requests[-1].messages]
    # In-chat items are degraded to system text after the system items, in chat order.
    assert sent[0] == (
        "system",
        "\n\n".join(
            [
                "Main prompt.",
                "Welcome, traveller.",
                "Deeper than the chat.",
                "Depth two, order 50.",
                "Depth two, assistant.",
                "Depth two, system.",
                "Depth one, user.",
                "Second source, depth one system.",
                "Above the note.\nThe note.",
                "Depth zero, system.",
            ]
        ),
    )
    assert sent[1:] == [
        ("user", "First"),
        ("assistant", "Synthetic reply to: First"),
        ("user", "Second"),
    ]
    types = [e["data"]["type"] for e in await api.events(session)]
    assert "request/assembly" not in types
    preview = await api.assembler.preview(session)
    assert "ASSEMBLER_DEPTH_NATIVE" in [d.code for d in preview.diagnostics]


async def test_standard_context_items_are_durable_context_messages(
    innkeeper_host: RunningHost, api: Api
) -> None:
    await innkeeper_host.load("assembler", "innkeeper_assembler.plugin")
    items = '[Contribution(key="ctx", text="Imported context.", placement=Context())]'
    await innkeeper_host.load("ctxsrc", api.source_plugin("ctxsrc", "test.ctx", items))
    session = await api.new_session()
    await api.use(session, Strategy(id="c", name="c", modules=(Module(source="test.ctx"),)))
    await api.turn(session, "Hi")
    sent = [(m.role, m.content) for m in api.provider.requests[-1].messages]
    assert sent == [("user", "Hi"), ("user", "Imported context.")]
    (context,) = [m for m in await api.messages(session) if m["origin"]["kind"] == "context"]
    assert context["text"] == "Imported context."
    assert context["origin"]["producer"] == "dsh-assembler"
