"""The ``template`` adapter of ``tavernMemorySources``: the session template a session's
configuration was applied from is listed as bound (`docs/contract/catalogs.md#bound-resources`;
issue 15), with no content, until the binding changes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
from catalog_harness import FakeSessions, open_stores

from innkeeper_hostapi import HttpProblem
from innkeeper_tavern.features.catalogs.memory import MemorySources
from innkeeper_tavern.features.catalogs.template_source import TEMPLATE_ADAPTER, TemplateSource
from innkeeper_tavern.state.session_bindings.model import RpState, Selection
from innkeeper_tavern.state.session_templates import (
    SessionConfigurations,
    SessionTemplateStore,
    Source,
)
from innkeeper_tavern.state.session_templates.bindings import BINDINGS_FILE, TemplateBindings

SCOPE = {"sessionId": "s1", "authority": "local"}


async def setup(tmp_path: Path, bindings: TemplateBindings | None = None) -> Any:
    resources, selections = await open_stores(tmp_path)
    sessions = FakeSessions({"s1": "t1", "s2": "t2"})
    templates = SessionTemplateStore(tmp_path)
    await templates.open()
    if bindings is None:
        bindings = TemplateBindings(tmp_path)
        await bindings.open()
    configurations = SessionConfigurations(
        resources,
        selections,
        templates,
        sessions=lambda: sessions,  # type: ignore[arg-type, return-value]
        is_running=lambda _: False,
        bindings=bindings,
    )
    sources = MemorySources(
        resources,
        selections,
        lambda: sessions,  # type: ignore[arg-type, return-value]
        lambda: None,
        lambda _: 0,
    )
    sources.extra_adapters[TEMPLATE_ADAPTER] = TemplateSource(lambda: configurations)
    return resources, selections, templates, configurations, sources


async def two_templates(resources: Any, templates: SessionTemplateStore) -> tuple[str, str]:
    ann = (await resources.create_character({"name": "Ann"})).record.id
    bob = (await resources.create_character({"name": "Bob"})).record.id
    first = await templates.create("Ann's table", Selection(character_card_id=ann))
    second = await templates.create("Bob's table", Selection(character_card_id=bob))
    return first.id, second.id


def template_items(listing: Any) -> list[dict[str, Any]]:
    """The listing's template items as plain dicts (their read-only views copied)."""
    return [
        {**i, "binding": dict(i["binding"])}
        for i in listing["items"]
        if i["adapterId"] == TEMPLATE_ADAPTER
    ]


async def test_the_applied_template_is_bound_without_content(tmp_path: Path) -> None:
    resources, _, templates, configurations, sources = await setup(tmp_path)
    first, _ = await two_templates(resources, templates)
    assert "template" in sources.adapters()
    assert template_items(await sources.list_bound(scope=SCOPE)) == []  # nothing applied yet

    await configurations.apply("s1", Source("template", first))
    listing = await sources.list_bound(scope=SCOPE)
    [item] = template_items(listing)
    applied_at = item["binding"].pop("appliedAt")
    assert isinstance(applied_at, str) and applied_at
    assert item == {
        "id": first,
        "adapterId": "template",
        "name": "Ann's table",
        "type": "session-template",
        "revision": item["revision"],
        "managementMode": "native",
        "binding": {"sessionId": "s1", "origins": ("applied",)},  # lists are tuples
    }
    assert len(item["revision"]) == 32
    raw = next(i for i in listing["items"] if i["adapterId"] == TEMPLATE_ADAPTER)
    assert "content" not in raw and "selection" not in raw
    with pytest.raises(TypeError):
        raw["name"] = "changed"  # type: ignore[index]
    with pytest.raises(TypeError):
        raw["binding"]["origins"] = []  # type: ignore[index]
    # The template adapter's own view: the same shape, only its items.
    own = await sources.list_bound(scope=SCOPE, adapter_id="template")
    assert [i["id"] for i in own["items"]] == [first] and own["checkCurrent"]()
    books = await sources.list_bound(scope=SCOPE, adapter_id="world-book")
    assert books["items"] == ()
    with pytest.raises(HttpProblem) as unknown:
        await sources.list_bound(scope=SCOPE, adapter_id="prompt")
    assert (unknown.value.status, unknown.value.code) == (400, "MEMORY_SOURCE_INVALID")
    # Another session binds nothing from this apply.
    other = await sources.list_bound(scope={"sessionId": "s2", "authority": "local"})
    assert template_items(other) == []


async def test_check_current_is_revoked_when_the_binding_changes(tmp_path: Path) -> None:
    resources, selections, templates, configurations, sources = await setup(tmp_path)
    first, second = await two_templates(resources, templates)
    await configurations.apply("s1", Source("template", first))

    # Unrelated changes: another template's edit, another session's apply.
    lease = (await sources.list_bound(scope=SCOPE))["checkCurrent"]
    await templates.update(second, name="Bob's other table")
    await configurations.apply("s2", Source("template", second))
    assert lease() is True

    # The bound template is renamed: revoked, and the new listing has the new name.
    await templates.update(first, name="Ann's new table")
    assert lease() is False
    listing = await sources.list_bound(scope=SCOPE)
    assert [i["name"] for i in template_items(listing)] == ["Ann's new table"]

    # RP state is not a resource binding: the template stays bound (the lease is revoked, as
    # by any selection write).
    lease = listing["checkCurrent"]
    current = selections.stored("s1")
    assert current is not None
    await selections.set("s1", msgspec.structs.replace(current, rp=RpState(active=True)))
    assert lease() is False
    listing = await sources.list_bound(scope=SCOPE)
    assert [i["id"] for i in template_items(listing)] == [first]

    # Another template applied: only that one is bound.
    lease = listing["checkCurrent"]
    await configurations.apply("s1", Source("template", second))
    assert lease() is False
    listing = await sources.list_bound(scope=SCOPE)
    assert [i["id"] for i in template_items(listing)] == [second]

    # The session's own binding changes (another card): the template no longer holds.
    lease = listing["checkCurrent"]
    ann = templates.get(first).selection.character_card_id
    await selections.set("s1", Selection(character_card_id=ann))
    assert lease() is False
    assert template_items(await sources.list_bound(scope=SCOPE)) == []


async def test_a_deleted_template_is_no_longer_bound(tmp_path: Path) -> None:
    resources, _, templates, configurations, sources = await setup(tmp_path)
    first, _ = await two_templates(resources, templates)
    await configurations.apply("s1", Source("template", first))
    lease = (await sources.list_bound(scope=SCOPE))["checkCurrent"]
    await templates.delete(first)
    assert lease() is False
    assert template_items(await sources.list_bound(scope=SCOPE)) == []


async def test_applying_the_current_settings_binds_no_template(tmp_path: Path) -> None:
    resources, _, templates, configurations, sources = await setup(tmp_path)
    first, _ = await two_templates(resources, templates)
    await configurations.apply("s1", Source("template", first))
    await configurations.apply("s2", Source("current", "s1"))
    other = await sources.list_bound(scope={"sessionId": "s2", "authority": "local"})
    assert template_items(other) == []


async def test_bindings_survive_a_restart_and_a_bad_file_starts_empty(tmp_path: Path) -> None:
    resources, _, templates, configurations, _ = await setup(tmp_path)
    first, _ = await two_templates(resources, templates)
    await configurations.apply("s1", Source("template", first))
    assert (tmp_path / BINDINGS_FILE).exists()

    *_, sources = await setup(tmp_path)  # a new plugin load over the same folder
    assert [i["id"] for i in template_items(await sources.list_bound(scope=SCOPE))] == [first]

    (tmp_path / BINDINGS_FILE).write_text("{not json")
    *_, sources = await setup(tmp_path)
    assert template_items(await sources.list_bound(scope=SCOPE)) == []
    assert (tmp_path / (BINDINGS_FILE + ".corrupt")).read_text() == "{not json"


async def test_a_failed_binding_write_keeps_the_applied_selection(tmp_path: Path) -> None:
    bindings = TemplateBindings(tmp_path)
    await bindings.open()
    resources, selections, templates, configurations, sources = await setup(tmp_path, bindings)
    first, _ = await two_templates(resources, templates)

    def fail(*_: Any) -> None:
        raise OSError("disk full")

    bindings._write = fail  # type: ignore[method-assign]
    answer = await configurations.apply("s1", Source("template", first))
    assert (
        answer["selection"]["characterCardId"] == templates.get(first).selection.character_card_id
    )
    assert selections.stored("s1") is not None
    assert bindings.get("s1") is None
    assert template_items(await sources.list_bound(scope=SCOPE)) == []


async def test_management_list_and_read(tmp_path: Path) -> None:
    resources, _, templates, _, sources = await setup(tmp_path)
    first, second = await two_templates(resources, templates)
    listed = await sources.list(adapter_id="template")
    assert [(i["id"], i["name"], i["type"]) for i in listed] == [
        (first, "Ann's table", "session-template"),
        (second, "Bob's table", "session-template"),
    ]
    assert all("content" not in i for i in listed)
    read = await sources.read(adapter_id="template", id=first)
    card = templates.get(first).selection.character_card_id
    assert read["content"]["name"] == "Ann's table"
    assert read["content"]["selection"]["characterCardId"] == card
    with pytest.raises(HttpProblem) as missing:
        await sources.read(adapter_id="template", id="session-template-missing")
    assert (missing.value.status, missing.value.code) == (404, "MEMORY_SOURCE_NOT_FOUND")
