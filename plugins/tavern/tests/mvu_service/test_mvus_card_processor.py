"""Card-declared command processors: a card's inline script filters and recovers commands in a
QuickJS VM; a script that overreaches or overruns commits nothing; a run revoked before its save
(the card's script disabled, the processor plugin reloaded, the service restarted) commits
nothing and leaves the reply unconsumed."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from innkeeper_hostapi.agents import AGENTS
from innkeeper_mvu_processor import EXAMPLE_PROCESSOR
from innkeeper_tavern.features.mvu_service.store import load_instances
from innkeeper_tavern.features.mvu_vm.vm import ScriptVm
from innkeeper_tavern.pure.formats.card import CharacterCard

from .conftest import Mvu, card_json
from .test_mvus_processors import REPLY

Start = Callable[..., Awaitable[tuple[Any, Mvu]]]

#: The card fixture's script: drops every write of ``gold`` and recovers a JSON Patch block that
#: lost the comma before ``"value"``, at its place in the reply (as MVU card scripts do).
SCRIPT = r"""
await waitGlobalInitialized('Mvu');
eventOn(Mvu.events.COMMAND_PARSED, (variables, commands, message) => {
  for (let i = commands.length - 1; i >= 0; i--) {
    if (commands[i].args[0] === "'gold'") commands.splice(i, 1);
  }
  const block = /<JSONPatch>([\s\S]*?)<\/JSONPatch>/.exec(message);
  if (block === null) return;
  try {
    JSON.parse(block[1]);
    return;
  } catch (e) {}
  const ops = JSON.parse(block[1].replace(/"\s+"value"/g, '", "value"'));
  const recovered = ops.map((op) => ({
    type: 'set',
    args: [op.path.slice(1), JSON.stringify(op.value)],
    full_match: JSON.stringify(op),
    reason: 'json_patch',
  }));
  const end = message.indexOf(block[0]) + block[0].length;
  let at = commands.findIndex((c) => message.indexOf(c.full_match) > end);
  if (at < 0) at = commands.length;
  commands.splice(at, 0, ...recovered);
});
"""

FILTERED = {"hp": 70, "mood": "happy", "gold": 5, "bag": ["sword", "shield"]}
UNCHANGED = {"hp": 100, "mood": "calm", "gold": 5, "bag": ["sword"]}


def _listener(body: str) -> str:
    return f"eventOn(Mvu.events.COMMAND_PARSED, {body});\n// global_Mvu_initialized"


#: Scripts that overreach or overrun, and the code their reply's receipt carries.
HOSTILE = {
    "adds-a-write": (
        _listener("(v, commands) => { commands.push({...commands[0], args: [\"'gold'\", '1']}); }"),
        "MVU_PROCESSOR_OUTPUT_REJECTED",
    ),
    "reorders": (
        _listener("(v, commands) => { commands.reverse(); }"),
        "MVU_PROCESSOR_OUTPUT_REJECTED",
    ),
    "changes-a-value": (
        _listener("(v, commands) => { commands[0].args[1] = '1'; }"),
        "MVU_PROCESSOR_OUTPUT_REJECTED",
    ),
    "loops-forever": (_listener("() => { for (;;) {} }"), "MVU_PROCESSOR_TIMEOUT"),
    "allocates-100-mib": (
        _listener(
            "() => { const a = []; for (let i = 0; i < 100; i++) a.push(new Uint8Array(1 << 20)); }"
        ),
        "MVU_PROCESSOR_MEMORY",
    ),
    "catches-the-interrupt": (
        _listener("() => { for (;;) { try { for (;;) {} } catch (e) {} } }"),
        "MVU_PROCESSOR_TIMEOUT",
    ),
    "recurses-forever": (
        _listener("() => { const f = (n) => f(n + 1) + 1; f(0); }"),
        "MVU_PROCESSOR_FAILED",
    ),
    "schedules-forever": (
        "(async () => { for (;;) await null; })();\n" + _listener("() => {}"),
        "MVU_PROCESSOR_FAILED",
    ),
    "initializes-for-ever": (
        # Each job burns ~80 ms of CPU, so the 1 s initialization budget is spent after ~13
        # jobs, far below the 64-job cap (1e6 was ~16 ms a job: 64 jobs landed right at 1 s
        # and the outcome depended on the machine's speed).
        "(async () => { for (;;) { await null; for (let i = 0; i < 5e6; i++) {} } })();\n"
        + _listener("() => {}"),
        "MVU_PROCESSOR_TIMEOUT",
    ),
    "awaits": (_listener("async () => { await null; }"), "MVU_PROCESSOR_ASYNC"),
    "returns-a-promise": (_listener("() => Promise.resolve()"), "MVU_PROCESSOR_ASYNC"),
    "imports": ("import x from 'lodash';\n" + _listener("() => {}"), "MVU_PROCESSOR_INVALID"),
}


def card_with_scripts(*scripts: tuple[str, str, bool]) -> bytes:
    """The other tests' card, with TavernHelper scripts ``(name, source, enabled)``."""
    listed = [
        {"type": "script", "name": name, "id": name, "enabled": on, "content": source}
        for name, source, on in scripts
    ]
    return card_json(extensions={"tavern_helper": {"scripts": listed}})


async def _card(mvu: Mvu, *scripts: tuple[str, str, bool]) -> str:
    imported = await mvu.resources.import_character(card_with_scripts(*scripts), "card.json")
    return imported.record.id


async def _set_script_enabled(mvu: Mvu, card_id: str, enabled: bool) -> None:
    def edit(card: CharacterCard) -> CharacterCard:
        extensions = json.loads(json.dumps(card.data.extensions))
        for script in extensions["tavern_helper"]["scripts"]:
            script["enabled"] = enabled
        data = msgspec.structs.replace(card.data, extensions=extensions)
        return msgspec.structs.replace(card, data=data)

    await mvu.resources.update_character(card_id, edit)


def _last(mvu: Mvu, session: str) -> Any:
    return list(mvu.service.document.applied[session].values())[-1]


async def test_card_script_filters_and_recovers_exactly(mvu: Mvu) -> None:
    card = await _card(mvu, ("mvu-filter", SCRIPT, True))
    session = await mvu.new_session(card)
    # A read never starts a VM: no receipt before the processor first ran.
    assert "commandProcessor" not in await mvu.state(session)
    await mvu.turn(session, REPLY)
    assert await mvu.stat(session) == FILTERED
    applied = _last(mvu, session)
    assert applied.outcome == "applied"
    receipt = (await mvu.state(session))["commandProcessor"]
    assert receipt == {
        "protocolVersion": 1,
        "registered": True,
        "registrationId": applied.processor,
        "source": f"character:{card}/script:mvu-filter",
        "sha256": hashlib.sha256(SCRIPT.encode()).hexdigest(),
        "listenerCount": 1,
    }
    # The VM and its receipt are reused; a VM re-created after eviction keeps the receipt.
    pool = mvu.service._vms
    assert pool.created == 1
    await mvu.turn(session, "_.set('gold', 1);_.set('hp', 60);")
    assert await mvu.stat(session) == {**FILTERED, "hp": 60}
    assert pool.created == 1
    pool._live.clear()
    await mvu.turn(session, "_.set('hp', 50);")
    assert pool.created == 2
    assert (await mvu.stat(session))["hp"] == 50
    assert _last(mvu, session).processor == receipt["registrationId"]
    # Replaying committed replies stops before the processor runs.
    dispatched = pool.dispatched
    await mvu.service.reconcile(session)
    assert pool.dispatched == dispatched


async def test_a_disabled_script_does_not_run_and_conflicts_are_rejected(mvu: Mvu) -> None:
    card = await _card(mvu, ("mvu-filter", SCRIPT, False))
    session = await mvu.new_session(card)
    await mvu.turn(session, "_.set('gold', 1);")
    assert (await mvu.stat(session))["gold"] == 1
    assert _last(mvu, session).processor is None

    other = _listener("() => {}")
    conflict = await _card(mvu, ("a", SCRIPT, True), ("b", other, True))
    session = await mvu.new_session(conflict)
    await mvu.turn(session, "_.set('gold', 1);")
    applied = _last(mvu, session)
    assert (applied.outcome, applied.code) == ("failed", "MVU_PROCESSOR_CONFLICT")
    assert (await mvu.stat(session))["gold"] == 5


@pytest.mark.parametrize("name", sorted(HOSTILE))
async def test_hostile_scripts_commit_nothing_while_other_sessions_go_on(
    mvu: Mvu, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, code = HOSTILE[name]
    hostile = await mvu.new_session(await _card(mvu, (name, source, True)))
    plain = await mvu.new_session(await mvu.card(name="Bea"))
    # The event loop keeps running while the VM runs (the binding releases the GIL).
    ticks = 0
    seen: list[int] = []

    def watched(method: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any) -> Any:
            start = ticks
            try:
                return method(*args)
            finally:
                seen.append(ticks - start)

        return run

    monkeypatch.setattr(ScriptVm, "dispatch", watched(ScriptVm.dispatch))
    monkeypatch.setattr(ScriptVm, "__init__", watched(ScriptVm.__init__))
    stop = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            await asyncio.sleep(0.005)

    task = asyncio.ensure_future(ticker())
    try:
        await asyncio.gather(
            # One reply text for both (the synthetic provider answers in request order).
            mvu.turn(hostile, "_.set('hp', 42);_.set('gold', 2);"),
            mvu.turn(plain, "_.set('hp', 42);_.set('gold', 2);"),
        )
    finally:
        stop.set()
        await task
    assert (await mvu.stat(plain))["hp"] == 42
    assert await mvu.stat(hostile) == UNCHANGED
    applied = _last(mvu, hostile)
    assert (applied.outcome, applied.code, applied.revision) == ("failed", code, 1)
    if code == "MVU_PROCESSOR_TIMEOUT":
        # The VM entry that ran out its budget ran while the event loop kept ticking.
        assert max(seen) > 0, "the event loop stalled during the VM run"
    # The next turn runs again (a broken VM is replaced) and fails the same way.
    await mvu.turn(hostile, "_.set('hp', 3);_.set('gold', 4);")
    assert (await mvu.stat(hostile))["hp"] == 100


def _revoke_after_run(mvu: Mvu, method: str, revoke: Callable[[], Awaitable[None]]) -> list[int]:
    """Make the service's ``method`` (a processor run) revoke once, after it ran."""
    service = mvu.service
    original = getattr(service, method)
    calls: list[int] = []

    async def wrapped(*args: Any, **kwargs: Any) -> Any:
        result = await original(*args, **kwargs)
        calls.append(1)
        if len(calls) == 1:
            await revoke()
        return result

    setattr(service, method, wrapped)
    return calls


async def test_disabling_the_script_mid_turn_commits_nothing_from_that_run(mvu: Mvu) -> None:
    card = await _card(mvu, ("mvu-filter", SCRIPT, True))
    session = await mvu.new_session(card)
    _revoke_after_run(mvu, "_run_card", lambda: _set_script_enabled(mvu, card, False))
    await mvu.turn(session, "_.set('gold', 1);")
    # The run chose nothing for gold, but the script was disabled before its save: the rerun
    # has no processor, so gold is written natively, and no receipt names the revoked run.
    assert (await mvu.stat(session))["gold"] == 1
    receipts = list(mvu.service.document.applied[session].values())
    assert [(r.outcome, r.processor) for r in receipts] == [("applied", None)]


async def test_a_run_revoked_on_every_attempt_leaves_the_reply_unconsumed(mvu: Mvu) -> None:
    card = await _card(mvu, ("mvu-filter", SCRIPT, True))
    session = await mvu.new_session(card)
    flips = iter([False, True] * 5)
    service = mvu.service
    original = service._run_card

    async def flapping(*args: Any, **kwargs: Any) -> Any:
        result = await original(*args, **kwargs)
        await _set_script_enabled(mvu, card, next(flips))
        await _set_script_enabled(mvu, card, True)
        return result

    service._run_card = flapping  # type: ignore[method-assign]
    await mvu.turn(session, "_.set('hp', 1);")
    assert session not in service.document.applied or not service.document.applied[session]
    assert (await mvu.stat(session))["hp"] == 100
    service._run_card = original  # type: ignore[method-assign]
    await service.reconcile(session)
    assert (await mvu.stat(session))["hp"] == 1
    assert _last(mvu, session).processor is not None


async def test_reloading_the_processor_plugin_mid_turn(mvu: Mvu) -> None:
    card = await mvu.card()
    session = await mvu.new_session(card)
    await mvu.host.load("mvu_processor", "innkeeper_mvu_processor")
    first = await mvu.host.get(EXAMPLE_PROCESSOR).attach(f"mvu:character:{card}")
    fresh: list[str] = []

    async def reload() -> None:
        await mvu.host.unload("mvu_processor")
        await mvu.host.load("mvu_processor", "innkeeper_mvu_processor")
        again = await mvu.host.get(EXAMPLE_PROCESSOR).attach(f"mvu:character:{card}")
        fresh.append(again.receipt.registration_id)

    calls = _revoke_after_run(mvu, "_call_plugin", reload)
    await mvu.turn(session, REPLY)
    assert len(calls) == 2  # the revoked run, then one with the new registration
    receipts = list(mvu.service.document.applied[session].values())
    assert [(r.outcome, r.processor) for r in receipts] == [("applied", fresh[0])]
    assert first.receipt.registration_id != fresh[0]
    assert await mvu.stat(session) == FILTERED


async def test_restart_mid_turn_commits_nothing_then_applies_once(
    start_host: Start, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    host, mvu = await start_host(data)
    card = await _card(mvu, ("mvu-filter", SCRIPT, True))
    session = await mvu.new_session(card)
    await mvu.state(session)

    async def stop_service() -> None:
        mvu.service.close()  # what unloading (and so a stopping host) does to the service

    _revoke_after_run(mvu, "_run_card", stop_service)
    await mvu.turn(session, REPLY)
    on_disk = load_instances(mvu.service.root)
    assert not on_disk.applied.get(session)
    assert on_disk.ledger.states[next(iter(on_disk.ledger.states))].revision == 1
    await host.close()

    host, mvu = await start_host(data)
    await host.get(AGENTS).resolve_agent(session)
    await mvu.service.reconcile(session)
    assert await mvu.stat(session) == FILTERED
    receipts = list(mvu.service.document.applied[session].values())
    assert [r.outcome for r in receipts] == ["applied"]
    await host.close()


async def test_a_revocation_after_the_last_await_is_caught_by_the_save(
    mvu: Mvu, monkeypatch: pytest.MonkeyPatch
) -> None:
    from innkeeper_tavern.features.mvu_service import turns

    card = await _card(mvu, ("mvu-filter", SCRIPT, True))
    session = await mvu.new_session(card)
    original = turns.off_loop
    revoked: list[bool] = []

    async def ledger_update_then_disable(*args: Any, **kwargs: Any) -> Any:
        result = await original(*args, **kwargs)
        if not revoked:
            revoked.append(True)
            await _set_script_enabled(mvu, card, False)
        return result

    monkeypatch.setattr(turns, "off_loop", ledger_update_then_disable)
    await mvu.turn(session, "_.set('gold', 1);_.set('hp', 7);")
    # The processor's run (hp only) was computed, then revoked before the save: nothing of it
    # is stored, the reply is not consumed.
    assert revoked and not mvu.service.document.applied.get(session)
    assert await mvu.stat(session) == UNCHANGED
    # The next reconciliation runs it under the current configuration (no processor now).
    await mvu.service.reconcile(session)
    assert (await mvu.stat(session))["gold"] == 1
    assert [(r.outcome, r.processor) for r in mvu.service.document.applied[session].values()] == [
        ("applied", None)
    ]


GATED = r"""
// global_Mvu_initialized
eventOn(Mvu.events.COMMAND_PARSED, (variables, commands) => {
  const gate = Mvu.getOperationGate();
  if (gate === null) return;
  const allowed = gate.blocks.flatMap((b) => b.items.map((i) => i.type + ' ' + i.path));
  for (let i = commands.length - 1; i >= 0; i--) {
    const path = commands[i].args[0].replace(/^['"]|['"]$/g, '');
    if (!allowed.includes(commands[i].type + ' ' + path)) commands.splice(i, 1);
  }
});
"""

GATE = "Go on.\n<MvuOperation>\nonly the wound\n@execute\n- set hp\n</MvuOperation>"


async def test_the_operation_gate_narrows_by_the_turns_user_text(mvu: Mvu) -> None:
    session = await mvu.new_session(await _card(mvu, ("gate", GATED, True)))
    reply = "_.set('hp', 9);_.set('gold', 9);"
    await mvu.turn(session, reply, text=GATE)
    assert (await mvu.stat(session))["hp"] == 9
    assert (await mvu.stat(session))["gold"] == 5
    # No gate in this turn's own text: the script keeps everything.
    await mvu.turn(session, "_.set('hp', 8);_.set('gold', 8);", text="plain")
    assert (await mvu.stat(session))["gold"] == 8
    # Oversized user text gives no gate at all (never a truncated one).
    await mvu.turn(session, "_.set('hp', 7);_.set('gold', 7);", text=GATE + "x" * 70_000)
    assert (await mvu.stat(session))["gold"] == 7


def test_gate_blocks_need_a_boundary_and_an_item_and_fit_the_limit() -> None:
    from innkeeper_tavern.features.mvu_vm import operation_gate

    assert operation_gate(GATE) == {"blocks": [{"items": [{"type": "set", "path": "hp"}]}]}
    assert operation_gate("<MvuOperation>\n- set hp\n</MvuOperation>") is None
    assert operation_gate("<mvuoperation>\n@execute\nset hp\n</mvuoperation>") is None
    big = "<MvuOperation>\n@execute\n- set hp\n" + "a" * 30_000 + "\n</MvuOperation>"
    assert operation_gate(big) is None
    # Code units, not code points: 16 Ki astral characters are 32 Ki units.
    assert operation_gate(GATE + "\U0001f600" * (32 * 1024)) is None
    assert operation_gate(GATE + "a" * (60 * 1024)) is not None


def test_the_mvu_facade_import_is_the_vms_own_mvu() -> None:
    from innkeeper_tavern.features.mvu_vm import Dispatch, VmError

    facade = "import 'https://testingcf.jsdelivr.net/gh/MagicalAstrogy/MagVarUpdate/artifact/bundle.js';\n"
    vm = ScriptVm(facade + SCRIPT)
    assert vm.listener_count == 1
    assert vm.dispatch(Dispatch({}, (), "")) == []
    for other in (
        "import 'https://example.com/MagVarUpdate/artifact/bundle.js';\n",
        "import { x } from 'https://testingcf.jsdelivr.net/gh/MagicalAstrogy/MagVarUpdate/artifact/bundle.js';\n",
    ):
        with pytest.raises(VmError) as caught:
            ScriptVm(other + SCRIPT)
        assert caught.value.code == "MVU_PROCESSOR_INVALID"


async def test_a_plugin_registration_replaces_the_card_declaration(mvu: Mvu) -> None:
    from innkeeper_hostapi.mvu import CommandProcessorSpec, MvuCommandBatch

    card = await _card(mvu, ("mvu-filter", SCRIPT, True))
    session = await mvu.new_session(card)

    def keep_all(batch: MvuCommandBatch) -> None:
        return None

    registration = await mvu.service.register_command_processor(
        CommandProcessorSpec(f"mvu:character:{card}", keep_all)
    )
    await mvu.turn(session, "_.set('gold', 1);")
    assert (await mvu.stat(session))["gold"] == 1  # the card's filter did not run
    assert _last(mvu, session).processor == registration.receipt.registration_id
    assert (await mvu.state(session))["commandProcessor"] == registration.receipt.to_json()
    await registration.dispose()
    await mvu.turn(session, "_.set('gold', 2);")
    assert (await mvu.stat(session))["gold"] == 1  # the card's declaration is back
    assert _last(mvu, session).processor.startswith("mvu-card-processor-")


def test_the_vm_has_no_host_capabilities_and_listeners_see_private_copies() -> None:
    from innkeeper_hostapi.mvu import MvuCommandView
    from innkeeper_tavern.features.mvu_vm import Dispatch

    probe = _listener(
        "(variables, commands) => {"
        " const names = ['fetch', 'require', 'window', 'document', 'setTimeout', 'std', 'os',"
        " 'XMLHttpRequest', 'process', '$', 'importScripts'];"
        " variables.stat_data.hp = 999;"
        " const present = names.filter((n) => typeof globalThis[n] !== 'undefined');"
        " commands.push({type: 'set', args: present,"
        " full_match: '', reason: ''}); }"
    )
    variables = {"stat_data": {"hp": 1}}
    out = ScriptVm(probe).dispatch(Dispatch(variables, (), ""))
    assert out == [{"type": "set", "args": [], "full_match": "", "reason": ""}]
    assert variables == {"stat_data": {"hp": 1}}
    # Listeners run in order; eventMakeLast moves one to the end.
    ordered = (
        "// global_Mvu_initialized\n"
        "const dropFirst = (v, c) => { c.shift(); };\n"
        "eventOn(Mvu.events.COMMAND_PARSED, dropFirst);\n"
        "eventOn(Mvu.events.COMMAND_PARSED, (v, c) => {"
        " const i = c.findIndex((x) => x.args[0] === 'hp'); if (i >= 0) c.splice(i, 1); });\n"
    )
    views = tuple(
        MvuCommandView("set", (p, "1"), f"_.set({p}, 1);", "") for p in ("hp", "gold", "bag")
    )
    first = ScriptVm(ordered).dispatch(Dispatch({}, views, ""))
    last = ScriptVm(ordered + "eventMakeLast(Mvu.events.COMMAND_PARSED, dropFirst);").dispatch(
        Dispatch({}, views, "")
    )
    assert [c["args"][0] for c in first] == ["gold", "bag"]
    assert [c["args"][0] for c in last] == ["bag"]


async def test_a_declaration_over_64_ki_code_units_is_refused(mvu: Mvu) -> None:
    big = SCRIPT + "//" + "\U0001f600" * (33 * 1024)  # 66 Ki UTF-16 units, 33 Ki code points
    session = await mvu.new_session(await _card(mvu, ("big", big, True)))
    await mvu.turn(session, "_.set('gold', 1);")
    applied = _last(mvu, session)
    assert (applied.outcome, applied.code) == ("failed", "MVU_PROCESSOR_INVALID")
    assert (await mvu.stat(session))["gold"] == 5


async def test_live_vms_are_bounded_and_idle_ones_evicted() -> None:
    from innkeeper_tavern.features.mvu_vm import Declaration, Dispatch, VmPool

    now = [0.0]
    pool = VmPool(max_live=2, idle_seconds=60, clock=lambda: now[0])
    declaration = Declaration("character:c/script:s", SCRIPT)
    receipts = {}
    for state in ("a", "b", "c"):
        _, receipts[state] = await pool.dispatch(state, declaration, Dispatch({}, (), ""))
    assert pool.live == 2 and pool.created == 3
    now[0] += 61
    _, again = await pool.dispatch("a", declaration, Dispatch({}, (), ""))
    assert pool.live == 1  # the idle ones went, "a" was re-created
    assert again == receipts["a"]  # with the receipt and registrationId it had
    assert len({r.registration_id for r in receipts.values()}) == 3
    pool.close()
    assert pool.live == 0 and pool.receipt("a", declaration) is None


async def test_a_selection_change_mid_run_commits_nothing_from_that_run(mvu: Mvu) -> None:
    card = await _card(mvu, ("mvu-filter", SCRIPT, True))
    session = await mvu.new_session(card)
    await mvu.state(session)
    store = mvu.service._selections
    changed: list[bool] = []

    async def change_selection() -> None:
        selection = store.get(session)
        await store.set(session, msgspec.structs.replace(selection, world_book_ids=("other",)))
        changed.append(True)

    calls = _revoke_after_run(mvu, "_run_card", change_selection)
    # The run is rechecked after it returned: its selection changed, so nothing is saved and
    # the reply waits; the next reconciliation runs it again under the new selection.
    await mvu.turn(session, "_.set('gold', 1);_.set('hp', 9);")
    assert changed and len(calls) == 1
    assert not mvu.service.document.applied.get(session)
    await mvu.service.reconcile(session)
    assert await mvu.stat(session) == {**UNCHANGED, "hp": 9}
    assert len(calls) == 2


def test_listeners_have_the_lodash_subset_for_the_command_list() -> None:
    from innkeeper_hostapi.mvu import MvuCommandView
    from innkeeper_tavern.features.mvu_vm import Dispatch

    source = _listener(
        "(v, commands) => { _.remove(commands, (c) => _.includes(c.args[0], 'gold'));"
        " _.remove(commands, {type: 'insert'}); }"
    )
    views = tuple(
        MvuCommandView(kind, (path, "1"), f"_.{kind}({path}, 1);", "")
        for kind, path in (("set", "'hp'"), ("set", "'gold'"), ("insert", "'bag'"))
    )
    out = ScriptVm(source).dispatch(Dispatch({}, views, ""))
    assert [c["args"][0] for c in out] == ["'hp'"]
