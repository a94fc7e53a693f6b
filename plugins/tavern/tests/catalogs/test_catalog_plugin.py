"""The loaded Tavern plugin provides ``tavernScopeCatalog`` and ``tavernMemorySources``; an
unload revokes their leases."""

from __future__ import annotations

import pytest
from tavern_harness import V1, TavernApi

from innkeeper_hostapi.agents import SESSIONS
from innkeeper_hostapi.catalogs import (
    SCOPE_CATALOG_PROTOCOL,
    TAVERN_MEMORY_SOURCES,
    TAVERN_SCOPE_CATALOG,
)
from innkeeper_hostapi.mvu import TAVERN_MVU, MvuServiceError
from innkeeper_hostapi.testing import RunningHost


async def test_the_plugin_provides_the_scope_catalog(innkeeper_host: RunningHost) -> None:
    await innkeeper_host.load("tavern", "innkeeper_tavern.plugin")
    api = TavernApi(innkeeper_host)
    created = await api.call("POST", f"{V1}/users", {"name": "Traveller"}, status=201)
    user_id = created["user"]["id"]
    catalog = innkeeper_host.get(TAVERN_SCOPE_CATALOG)
    assert catalog.protocol_version == SCOPE_CATALOG_PROTOCOL and catalog.authority == "local"
    page = await catalog.search_scopes(field="userId", query="travel")
    assert page == {"items": [{"id": user_id, "name": "Traveller"}], "nextCursor": None}
    session_id = await api.new_session()
    assert (await innkeeper_host.get(SESSIONS).inspect(session_id)).header.id == session_id
    context = await catalog.resolve_scope_context(session_id=session_id)
    assert context["scope"]["sessionId"] == session_id
    check = context["checkCurrent"]
    assert check()
    sources = innkeeper_host.get(TAVERN_MEMORY_SOURCES)
    # Session templates, and the real tavernMvu is present.
    assert sources.adapters() == ("world-book", "template", "mvu")
    bound = await sources.list_bound(scope={"sessionId": session_id, "authority": "local"})
    assert bound["items"] == () and bound["checkCurrent"]()
    mvu = innkeeper_host.get(TAVERN_MVU)  # the adapter's own listBound, the same shape
    own = await mvu.list_bound(scope={"sessionId": session_id, "authority": "local"})
    assert own["items"] == () and own["checkCurrent"]()
    with pytest.raises(MvuServiceError):
        await mvu.list_bound(scope={"authority": "local"})
    await innkeeper_host.unload("tavern")
    assert not check()
    assert not bound["checkCurrent"]()
    assert not own["checkCurrent"]()


async def test_a_template_applied_over_http_is_bound_to_the_session(
    innkeeper_host: RunningHost,
) -> None:
    await innkeeper_host.load("tavern", "innkeeper_tavern.plugin")
    api = TavernApi(innkeeper_host)
    card = (await api.call("POST", f"{V1}/characters", {"name": "Ann"}, status=201))["character"][
        "id"
    ]
    created = await api.call(
        "POST",
        f"{V1}/session-templates",
        {"name": "Ann's table", "selection": {"characterCardId": card}},
        status=201,
    )
    template_id = created["template"]["id"]
    session_id = await api.new_session()
    apply = {
        "targetSessionId": session_id,
        "source": {"mode": "template", "templateId": template_id},
    }
    await api.call("POST", f"{V1}/session-configurations/apply", apply)
    sources = innkeeper_host.get(TAVERN_MEMORY_SOURCES)
    scope = {"sessionId": session_id, "authority": "local"}
    bound = await sources.list_bound(scope=scope)
    [item] = [i for i in bound["items"] if i["adapterId"] == "template"]
    assert (item["id"], item["name"], item["binding"]["sessionId"]) == (
        template_id,
        "Ann's table",
        session_id,
    )
    await api.call("PATCH", f"{V1}/session-templates/{template_id}", {"name": "Renamed"})
    assert not bound["checkCurrent"]()
    await innkeeper_host.unload("tavern")
