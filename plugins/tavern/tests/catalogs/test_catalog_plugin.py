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
    assert sources.adapters() == ("world-book", "mvu")  # the real tavernMvu is present
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
