"""Follow character (`docs/prompt-assembly.md#rp-mode`, ``ui-settings``
``rpFollowCharacter``, on by default): binding a card enters RP, unbinding always leaves it, and
turning RP off by hand suppresses following the bound card for that session."""

from __future__ import annotations

from typing import Any

import msgspec
from rp_harness import bind, card, mode, sandbox_modes
from tavern_harness import TavernApi

from innkeeper_hostapi.testing import RunningHost
from innkeeper_hostapi.tools import TOOL_POLICY
from innkeeper_tavern.features.prompt_profile.rp_policy import DEFAULT_RP_POLICY
from innkeeper_tavern.state.session_bindings import SESSION_SELECTIONS


async def turn(api: TavernApi, session: str, text: str = "Hi") -> None:
    api.provider.enqueue("Hello.")
    await api.send(session, text)
    await api.idle(session)


def system_text(api: TavernApi) -> str:
    return "\n\n".join(m.content for m in api.provider.requests[-1].messages if m.role == "system")


async def test_binding_a_card_enters_rp_and_unbinding_leaves_it(
    api: TavernApi, innkeeper_host: RunningHost
) -> None:
    session = await api.new_session()
    ada = await card(api)
    await bind(api, session, ada)
    view = await mode(api, session)
    assert view["active"] is True and view["source"] == "character-follow"
    assert view["followSuppressed"] is False and view["followCharacter"] is True
    # The session is still empty: its read-only event comes with its agent, before any request.
    assert await api.events(session) == []
    await turn(api, session)
    events = await api.events(session)
    assert [e["data"] for e in events[:2]] == [
        {"type": "permission/preset", "preset": "custom"},
        {"type": "sandbox/mode", "mode": "read-only"},
    ]
    assert DEFAULT_RP_POLICY in system_text(api)
    rp = innkeeper_host.get(SESSION_SELECTIONS).get(session).rp
    assert rp.sandbox_before == "workspace-write"  # the host default, restored on leave

    await bind(api, session, None)
    view = await mode(api, session)
    assert view["active"] is False and view["source"] is None
    assert view["followSuppressed"] is False
    assert await sandbox_modes(api, session) == ["read-only", "workspace-write"]
    await turn(api, session, "Again")
    assert DEFAULT_RP_POLICY not in system_text(api)


async def test_with_follow_off_binding_a_card_leaves_rp_alone(
    api: TavernApi, innkeeper_host: RunningHost
) -> None:
    await api.rp_follow(False)
    session = await api.new_session()
    await bind(api, session, await card(api))
    view = await mode(api, session)
    assert view["active"] is False and view["followCharacter"] is False
    await turn(api, session)
    assert await sandbox_modes(api, session) == []
    assert DEFAULT_RP_POLICY not in system_text(api)
    # A session bound while follow was off follows once it is on, when its next agent starts.
    await api.rp_follow(True)
    child = await api.fork(session)
    await turn(api, child)
    assert (await mode(api, child))["source"] == "character-follow"
    assert (await innkeeper_host.get(TOOL_POLICY).effective(child)).sandbox_mode == "read-only"
    assert (await mode(api, session))["active"] is False  # the parent was not touched


async def test_turning_rp_off_suppresses_following_until_another_card_is_bound(
    api: TavernApi,
) -> None:
    session = await api.new_session()
    ada, bea = await card(api, "Ada"), await card(api, "Bea")
    await bind(api, session, ada)
    await turn(api, session)
    answer = await api.call("POST", f"/host/api/sessions/{session}/prompt", {"text": "/rp off"})
    assert answer["command"]["text"] == "RP off: committed"
    view = await mode(api, session)
    assert view["active"] is False and view["followSuppressed"] is True
    assert await sandbox_modes(api, session) == ["read-only", "workspace-write"]
    # A fork copies the suppression: its new agent does not follow the card either.
    child = await api.fork(session)
    await turn(api, child)
    assert (await mode(api, child))["active"] is False
    assert await sandbox_modes(api, child) == ["read-only", "workspace-write"]
    # Binding the same card again changes nothing; binding another card follows it.
    await bind(api, session, ada)
    assert (await mode(api, session))["active"] is False
    await bind(api, session, bea)
    view = await mode(api, session)
    assert view["active"] is True and view["followSuppressed"] is False
    # Unbinding leaves RP and clears a suppression, even one set with RP already off.
    await api.v1("PUT", "/rp-mode", {"sessionId": session, "active": False})
    assert (await mode(api, session))["followSuppressed"] is True
    await bind(api, session, None)
    view = await mode(api, session)
    assert view["active"] is False and view["followSuppressed"] is False


async def test_a_session_bound_without_the_bind_route_follows_at_its_agent(
    api: TavernApi, innkeeper_host: RunningHost
) -> None:
    # Template apply and opening drafts store a whole selection; the agent's creation follows.
    session = await api.new_session()
    store = innkeeper_host.get(SESSION_SELECTIONS)
    selection: Any = store.defaults()
    await store.set(session, msgspec.structs.replace(selection, character_card_id=await card(api)))
    assert (await mode(api, session))["active"] is False
    await turn(api, session)
    view = await mode(api, session)
    assert view["active"] is True and view["source"] == "character-follow"
    assert await sandbox_modes(api, session) == ["read-only"]
    # Following never moves a selection's generation (views and leases over it stay current).
    generation = store.generation(session)
    await api.v1("PUT", "/rp-mode", {"sessionId": session, "active": False})
    assert store.generation(session) == generation
