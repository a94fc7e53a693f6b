"""Freezing at ``agent/created``: new sessions, forks, delegated sessions, resumes, a full store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from innkeeper_hostapi.agents import AgentCreated
from innkeeper_hostapi.sessions import (
    ParentRef,
    SessionHeader,
    SessionInspection,
    SessionMeta,
    SessionNotFound,
)
from innkeeper_tavern.state.session_bindings.lifecycle import (
    MAX_ANCESTOR_WALK,
    freeze_for_agent,
    inherited_selection,
)
from innkeeper_tavern.state.session_bindings.model import RpState, Selection
from innkeeper_tavern.state.session_bindings.store import SessionSelectionStore

from .conftest import Tavern

RP_ON = RpState(active=True, source="command", follow_suppressed=True, sandbox_before="read-only")


async def bind_everything(tavern: Tavern, session: str) -> Selection:
    """Bind a preset, card, user and books over HTTP and set RP on in the store."""
    preset, card = await tavern.preset("P"), await tavern.character("C", greetings=2)
    user, book = await tavern.user("U"), await tavern.world_book("W")
    await tavern.v1("POST", "/select", {"id": preset, "sessionId": session})
    await tavern.v1(
        "POST",
        "/character-selection",
        {"sessionId": session, "characterCardId": card, "character": {"greetingIndex": 1}},
    )
    await tavern.v1("POST", "/user-selection", {"sessionId": session, "userId": user})
    await tavern.v1("POST", "/world-book-selection", {"sessionId": session, "worldBookIds": [book]})
    return await tavern.store.update(session, lambda s: msgspec.structs.replace(s, rp=RP_ON))


async def test_new_session_freezes_the_current_default_on_first_use(tavern: Tavern) -> None:
    p1, p2 = await tavern.preset("One"), await tavern.preset("Two")
    await tavern.v1("POST", "/select", {"id": p1})
    session = await tavern.new_session()
    assert not tavern.store.has(session)  # creating a session freezes nothing
    await tavern.prompt(session)
    await tavern.idle(session)
    assert tavern.store.stored(session) == Selection(preset_id=p1)

    await tavern.v1("POST", "/select", {"id": p2})  # a later default change
    await tavern.prompt(session, "again")
    await tavern.idle(session)
    assert tavern.store.get(session).preset_id == p1
    later = await tavern.new_session()
    await tavern.resolve(later)
    assert tavern.store.get(later).preset_id == p2


async def test_binding_before_first_use_is_kept_by_the_freeze(tavern: Tavern) -> None:
    p1 = await tavern.preset("One")
    await tavern.v1("POST", "/select", {"id": p1})
    session = await tavern.new_session()
    user = await tavern.user("U")
    await tavern.v1("POST", "/user-selection", {"sessionId": session, "userId": user})
    await tavern.v1("POST", "/select", {"id": None})  # default changes before the first turn
    await tavern.resolve(session)
    assert tavern.store.get(session) == Selection(preset_id=p1, user_id=user)


async def test_fork_copies_the_parent_selection_then_unlinks(tavern: Tavern) -> None:
    parent = await tavern.new_session()
    await tavern.prompt(parent)
    await tavern.idle(parent)
    chosen = await bind_everything(tavern, parent)
    await tavern.v1("POST", "/select", {"id": None})  # the default differs from the parent's

    child = await tavern.fork(parent)
    assert (await tavern.v1("GET", f"/presets?sessionId={child}"))["selectedId"] == chosen.preset_id
    await tavern.resolve(child)
    assert tavern.store.stored(child) == chosen  # rp included

    other = await tavern.preset("Other")
    await tavern.v1("POST", "/select", {"id": other, "sessionId": parent})
    assert tavern.store.get(child).preset_id == chosen.preset_id
    await tavern.v1("POST", "/user-selection", {"sessionId": child, "userId": None})
    assert tavern.store.get(parent).user_id == chosen.user_id


async def test_fork_bound_before_its_agent_starts_from_the_parent(tavern: Tavern) -> None:
    parent = await tavern.new_session()
    await tavern.prompt(parent)
    await tavern.idle(parent)
    chosen = await bind_everything(tavern, parent)
    child = await tavern.fork(parent)
    await tavern.v1("POST", "/user-selection", {"sessionId": child, "userId": None})
    await tavern.resolve(child)
    assert tavern.store.get(child) == msgspec.structs.replace(chosen, user_id=None)


async def test_delegated_session_freezes_the_parent_selection_including_rp(tavern: Tavern) -> None:
    parent = await tavern.new_session()
    chosen = await bind_everything(tavern, parent)
    delegated = await tavern.new_session(delegatedFrom=parent)
    await tavern.prompt(delegated)
    await tavern.idle(delegated)
    assert tavern.store.stored(delegated) == chosen
    assert tavern.store.get(delegated).rp == RP_ON
    # Not linked afterwards.
    await tavern.store.update(parent, lambda s: msgspec.structs.replace(s, rp=RpState()))
    assert tavern.store.get(delegated).rp == RP_ON


async def test_unbound_ancestors_are_walked_to_the_nearest_selection(tavern: Tavern) -> None:
    root = await tavern.new_session()
    await tavern.prompt(root)
    await tavern.idle(root)
    chosen = await bind_everything(tavern, root)
    middle = await tavern.fork(root)  # never used: no selection of its own
    leaf = await tavern.fork(middle)
    await tavern.resolve(leaf)
    assert not tavern.store.has(middle)
    assert tavern.store.get(leaf) == chosen


async def test_a_full_store_fails_agent_creation(tmp_path: Path, start_host: Any) -> None:
    _, tavern = await start_host(
        tmp_path / "data", plugins={"selplug": {"max_session_selections": 1}}
    )
    first = await tavern.new_session()
    await tavern.prompt(first)
    await tavern.idle(first)
    second = await tavern.new_session()
    err = await tavern.call(
        "POST", f"/host/api/sessions/{second}/prompt", {"text": "Hi"}, status=500
    )
    assert err["code"] == "AGENT_INIT_FAILED"
    assert "full" in err["error"]
    assert tavern.store.session_ids() == [first]  # nothing evicted
    await tavern.store.delete_session(first)
    await tavern.prompt(second)
    await tavern.idle(second)
    assert tavern.store.session_ids() == [second]


async def test_resumed_sessions_pass_the_same_boundary(tmp_path: Path, start_host: Any) -> None:
    data = tmp_path / "data"
    host, tavern = await start_host(data)
    p1, p2 = await tavern.preset("One"), await tavern.preset("Two")
    await tavern.v1("POST", "/select", {"id": p1})
    frozen = await tavern.new_session()
    await tavern.prompt(frozen)
    await tavern.idle(frozen)
    await host.unload("selplug")  # a session used while the plugin was not loaded
    cold = await tavern.new_session()
    await tavern.prompt(cold)
    await tavern.idle(cold)
    await host.close()

    _, tavern = await start_host(data)  # a restart: agents are resumed
    await tavern.v1("POST", "/select", {"id": p2})
    await tavern.resolve(frozen)
    await tavern.resolve(cold)
    assert tavern.store.get(frozen).preset_id == p1  # kept
    assert tavern.store.get(cold).preset_id == p2  # frozen at its first use with the plugin


# ---------------------------------------------------------------- pure lifecycle functions


class FakeSessions:
    """Just ``inspect``: each session's parent."""

    def __init__(self, parents: dict[str, str | None]) -> None:
        self.parents = parents

    async def inspect(self, session_id: str) -> SessionInspection:
        if session_id not in self.parents:
            raise SessionNotFound(session_id)
        parent = self.parents[session_id]
        header = SessionHeader(
            id=session_id,
            created_at="2026-01-01T00:00:00.000Z",
            title=None,
            workspace_id=None,
            parent=ParentRef(session_id=parent, at_event_id=0) if parent else None,
            delegation_depth=0,
            format_version=4,
        )
        return SessionInspection(
            header=header, meta=SessionMeta(version=4), turn_open=False, open_turn=None, last_seq=0
        )


async def test_ancestor_walk_is_bounded_and_tolerates_unknown_sessions(tmp_path: Path) -> None:
    store = SessionSelectionStore(tmp_path)
    await store.open()
    await store.global_preset.select("default")
    loop = FakeSessions({"a": "b", "b": "a"})
    assert (await inherited_selection(store, "a", loop)).preset_id == "default"  # type: ignore[arg-type]
    chain = {f"n{i}": f"n{i + 1}" for i in range(MAX_ANCESTOR_WALK + 5)}
    await store.set(f"n{MAX_ANCESTOR_WALK + 3}", Selection(preset_id="far"))
    await store.set("n3", Selection(preset_id="near"))
    fake = FakeSessions(chain)  # type: ignore[arg-type]
    assert (await inherited_selection(store, "n0", fake)).preset_id == "near"  # type: ignore[arg-type]
    await store.delete_session("n3")
    # The stored ancestor is past the walk bound: defaults rather than an endless climb.
    assert (await inherited_selection(store, "n0", fake)).preset_id == "default"  # type: ignore[arg-type]
    gone = FakeSessions({})
    assert (await inherited_selection(store, "ghost", gone)).preset_id == "default"  # type: ignore[arg-type]
    assert (await inherited_selection(store, None, None)).preset_id == "default"


async def test_freeze_for_agent_without_a_session_service(tmp_path: Path) -> None:
    store = SessionSelectionStore(tmp_path)
    await store.open()
    await store.set("parent", Selection(user_id="u", rp=RP_ON))
    event = AgentCreated(
        session_id="child", delegation_depth=1, parent_session_id="parent", resumed=False
    )
    assert await freeze_for_agent(store, event) == (Selection(user_id="u", rp=RP_ON), True)
    await store.set("parent", Selection())
    assert await freeze_for_agent(store, event) == (Selection(user_id="u", rp=RP_ON), False)
