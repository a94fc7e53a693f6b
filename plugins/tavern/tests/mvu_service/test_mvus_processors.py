"""Command processors: filter and recover only; one effective per instance; failures commit
nothing and leave a diagnostic receipt."""

from __future__ import annotations

import itertools
import time
from typing import Any

import pytest

from innkeeper_hostapi.mvu import CommandProcessorSpec, MvuCommandBatch, MvuCommandView
from innkeeper_hostapi.testing import RunningHost
from innkeeper_mvu_processor import EXAMPLE_PROCESSOR, ExampleProcessor

from .conftest import Mvu

#: A reply with three commands and one JSON Patch block that lacks a value separator.
REPLY = (
    "The day goes on.\n"
    "<UpdateVariable>\n"
    "_.set('hp', 70);//hurt\n"
    "_.set('gold', 999);//greedy\n"
    "</UpdateVariable>\n"
    '<JSONPatch>[{"op": "replace", "path": "/mood" "value": "happy"}]</JSONPatch>\n'
    "_.insert('bag', 'shield');"
)


def _scope(session: str) -> dict[str, Any]:
    return {"authority": "local", "sessionId": session}


async def _load_example(mvu: Mvu) -> ExampleProcessor:
    await mvu.host.load("mvu_processor", "innkeeper_mvu_processor")
    return mvu.host.get(EXAMPLE_PROCESSOR)


async def test_example_plugin_drops_one_command_and_recovers_one_patch(mvu: Mvu) -> None:
    card = await mvu.card()
    plain = await mvu.new_session(card)
    # Without a processor, the malformed block is a syntax error: nothing commits.
    await mvu.turn(plain, REPLY)
    assert await mvu.stat(plain) == {"hp": 100, "mood": "calm", "gold": 5, "bag": ["sword"]}
    outcome = list(mvu.service.document.applied[plain].values())[-1]
    assert (outcome.outcome, outcome.code) == ("failed", "MVU_SYNTAX")

    example = await _load_example(mvu)
    registration = await example.attach(f"mvu:character:{card}")
    session = await mvu.new_session(card)
    state = await mvu.state(session)
    assert state["commandProcessor"] == registration.receipt.to_json()
    assert state["commandProcessor"]["registered"] is True
    await mvu.turn(session, REPLY)
    # Exactly: hp set, gold dropped, mood recovered from the patch, the insert kept.
    assert await mvu.stat(session) == {
        "hp": 70,
        "mood": "happy",
        "gold": 5,
        "bag": ["sword", "shield"],
    }
    applied = list(mvu.service.document.applied[session].values())[-1]
    assert applied.outcome == "applied"
    assert applied.processor == registration.receipt.registration_id
    await mvu.host.unload("mvu_processor")
    assert "commandProcessor" not in await mvu.state(session)


async def test_replacing_and_disposing_in_any_order(mvu: Mvu) -> None:
    card = await mvu.card()
    session = await mvu.new_session(card)
    state_id = (await mvu.state(session))["id"]
    service = mvu.service

    def keep(batch: MvuCommandBatch) -> None:
        return None

    def drop_all(batch: MvuCommandBatch) -> list[MvuCommandView]:
        return []

    for order in itertools.permutations(range(3)):
        regs = []
        for fn in (keep, drop_all, keep):
            regs.append(
                await service.register_command_processor(CommandProcessorSpec(state_id, fn))
            )
        newest = regs[-1]
        disposed: set[int] = set()
        for index in order:
            await regs[index].dispose()
            await regs[index].dispose()  # idempotent
            disposed.add(index)
            record = await service.read(id=state_id, scope=_scope(session))
            assert record is not None
            # Older disposers never remove the newest; once it is gone, nothing older returns.
            expected = None if 2 in disposed else newest.receipt.to_json()
            assert record.get("commandProcessor") == expected
    # An instance registration wins over a template registration.
    template = await service.register_command_processor(
        CommandProcessorSpec(f"mvu:character:{card}", keep)
    )
    instance = await service.register_command_processor(CommandProcessorSpec(state_id, drop_all))
    await mvu.turn(session, "_.set('hp', 1);")
    assert (await mvu.stat(session))["hp"] == 100
    await instance.dispose()
    await mvu.turn(session, "_.set('hp', 2);")
    assert (await mvu.stat(session))["hp"] == 2
    await template.dispose()


@pytest.mark.parametrize(
    ("behaviour", "code"),
    [
        ("raise", "MVU_PROCESSOR_FAILED"),
        ("slow", "MVU_PROCESSOR_TIMEOUT"),
        ("new-write", "MVU_PROCESSOR_OUTPUT_REJECTED"),
        ("changed-value", "MVU_PROCESSOR_OUTPUT_REJECTED"),
        ("reorder", "MVU_PROCESSOR_OUTPUT_REJECTED"),
        ("not-a-list", "MVU_PROCESSOR_OUTPUT_REJECTED"),
    ],
)
async def test_failing_processors_commit_nothing(mvu: Mvu, behaviour: str, code: str) -> None:
    card = await mvu.card()
    session = await mvu.new_session(card)
    state_id = (await mvu.state(session))["id"]

    def processor(batch: MvuCommandBatch) -> Any:
        commands = list(batch.commands)
        if behaviour == "raise":
            raise RuntimeError("boom")
        if behaviour == "slow":
            time.sleep(0.6)
            return commands
        if behaviour == "new-write":
            return [*commands, MvuCommandView("set", ("'gold'", "1"), "_.set('gold', 1);", "")]
        if behaviour == "changed-value":
            first = commands[0]
            return [
                MvuCommandView(first.type, (first.args[0], "1"), first.full_match, first.reason),
                *commands[1:],
            ]
        if behaviour == "reorder":
            return list(reversed(commands))
        return "nope"

    await mvu.service.register_command_processor(CommandProcessorSpec(state_id, processor))
    await mvu.turn(session, "_.set('hp', 70); _.set('mood', 'sad');")
    assert await mvu.stat(session) == {"hp": 100, "mood": "calm", "gold": 5, "bag": ["sword"]}
    receipt = list(mvu.service.document.applied[session].values())[-1]
    assert (receipt.outcome, receipt.code) == ("failed", code)
    facts = (await mvu.get("/mvu/facts", id=state_id, scope=_scope(session)))["facts"]
    assert any(f["phase"] == "failed" and f.get("detail") == code for f in facts)


async def test_processor_output_still_passes_engine_checks(mvu: Mvu) -> None:
    card = await mvu.card()
    session = await mvu.new_session(card)
    state_id = (await mvu.state(session))["id"]
    seen: list[MvuCommandBatch] = []

    def spy(batch: MvuCommandBatch) -> None:
        batch.variables["stat_data"]["hp"] = -1  # type: ignore[index]  # a private copy
        seen.append(batch)
        return None

    await mvu.service.register_command_processor(CommandProcessorSpec(state_id, spy))
    # A kept command writing a reserved key is still rejected by the engine (a diagnostic).
    await mvu.turn(session, "_.set('hp', 60); _.set('__proto__.x', 1); _.set('nothere', 3);")
    assert await mvu.stat(session) == {"hp": 60, "mood": "calm", "gold": 5, "bag": ["sword"]}
    batch = seen[0]
    assert [c.type for c in batch.commands] == ["set", "set", "set"]
    assert batch.commands[0] == MvuCommandView("set", ("'hp'", "60"), "_.set('hp', 60);", "")
    assert batch.message_content.startswith("_.set('hp', 60);")


async def test_update_variable_array_recovery(innkeeper_host: RunningHost, mvu: Mvu) -> None:
    card = await mvu.card()
    session = await mvu.new_session(card)
    state_id = (await mvu.state(session))["id"]

    def recover(batch: MvuCommandBatch) -> list[MvuCommandView]:
        (offer,) = batch.recoverable
        assert offer.kind == "update-variable-array" and offer.index == 0
        return [*offer.commands, *batch.commands]

    await mvu.service.register_command_processor(CommandProcessorSpec(state_id, recover))
    reply = (
        '<UpdateVariable>[{"op": "delta", "path": "/gold", "value": 3}]</UpdateVariable>\n'
        "_.set('hp', 1);"
    )
    await mvu.turn(session, reply)
    stat = await mvu.stat(session)
    assert (stat["gold"], stat["hp"]) == (8, 1)


async def test_configured_example_attaches_whatever_the_load_order(
    start_host: Any, tmp_path: Any
) -> None:
    data = tmp_path / "d"
    host, mvu = await start_host(data)
    card = await mvu.card()
    await host.close()
    from innkeeper_core.testing import start_test_host

    from .conftest import PLUGIN_ID, write_plugin

    config = {"mvu_processor": {"ids": [f"mvu:character:{card}"], "drop_path": "hp"}}
    host = await start_test_host(data, plugins=config)
    try:
        await host.load("mvu_processor", "innkeeper_mvu_processor")  # before tavernMvu exists
        await host.load(PLUGIN_ID, write_plugin(tmp_path))
        mvu = Mvu(host)
        session = await mvu.new_session(card)
        await mvu.turn(session, "_.set('hp', 1); _.set('gold', 2);")
        stat = await mvu.stat(session)
        assert (stat["hp"], stat["gold"]) == (100, 2)  # the hp write was dropped
    finally:
        await host.close()
