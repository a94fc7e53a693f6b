"""Leases over managed documents and the workspace identity; stateSource validation."""

from __future__ import annotations

from play_harness import Play

from innkeeper_tavern.features.play import TAVERN_PLAY
from innkeeper_tavern.features.play.leases import WORKSPACE_KEY, file_key


async def test_a_write_invalidates_leases_and_old_bytes_never_revive_them(play: Play) -> None:
    await play.bind()
    leases = play.host.get(TAVERN_PLAY).workspace.leases
    first = await play.write("t/timeline.json", '{"nodes": []}', expectedRevision=None)
    read = leases.capture_read_lease([file_key("t/timeline.json")])
    mutation = leases.capture_mutation_lease([file_key("t/timeline.json")])
    assert leases.valid(read) and leases.valid(mutation)
    second = await play.write(
        "t/timeline.json", '{"nodes": [] }', expectedRevision=first["revision"]
    )
    assert not leases.valid(read) and not leases.valid(mutation)
    # Writing the old bytes back issues yet another token: the old lease stays invalid.
    await play.write("t/timeline.json", '{"nodes": []}', expectedRevision=second["revision"])
    assert not leases.valid(read)
    fresh = leases.capture_read_lease([file_key("t/timeline.json")])
    conservative = leases.capture_mutation_lease()
    await play.write("other.txt", "x")  # an unrelated file expires only the mutation lease
    assert leases.valid(fresh) and not leases.valid(conservative)
    conservative = leases.capture_mutation_lease()
    await play.v2("POST", "/workspace/dirs", {"path": "d"}, 201)
    assert not leases.valid(conservative)
    conservative = leases.capture_mutation_lease()
    status, _ = await play.raw(
        "PUT", "/workspace/files?path=t/timeline.json", {"content": "{}", "expectedRevision": None}
    )
    assert status == 409 and leases.valid(conservative)  # a failed CAS expires nothing
    assert WORKSPACE_KEY in fresh.tokens
    await play.bind()  # rebinding changes the workspace identity
    assert not leases.valid(fresh)


async def test_state_source_is_validated(play: Play) -> None:
    await play.bind()
    sid = (await play.v2("POST", "/sessions", {}, 201))["sessionId"]
    bad_sources = [
        {"sessionId": sid},
        {"sessionId": sid, "beforeReplyEventId": 3, "beforeUserEventId": 2},
        {"sessionId": "other", "beforeReplyEventId": 3},
        {"sessionId": sid, "beforeReplyEventId": 0},
        "x",
    ]
    for source in bad_sources:
        status, body = await play.raw(
            "POST", "/sessions", {"selectionFromSessionId": sid, "stateSource": source}
        )
        assert (status, body["code"]) == (400, "PLAY_STATE_SOURCE_INVALID"), source
    status, body = await play.raw(
        "POST", "/sessions", {"stateSource": {"sessionId": sid, "beforeReplyEventId": 2}}
    )
    assert (status, body["code"]) == (400, "PLAY_STATE_SOURCE_INVALID")
    await play.v2("POST", f"/sessions/{sid}/user-message", {"text": "hi"}, 202)
    await play.idle(sid)
    status, body = await play.raw(
        "POST",
        f"/sessions/{sid}/branch",
        {"atEventId": 3, "stateSource": {"sessionId": sid, "beforeReplyEventId": 2}},
    )
    assert (status, body["code"]) == (400, "PLAY_STATE_SOURCE_INVALID")  # must come after atEventId
