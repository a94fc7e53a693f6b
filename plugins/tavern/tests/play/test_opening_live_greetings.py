"""A live session before its first send (docs/contract/mvu-cards.md#opening-snapshot):
once its MVU state exists, switching the greeting restores that greeting's own opening — its
generated state or the player's edits — never the previous greeting's; the first send transfers
only the selected opening, and a later reply never changes the opening snapshot."""

from __future__ import annotations

import json
from typing import Any

from opening_harness import base, select, send, snapshot, started
from play_harness import Play

from innkeeper_hostapi.mvu import TAVERN_MVU


async def edit(play: Play, ids: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """Edit the session's current opening (a real, durable write), answering the receipt."""
    view = await snapshot(play, base(ids, "initial"))
    variables = json.loads(json.dumps(view["variables"]))
    variables["stat_data"].update(changes)
    mvu = play.host.get(TAVERN_MVU)
    result: dict[str, Any] = await mvu.update(
        id=view["resourceId"],
        content=variables,
        expected_revision=view["revision"],
        operation_id=f"edit-{view['revision']}",
        scope={"authority": "local", "sessionId": ids["sessionId"]},
    )
    return result["receipt"]


async def stat(play: Play, ids: dict[str, Any], mode: str = "greeting") -> Any:
    return (await snapshot(play, base(ids, mode)))["variables"]["stat_data"]


async def test_a_b_a_restores_each_greetings_opening_and_edits(play: Play) -> None:
    ids = await started(play)
    await edit(play, ids, hp=77)  # greeting A's state now exists durably, with an edit
    assert await stat(play, ids) == {"hp": 77, "place": "home"}
    await select(play, ids, 1)
    # Greeting B starts from [initvar] + its own envelope, never from A's updates or edits.
    assert await stat(play, ids) == {"hp": 40, "place": "home"}
    assert await stat(play, ids, "initial") == {"hp": 40, "place": "home"}
    await edit(play, ids, place="cellar")
    await select(play, ids, 0)
    assert await stat(play, ids) == {"hp": 77, "place": "home"}  # A's edit is back
    await select(play, ids, 2)
    assert await stat(play, ids) == {"hp": 100, "place": "home"}  # no envelope: [initvar]
    await select(play, ids, 1)
    assert await stat(play, ids) == {"hp": 40, "place": "cellar"}  # B's edit is back
    await select(play, ids, 0)
    view = await snapshot(play, base(ids, "greeting"))
    assert view["variables"]["stat_data"] == {"hp": 77, "place": "home"}

    # The first send transfers only the selected opening: it is the first pre-turn checkpoint.
    await send(play, ids, "_.set('hp', 10);")
    after = await snapshot(play, base(ids, "greeting"))
    assert after["variables"]["stat_data"] == {"hp": 77, "place": "home"}
    assert after["revision"] == view["revision"] and after["currentRevision"] > after["revision"]
    mvu = play.host.get(TAVERN_MVU)
    scope = {"authority": "local", "sessionId": ids["sessionId"]}
    current = await mvu.resolve_prompt_dependency(
        scope=scope, event=await play.lore_event(scope["sessionId"])
    )
    assert current["content"]["stat_data"] == {"hp": 10, "place": "home"}

    # After the first turn a greeting change re-initializes nothing, and later replies never
    # change the opening snapshot.
    await select(play, ids, 1)
    await send(play, ids, "_.set('place', 'garden');", "second-send")
    current = await mvu.resolve_prompt_dependency(
        scope=scope, event=await play.lore_event(scope["sessionId"])
    )
    assert current["content"]["stat_data"] == {"hp": 10, "place": "garden"}
    final = await snapshot(play, base(ids, "greeting"))
    assert final["variables"]["stat_data"] == {"hp": 77, "place": "home"}
    assert final["revision"] == view["revision"]


async def test_a_greeting_switch_is_a_new_revision_and_survives_a_restart(
    start_play: Any, tmp_path: Any
) -> None:
    host, play = await start_play(tmp_path / "data")
    ids = await started(play)
    receipt = await edit(play, ids, hp=55)
    await select(play, ids, 1)
    b = await snapshot(play, base(ids, "initial"))
    assert b["revision"] > receipt["revision"]  # CAS and leases see the switch
    await edit(play, ids, place="attic")  # durable: B's switch was written with the edit
    await host.close()
    _, play = await start_play(tmp_path / "data")
    await play.bind()
    assert await stat(play, ids) == {"hp": 40, "place": "attic"}
    await select(play, ids, 0)
    assert await stat(play, ids) == {"hp": 55, "place": "home"}
