"""CAS revisions, idempotent operations, history, copies, modes, legacy files, the 32 MiB cap."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from innkeeper_core.providers.synthetic import SyntheticReply
from innkeeper_hostapi.mvu import MvuServiceError
from innkeeper_tavern.pure.mvu.ledger import MAX_LEDGER_BYTES

from .conftest import PLUGIN_ID, Mvu, write_plugin


def _scope(session: str) -> dict[str, Any]:
    return {"authority": "local", "sessionId": session}


async def _edit(mvu: Mvu, session: str, state: dict[str, Any], op: str, **stat: Any) -> Any:
    content = dict(state["content"])
    content["stat_data"] = {**content["stat_data"], **stat}
    return await mvu.v1(
        "POST",
        "/mvu/update",
        {
            "id": state["id"],
            "scope": _scope(session),
            "content": content,
            "expectedRevision": state["revision"],
            "operationId": op,
        },
        status=200,
    )


async def test_cas_conflict_and_idempotent_replay_over_http(mvu: Mvu) -> None:
    card = await mvu.card()
    session = await mvu.new_session(card)
    state = await mvu.state(session)
    first = await _edit(mvu, session, state, "op-1", hp=70)
    assert first["receipt"] == {
        "operationId": "op-1",
        "id": state["id"],
        "revisionBefore": 1,
        "revision": 2,
        "changed": True,
        "at": first["receipt"]["at"],
    }
    assert first["resource"]["content"]["stat_data"]["hp"] == 70
    # The identical request again: the original receipt, nothing new.
    again = await _edit(mvu, session, state, "op-1", hp=70)
    assert again["receipt"] == first["receipt"]
    # The same operation id for another request: rejected.
    body = {
        "id": state["id"],
        "scope": _scope(session),
        "content": {**state["content"], "stat_data": {**state["content"]["stat_data"], "hp": 1}},
        "expectedRevision": 1,
        "operationId": "op-1",
    }
    conflict = await mvu.v1("POST", "/mvu/update", body, status=409)
    assert conflict["code"] == "MVU_OPERATION_CONFLICT"
    # A stale revision with a new operation id: CAS conflict, state unchanged.
    body["operationId"] = "op-2"
    stale = await mvu.v1("POST", "/mvu/update", body, status=409)
    assert stale["code"] == "MVU_REVISION_CONFLICT"
    assert (await mvu.stat(session))["hp"] == 70
    assert (await mvu.state(session))["revision"] == 2


async def test_scope_access_and_history_evidence(mvu: Mvu) -> None:
    card = await mvu.card()
    a = await mvu.new_session(card)
    b = await mvu.new_session(card)
    state_a = await mvu.state(a)
    state_b = await mvu.state(b)
    assert state_a["id"] != state_b["id"]
    denied = await mvu.get("/mvu/resource", 403, id=state_a["id"], scope=_scope(b))
    assert denied["code"] == "MVU_ACCESS_DENIED"
    bad = await mvu.get("/mvu/resource", 400, id=state_a["id"], scope={"authority": "remote"})
    assert bad["code"] == "MVU_SCOPE_INVALID"
    missing = await mvu.get("/mvu/resource", 404, id="mvu:nope", scope=_scope(a))
    assert missing["code"] == "MVU_NOT_FOUND"
    await mvu.turn(a, SyntheticReply.with_mvu("ok", {"hp": 90}))
    await _edit(mvu, a, await mvu.state(a), "edit-1", hp=60)
    history = (
        await mvu.get("/mvu/history", id=state_a["id"], scope=_scope(a), includeBefore="true")
    )["history"]
    assert [(h["kind"], h["stat_data"]["hp"]) for h in history] == [
        ("initial", 100),
        ("reply", 90),
        ("edit", 60),
    ]
    assert history[0]["beforeAvailable"] is False
    assert history[1]["beforeAvailable"] is True and history[1]["before"]["hp"] == 100
    assert history[2]["before"]["hp"] == 90
    facts = (await mvu.get("/mvu/facts", id=state_a["id"], scope=_scope(a)))["facts"]
    phases = [f["phase"] for f in facts]
    assert "applied" in phases and "started" in phases
    assert all("text" not in f and "content" not in f for f in facts)
    committed = [f for f in facts if f.get("detail") == "state-committed"]
    assert len(committed) == 2


async def test_historical_read_and_snapshot(mvu: Mvu) -> None:
    card = await mvu.card()
    session = await mvu.new_session(card)
    await mvu.turn(session, "_.set('hp', 90);")
    events = await mvu.events(session)
    first_reply = max(e["seq"] for e in events if e["data"]["type"] == "assistant/message")
    await mvu.turn(session, "_.set('hp', 80);")
    state = await mvu.state(session)
    scope = {**_scope(session), "endEventId": first_reply}
    old = (await mvu.get("/mvu/resource", id=state["id"], scope=scope))["resource"]
    assert old["historical"] is True
    assert old["content"]["stat_data"]["hp"] == 90
    assert old["revision"] == 2 and old["currentRevision"] == 3
    snap = (
        await mvu.get(
            "/mvu/snapshot",
            scope={"sessionId": session, "endEventId": first_reply, "sessionFormatVersion": 4},
        )
    )["snapshot"]
    assert snap["variables"]["stat_data"]["hp"] == 90
    assert (snap["revision"], snap["currentRevision"], snap["status"]) == (2, 3, "ready")
    # Historical scopes are read-only.
    with pytest.raises(MvuServiceError) as info:
        await mvu.service.update(
            id=state["id"],
            content=state["content"],
            expected_revision=3,
            operation_id="x",
            scope=scope,
        )
    assert info.value.code == "MVU_HISTORICAL_READ_ONLY"
    wrong = await mvu.get(
        "/mvu/snapshot",
        409,
        scope={"sessionId": session, "endEventId": first_reply, "sessionFormatVersion": 3},
    )
    assert wrong["code"] == "MVU_COORDINATES_MIGRATION_REQUIRED"


async def test_copy_and_management_mode(mvu: Mvu) -> None:
    card = await mvu.card()
    session = await mvu.new_session(card)
    state = await mvu.state(session)
    copied = await mvu.service.copy(id=state["id"], new_id="mvu:manual-1", scope=_scope(session))
    assert copied["content"] == state["content"] and copied["instance"] is None
    with pytest.raises(MvuServiceError) as info:
        await mvu.service.copy(id=state["id"], new_id="mvu:manual-1", scope=_scope(session))
    assert info.value.code == "MVU_ID_EXISTS"
    listed = (await mvu.get("/mvu/resources", scope=_scope(session)))["resources"]
    assert {r["id"] for r in listed} == {state["id"], "mvu:manual-1"}
    receipt = await mvu.service.set_management_mode(
        id=state["id"],
        mode="managed",
        expected_revision=1,
        operation_id="m1",
        scope=_scope(session),
    )
    assert receipt["storedManagementMode"] == "managed"
    assert receipt["managementMode"] == "native"  # no manager is registered
    again = await mvu.service.set_management_mode(
        id=state["id"],
        mode="managed",
        expected_revision=1,
        operation_id="m1",
        scope=_scope(session),
    )
    assert again == receipt
    with pytest.raises(MvuServiceError) as info:
        await mvu.service.set_management_mode(
            id=state["id"],
            mode="native",
            expected_revision=7,
            operation_id="m2",
            scope=_scope(session),
        )
    assert info.value.code == "MVU_REVISION_CONFLICT"
    record = await mvu.service.read(id=state["id"], scope=_scope(session))
    assert record is not None and record["storedManagementMode"] == "managed"


async def test_manager_registration_makes_store_managed_and_fail_closed(mvu: Mvu) -> None:
    card = await mvu.card()
    session = await mvu.new_session(card)
    decisions: list[Any] = []

    async def manager(request: Any) -> Any:
        decisions.append(request["trigger"])
        return None  # no configuration: managed execution fails closed

    dispose = mvu.service.register_usage(manager, provider_id="dsh-memory-manager")
    await mvu.turn(session, "_.set('hp', 5);")
    assert (await mvu.stat(session))["hp"] == 100
    assert (await mvu.state(session))["managementMode"] == "managed"
    dispose()
    await mvu.turn(session, "_.set('hp', 6);")
    assert (await mvu.stat(session))["hp"] == 6
    assert decisions == ["assistant_message_committed"]
    # The skipped reply (turn 1) never triggered the store strategy; the allowed one (turn 2) did.
    facts = (
        await mvu.get("/mvu/facts", id=(await mvu.state(session))["id"], scope=_scope(session))
    )["facts"]
    by_turn = {
        turn: [f["phase"] for f in facts if f.get("turn") == turn and f.get("turnKind")]
        for turn in (1, 2)
    }
    assert by_turn[1] == ["started", "skipped", "completed"]
    assert by_turn[2] == ["started", "triggered", "applied", "completed"]


async def test_validate_config_and_defaults(mvu: Mvu) -> None:
    service = mvu.service
    assert service.validate_config({"type": "mvu-state"}) == {"ok": True, "errors": []}
    good = {
        "type": "mvu-state",
        "store": {
            "trigger": "assistant_message_committed",
            "strategy": ["parse_mvu_update", {"operation": "validate_update"}, "apply_update"],
        },
    }
    assert service.validate_config(good)["ok"] is True
    bad = service.validate_config({"type": "x", "store": {"strategy": ["apply_update"], "k": 1}})
    assert bad["ok"] is False and len(bad["errors"]) == 3
    card = await mvu.card()
    session = await mvu.new_session(card)
    state = await mvu.state(session)
    defaults = service.get_management_defaults(id=state["id"])
    assert defaults is not None and defaults["scopePolicy"] == "source-bound"
    assert defaults["checkCurrent"]() is True
    await mvu.turn(session, "_.set('hp', 1);")
    assert defaults["checkCurrent"]() is False
    assert service.get_management_defaults(id="mvu:none") is None
    template = await service.discover(definition={"characterId": card})
    assert template is not None and template["id"] == f"mvu:character:{card}"
    assert template["storedManagementMode"] == "native"


async def test_prompt_dependency_reads_the_turn_checkpoint(mvu: Mvu) -> None:
    card = await mvu.card()
    session = await mvu.new_session(card)
    await mvu.turn(session, "_.set('hp', 90);")
    await mvu.turn(session, "_.set('hp', 80);")
    service = mvu.service
    book = {"adapterId": "tavern.world-books", "id": "book-1"}

    async def attest(session_id: str, adapter_id: str, resource_id: str) -> bool:
        return (session_id, adapter_id, resource_id) == (session, "tavern.world-books", "book-1")

    service.consumer_bound = attest
    lore = {"usage": "world-book-variable", "consumer": book}
    event = {"preview": False, "turn": 2, **lore}
    result = await service.resolve_prompt_dependency(scope=_scope(session), event=event)
    assert result is not None
    assert result["content"]["stat_data"]["hp"] == 90  # turn 2 saw the state after turn 1
    assert result["adapterId"] == "tavern.mvu" and result["checkCurrent"]() is True
    current = await service.resolve_prompt_dependency(scope=_scope(session), event=lore)
    assert current is not None and current["content"]["stat_data"]["hp"] == 80

    async def deny(_: Any) -> Any:
        return {"enabled": False}

    dispose = service.register_usage(deny)
    assert result["checkCurrent"]() is False
    assert await service.resolve_prompt_dependency(scope=_scope(session), event=lore) is None
    dispose()


async def test_legacy_state_file_is_read_only(innkeeper_host: Any, tmp_path: Path) -> None:
    root = tmp_path / "innkeeper-data" / "plugins" / PLUGIN_ID
    root.mkdir(parents=True)
    legacy = {
        "resources": [{"id": "mvu:campaign", "content": {"stat_data": {"hp": 3}}, "revision": 4}]
    }
    original = json.dumps(legacy).encode()
    (root / "mvu-state.json").write_bytes(original)
    await innkeeper_host.load(PLUGIN_ID, write_plugin(tmp_path))
    mvu = Mvu(innkeeper_host)
    listed = (await mvu.get("/mvu/resources"))["resources"]
    assert listed[0]["id"] == "mvu:campaign" and listed[0]["legacy"] is True
    record = await mvu.service.read(id="mvu:campaign", scope={"authority": "local"})
    assert record is not None and record["content"]["stat_data"]["hp"] == 3
    assert record["capabilities"]["update"] is False
    for call in (
        mvu.service.update(
            id="mvu:campaign",
            content={"stat_data": {}},
            expected_revision=4,
            operation_id="o",
            scope={"authority": "local"},
        ),
        mvu.service.copy(id="mvu:campaign", new_id="mvu:new", scope={"authority": "local"}),
    ):
        with pytest.raises(MvuServiceError) as info:
            await call
        assert info.value.code == "MVU_MIGRATION_REQUIRED"
    assert (root / "mvu-state.json").read_bytes() == original


async def test_ledger_cap_refuses_the_save_and_keeps_the_old_file(mvu: Mvu) -> None:
    card = await mvu.card()
    session = await mvu.new_session(card)
    service = mvu.service
    state = await service.read(id=(await mvu.state(session))["id"], scope=_scope(session))
    assert state is not None
    blob = "x" * 1_900_000
    revision = state["revision"]
    refused = None
    for index in range(40):
        content = {
            **state["content"],
            "stat_data": {**state["content"]["stat_data"], "blob": blob[:-1] + str(index % 10)},
        }
        path = service.root / "mvu-instances.json"
        before = path.read_bytes()
        try:
            receipt = await service.update(
                id=state["id"],
                content=content,
                expected_revision=revision,
                operation_id=f"big-{index}",
                scope=_scope(session),
            )
        except MvuServiceError as exc:
            refused = exc
            break
        revision = receipt["receipt"]["revision"]
    assert refused is not None and refused.code == "MVU_LEDGER_TOO_LARGE"
    assert refused.status == 507
    assert path.read_bytes() == before  # the previous file, byte for byte
    assert len(before) <= MAX_LEDGER_BYTES
    current = await service.read(id=state["id"], scope=_scope(session))
    assert current is not None and current["revision"] == revision  # the previous revision
    # A reply that would grow it further is refused the same way and leaves a receipt.
    await mvu.turn(session, "_.set('hp', 1);")
    assert (await service.read(id=state["id"], scope=_scope(session)))["revision"] == revision  # type: ignore[index]
    outcome = list(service.document.applied[session].values())[-1]
    assert (outcome.outcome, outcome.code) == ("failed", "MVU_LEDGER_TOO_LARGE")


async def test_history_keeps_failure_evidence(mvu: Mvu) -> None:
    card = await mvu.card()
    session = await mvu.new_session(card)
    await mvu.turn(session, "_.set('hp', 90);")
    await mvu.turn(session, "<JSONPatch>[{not json</JSONPatch>")
    await mvu.turn(session, "no commands at all")
    state = await mvu.state(session)
    rows = (await mvu.get("/mvu/history", id=state["id"], scope=_scope(session)))["history"]
    assert [(r["committed"], r.get("outcome"), r["revision"]) for r in rows] == [
        (True, None, 1),
        (True, None, 2),
        (False, "failed", 2),
        (False, "unchanged", 2),
    ]
    assert rows[2]["code"] == "MVU_SYNTAX" and rows[2]["stat_data"] is None


async def test_a_registration_change_during_a_decision_retakes_it(mvu: Mvu) -> None:
    card = await mvu.card()
    session = await mvu.new_session(card)
    service = mvu.service
    calls: list[str] = []
    disposers: list[Any] = []

    async def allow(_: Any) -> Any:
        calls.append("allow")
        return {"enabled": True}

    async def manager(_: Any) -> Any:
        calls.append("manager")
        if len(disposers) == 1:
            disposers.append(service.register_usage(allow, provider_id="dsh-memory-manager"))
        return {"enabled": True}

    disposers.append(service.register_usage(manager, provider_id="dsh-memory-manager"))
    await mvu.turn(session, "_.set('hp', 7);")
    assert (await mvu.stat(session))["hp"] == 7
    assert calls == ["manager", "manager", "allow"]
    for dispose in disposers:
        dispose()
