"""Explicit host resources (``[plugins.tavern] mvu.resources``): templates, sharing, ambiguity."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from innkeeper_hostapi.mvu import MvuServiceError
from innkeeper_tavern.features.mvu_service.templates import parse_explicit

from .conftest import PLUGIN_ID, Mvu

Start = Callable[..., Awaitable[tuple[Any, Mvu]]]


def _config(*resources: dict[str, Any]) -> dict[str, Any]:
    return {"plugins": {PLUGIN_ID: {"mvu": {"resources": list(resources)}}}}


async def test_wildcard_resource_gives_each_session_its_own_instance(
    start_host: Start, tmp_path: Path
) -> None:
    initial = "stat_data:\n  hp: 10\n  bag: [a, $__META_EXTENSIBLE__$]\n"
    host, mvu = await start_host(
        tmp_path / "d", **_config({"id": "mvu:campaign", "sessionIds": ["*"], "initial": initial})
    )
    a, b = await mvu.new_session(), await mvu.new_session()
    await mvu.turn(a, "_.set('hp', 3); _.insert('bag', 'b');")
    assert await mvu.stat(a) == {"hp": 3, "bag": ["a", "b"]}
    assert await mvu.stat(b) == {"hp": 10, "bag": ["a"]}
    state_a, state_b = await mvu.state(a), await mvu.state(b)
    assert state_a["templateId"] == state_b["templateId"] == "mvu:campaign"
    assert state_a["id"] != state_b["id"]
    # A session that also binds an MVU card matches two resources.
    card = await mvu.card()
    c = await mvu.new_session(card)
    scope = {"authority": "local", "sessionId": c}
    assert (await mvu.get("/mvu/resources", 409, scope=scope))["code"] == "MVU_AMBIGUOUS"
    await host.close()


async def test_shared_resource_is_one_state_for_its_sessions(
    start_host: Start, tmp_path: Path
) -> None:
    data = tmp_path / "d"
    host, mvu = await start_host(data)
    a, b, other = await mvu.new_session(), await mvu.new_session(), await mvu.new_session()
    await host.close()
    shared = {
        "id": "mvu:party",
        "sessionIds": [a, b],
        "initial": {"stat_data": {"gold": 1}},
        "sharing": "shared",
        "managementMode": "managed",
    }
    host, mvu = await start_host(data, **_config(shared))
    await mvu.turn(a, "_.add('gold', 4);")
    record = await mvu.state(b)
    assert record["id"] == "mvu:party" and record["content"]["stat_data"]["gold"] == 5
    assert record["storedManagementMode"] == "managed" and record["instance"] is None
    scope = {"authority": "local", "sessionId": other}
    assert (await mvu.get("/mvu/resources", scope=scope))["resources"] == []
    denied = await mvu.get("/mvu/resource", 403, id="mvu:party", scope=scope)
    assert denied["code"] == "MVU_ACCESS_DENIED"
    await host.close()


@pytest.mark.parametrize(
    "config",
    [
        {"resources": [{"id": "x", "sessionIds": []}]},
        {
            "resources": [
                {"id": "mvu:instance-1", "sessionIds": ["*"], "initial": {"stat_data": {}}}
            ]
        },
        {"resources": [{"id": "x", "sessionIds": ["*"], "initial": "a: [1"}]},
        {"resources": [{"id": "x", "sessionIds": ["*"], "initial": {"no": 1}}]},
        {"resources": [{"id": "x", "sessionIds": ["*"], "characterId": 3}]},
        {
            "resources": [
                {"id": "x", "sessionIds": ["*"], "initial": {"stat_data": {}}, "sharing": "all"}
            ]
        },
        {"resources": [{"id": "x", "sessionIds": ["*"], "initial": {"stat_data": {}}, "extra": 1}]},
        {"other": []},
    ],
)
def test_bad_configurations_fail_setup(config: Any) -> None:
    with pytest.raises(ValueError, match="mvu"):
        parse_explicit(config)


async def test_discover_grants_a_definition_to_one_session(mvu: Mvu) -> None:
    service = mvu.service
    a, b = await mvu.new_session(), await mvu.new_session()
    definition = {"id": "mvu:quest", "initial": "stat_data:\n  step: 1\n"}
    found = await service.discover(definition=definition)
    assert found is not None and found["sessionIds"] == []
    assert found["storedManagementMode"] == "native" and found["sourceError"] is None
    assert (await mvu.get("/mvu/resources", scope={"authority": "local", "sessionId": a}))[
        "resources"
    ] == []
    granted = await service.discover(definition=definition, session_id=a)
    assert granted is not None and granted["granted"] is True and granted["sessionIds"] == [a]
    await mvu.turn(a, "_.set('step', 2);")
    assert await mvu.stat(a) == {"step": 2}
    assert (await mvu.get("/mvu/resources", scope={"authority": "local", "sessionId": b}))[
        "resources"
    ] == []
    with pytest.raises(MvuServiceError) as info:
        await service.discover(definition={"id": "mvu:quest", "initial": {"stat_data": {}}})
    assert info.value.code == "MVU_DEFINITION_CONFLICT"
    card = await mvu.card()
    template = await service.discover(definition={"characterId": card}, session_id=b)
    assert template is not None and template["granted"] is False
