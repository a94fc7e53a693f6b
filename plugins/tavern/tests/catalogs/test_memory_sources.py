"""``tavernMemorySources``: management ``list``/``read`` and the session's ``listBound``."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from catalog_harness import FakeSessions, open_stores

from innkeeper_hostapi import HttpProblem
from innkeeper_tavern.features.catalogs.memory import MemorySources
from innkeeper_tavern.features.mvu_service.store import InstancesFile, TemplateRecord
from innkeeper_tavern.features.mvu_service.views import MvuViews
from innkeeper_tavern.pure.mvu.ledger import InstanceIdentity, Ledger, StateRecord
from innkeeper_tavern.state.session_bindings.model import Selection

BOOK = {"name": "Lore", "entries": {"0": {"uid": 0, "key": ["k"], "content": "secret lore"}}}


@dataclass
class FakeMvu:
    """The committed ``document`` and the real ``bound_items`` over it (what ``listBound``
    reads; nothing is allocated)."""

    _resources: Any
    _doc: InstancesFile = field(default_factory=InstancesFile)
    bound_items = MvuViews.bound_items

    @property
    def document(self) -> InstancesFile:
        return self._doc


def state(state_id: str, template_id: str, session_id: str) -> StateRecord:
    return StateRecord(
        id=state_id,
        template_id=template_id,
        instance=InstanceIdentity(template_id, session_id, "2026-01-01T00:00:00.000Z"),
        content={"stat_data": {"hp": 1}},
        content_sha256="0" * 64,
        revision=3,
        created_at="2026-01-01T00:00:00.000Z",
        updated_at="2026-01-01T00:00:00.000Z",
    )


async def setup(tmp_path: Path) -> Any:
    resources, selections = await open_stores(tmp_path)
    sessions = FakeSessions({"s1": "t1", "s2": "t2"})
    mvu = FakeMvu(resources)
    agents: dict[str, int] = {}
    sources = MemorySources(
        resources,
        selections,
        lambda: sessions,  # type: ignore[arg-type, return-value]
        lambda: mvu,  # type: ignore[arg-type, return-value]
        lambda sid: agents.get(sid, 0),
    )
    return resources, selections, sources, mvu, agents


async def test_list_bound_covers_only_what_the_session_binds(tmp_path: Path) -> None:
    resources, selections, sources, mvu, _ = await setup(tmp_path)
    mine = (await resources.create_world_book({"name": "Lore"})).id
    via_user = (await resources.create_world_book({"name": "Persona lore"})).id
    other = (await resources.create_world_book({"name": "Other card's"})).id
    ann = {"spec": "chara_card_v2", "data": {"name": "Ann", "character_book": BOOK}}
    card = (await resources.import_character(json.dumps(ann).encode(), "ann.json")).record
    other_card = (await resources.create_character({"name": "Bob"})).record
    user = await resources.create_user({"name": "Me"})
    await resources.set_world_book_ids("user", user.id, [via_user])
    await resources.set_world_book_ids("character", other_card.id, [other])
    await selections.set(
        "s1", Selection(character_card_id=card.id, user_id=user.id, world_book_ids=(mine, "gone"))
    )
    templates = {
        "tpl-ann": TemplateRecord(
            id="tpl-ann", character_id=card.id, version_key="v", discovered_at="t"
        ),
        "tpl-bob": TemplateRecord(
            id="tpl-bob", character_id=other_card.id, version_key="v", discovered_at="t"
        ),
    }
    ledger = Ledger(
        states={
            "mvu-1": state("mvu-1", "tpl-ann", "s1"),
            "mvu-2": state("mvu-2", "tpl-bob", "s1"),  # another card's template
            "mvu-3": state("mvu-3", "tpl-ann", "s2"),  # another session
        }
    )
    mvu._doc = InstancesFile(ledger=ledger, templates=templates)

    bound = await sources.list_bound(scope={"sessionId": "s1", "authority": "local"})
    items = bound["items"]
    assert [(i["adapterId"], i["type"], i["name"]) for i in items] == [
        ("world-book", "embedded-world-book", "Ann"),
        ("world-book", "world-book", "Lore"),
        ("world-book", "world-book", "Persona lore"),
        ("mvu", "mvu-state", "Ann"),
    ]
    assert items[1]["binding"]["origins"] == ("session",)
    assert items[2]["binding"]["origins"] == ("user",)
    assert items[3]["id"] == "mvu-1" and items[3]["binding"]["characterId"] == card.id
    assert other not in {i["id"] for i in items}
    text = repr(items).encode()
    assert b"secret lore" not in text and b"stat_data" not in text  # no content, no variables
    # Deeply immutable.
    with pytest.raises(TypeError):
        items[0]["name"] = "x"  # type: ignore[index]
    with pytest.raises(TypeError):
        items[1]["binding"]["sessionId"] = "s2"  # type: ignore[index]
    assert isinstance(items, tuple) and isinstance(items[1]["binding"]["origins"], tuple)
    assert bound["checkCurrent"]()


async def test_list_bound_lease_revocations(tmp_path: Path) -> None:
    resources, selections, sources, mvu, agents = await setup(tmp_path)
    mine = (await resources.create_world_book({"name": "Lore"})).id
    unrelated = (await resources.create_world_book({"name": "Unrelated"})).id
    card = (await resources.create_character({"name": "Ann"})).record
    await selections.set("s1", Selection(character_card_id=card.id, world_book_ids=(mine,)))

    async def lease() -> Any:
        bound = await sources.list_bound(scope={"sessionId": "s1"})
        assert bound["checkCurrent"]()
        return bound["checkCurrent"]

    check = await lease()
    await resources.update_world_book(unrelated, {"name": "Still unrelated"})
    await selections.set("s2", Selection(character_card_id=card.id))
    agents["s2"] = 1
    assert check()  # other sessions and unrelated books leave it current

    revokers: list[Any] = [
        lambda: selections.set("s1", Selection(character_card_id=card.id)),
        lambda: resources.set_world_book_ids("character", card.id, [unrelated]),
        lambda: resources.delete_world_book(unrelated),
    ]
    await selections.set("s1", Selection(character_card_id=card.id, world_book_ids=(mine,)))
    for revoke in revokers:
        check = await lease()
        await revoke()
        assert not check()
    check = await lease()
    agents["s1"] = 1
    assert not check()
    check = await lease()
    mvu._doc = InstancesFile()  # an MVU commit publishes a new document
    assert not check()
    check = await lease()
    sources.close()
    assert not check()
    with pytest.raises(HttpProblem) as info:
        await sources.list_bound(scope={"sessionId": "s1"})
    assert info.value.code == "MEMORY_SOURCES_UNAVAILABLE"


async def test_management_list_and_read_and_errors(tmp_path: Path) -> None:
    resources, _, sources, _, _ = await setup(tmp_path)
    book = (await resources.create_world_book({"name": "Lore"})).id
    listed = await sources.list(adapter_id="world-book")
    assert [i["id"] for i in listed] == [book] and "content" not in listed[0]
    read = await sources.read(adapter_id="world-book", id=book)
    assert read["content"]["name"] == "Lore"
    with pytest.raises(HttpProblem) as info:
        await sources.read(adapter_id="world-book", id="nope")
    assert info.value.status == 404 and info.value.code == "MEMORY_SOURCE_NOT_FOUND"
    with pytest.raises(HttpProblem) as info:
        await sources.list(adapter_id="template")
    assert info.value.code == "MEMORY_SOURCE_INVALID"
    with pytest.raises(HttpProblem) as info:
        await sources.list_bound(scope={"sessionId": "missing"})
    assert info.value.status == 404
    with pytest.raises(HttpProblem) as info:
        await sources.list_bound(scope={"sessionId": "s1", "authority": "remote"})
    assert info.value.code == "MEMORY_SOURCE_INVALID"
