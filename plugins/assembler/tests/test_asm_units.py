"""Pure placement and store behaviour."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from innkeeper_assembler.placement import ModuleItems, build_plan, project
from innkeeper_assembler.store import APPLIED_FILE, STRATEGIES_FILE, StoreError, StrategyStore
from innkeeper_hostapi.assembly import (
    AtDepth,
    AuthorsNote,
    AuthorsNoteSetting,
    ChatStart,
    Contribution,
    Module,
    Strategy,
)
from innkeeper_hostapi.providers import ChatMessage


def _plan(items: list[Contribution], **strategy: object) -> tuple[Strategy, list[ModuleItems]]:
    module = Module(source="s")
    base = Strategy(id="x", name="x", modules=(module,))
    built = msgspec.structs.replace(base, **strategy)
    return built, [ModuleItems(module, items)]


def test_projection_without_system_or_history() -> None:
    strategy, modules = _plan(
        [
            Contribution(key="g", text="Hi!", placement=ChatStart(role="assistant")),
            Contribution(key="d", text="Deep.", placement=AtDepth(depth=3, role="user")),
        ],
        backend="advanced",
    )
    plan = build_plan(strategy, modules)
    assert plan.system_text == ""
    messages, inserted = project((), plan.carriers)
    assert [(m.role, m.content) for m in messages] == [("assistant", "Hi!"), ("user", "Deep.")]
    assert inserted == (0, 1)
    history = (ChatMessage(role="system", content="S"), ChatMessage(role="user", content="U"))
    out, _ = project(history, plan.carriers)
    assert out[0] is history[0] and out[-1] is history[1]


def test_module_placement_override_keys_and_disabled_modules() -> None:
    items = [Contribution(key="a:1", text="A1"), Contribution(key="b:1", text="B1")]
    override = Module(source="s", keys=("b:",), placement=AtDepth(depth=0, role="user"))
    disabled = Module(source="s", enabled=False)
    strategy = Strategy(id="x", name="x", backend="advanced", modules=(override, disabled))
    plan = build_plan(strategy, [ModuleItems(override, items), ModuleItems(disabled, items)])
    assert plan.system == () and [c.message.content for c in plan.carriers] == ["B1"]


def test_authors_note_positions() -> None:
    items = [
        Contribution(key="main", text="Main."),
        Contribution(key="top", text="Top.", placement=AuthorsNote(edge="top")),
        Contribution(key="bottom", text="Bottom.", placement=AuthorsNote(edge="bottom")),
    ]
    setting = AuthorsNoteSetting(position="system-top", text="Note.")
    strategy, modules = _plan(items, authors_note=setting)
    assert build_plan(strategy, modules).system_text == "Top.\nNote.\nBottom.\n\nMain."
    setting = AuthorsNoteSetting(position="system-bottom")
    strategy, modules = _plan(items, authors_note=setting)
    assert build_plan(strategy, modules).system_text == "Main.\n\nTop.\nBottom."


def test_profile_budget_counts_every_placement() -> None:
    items = [
        Contribution(key="keep", text="K" * 10),
        Contribution(key="lore", text="L" * 10, rank=5, placement=AtDepth(depth=2)),
    ]
    strategy, modules = _plan(items, backend="advanced", max_profile_bytes=15)
    plan = build_plan(strategy, modules)
    assert plan.carriers == () and [p.key for p in plan.dropped] == ["lore"]
    assert plan.profile_bytes == 10 and not plan.rejected


async def test_store_failed_write_changes_nothing(tmp_path: Path) -> None:
    store = StrategyStore(tmp_path / "data")
    await store.open()
    first = await store.put(Strategy(id="a", name="A"))
    assert first.revision == 1
    (tmp_path / "data" / STRATEGIES_FILE).unlink()
    (tmp_path / "data" / STRATEGIES_FILE).mkdir()  # the rename now fails
    with pytest.raises(StoreError) as failed:
        await store.put(Strategy(id="b", name="B"))
    assert failed.value.code == "STRATEGY_WRITE_FAILED"
    assert [s.id for s in store.strategies()] == ["a"]
    assert [p.name for p in (tmp_path / "data").iterdir()] == [STRATEGIES_FILE]  # no temp left


async def test_store_refuses_newer_schema_and_huge_files(tmp_path: Path) -> None:
    root = tmp_path / "data"
    root.mkdir()
    (root / APPLIED_FILE).write_text('{"schemaVersion": 2, "sessions": {}}')
    with pytest.raises(StoreError) as newer:
        await StrategyStore(root).open()
    assert newer.value.code == "STRATEGY_SCHEMA_UNSUPPORTED"
    (root / APPLIED_FILE).unlink()
    with (root / STRATEGIES_FILE).open("wb") as handle:
        handle.truncate(8 * 1024 * 1024 + 1)
    with pytest.raises(StoreError) as huge:
        await StrategyStore(root).open()
    assert huge.value.code == "STRATEGY_FILE_TOO_LARGE"


async def test_store_limits(tmp_path: Path) -> None:
    store = StrategyStore(tmp_path)
    modules = tuple(Module(source="s") for _ in range(257))
    with pytest.raises(StoreError) as many:
        await store.put(Strategy(id="m", name="m", modules=modules))
    assert many.value.code == "STRATEGY_INVALID"
    with pytest.raises(StoreError) as missing:
        await store.apply("session", "nope")
    assert missing.value.code == "STRATEGY_NOT_FOUND"
    assert await store.apply("session", None) is None


def test_depth_never_splits_a_tool_exchange() -> None:
    from innkeeper_assembler.placement import Carrier
    from innkeeper_hostapi.providers import ChatToolCall

    call = ChatToolCall(id="c1", name="roll", arguments="{}")
    history = (
        ChatMessage(role="user", content="roll"),
        ChatMessage(role="assistant", content="", tool_calls=(call, call)),
        ChatMessage(role="tool", content="4", tool_call_id="c1"),
        ChatMessage(role="tool", content="5", tool_call_id="c1"),
    )
    lore = ChatMessage(role="system", content="lore")
    for depth in (1, 2):
        out, inserted = project(history, [Carrier(depth=depth, order=0, message=lore, keys=())])
        assert [m.role for m in out] == ["user", "system", "assistant", "tool", "tool"]
        assert inserted == (1,)
    out, _ = project(history, [Carrier(depth=0, order=0, message=lore, keys=())])
    assert out[-1] is lore  # after the whole exchange is fine
