"""Shared helpers of the Tavern plugin's host tests (importable because the tests folder is on
``pythonpath``; see the root ``pyproject.toml``).

:class:`TavernApi` wraps a running host's test client: JSON calls with the same-origin header on
mutations, the v1 prefix, sessions, turns and the synthetic provider. Each test folder's
conftest subclasses it with what only that folder needs. :func:`host_starter` starts extra hosts
(own config, restarts on one data dir) that are closed after the test.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

from innkeeper_core.providers.synthetic import SyntheticProvider, SyntheticReply
from innkeeper_core.testing import CoreTestHost, start_test_host
from innkeeper_hostapi.agents import AGENTS, PROVIDER
from innkeeper_hostapi.testing import RunningHost
from innkeeper_tavern.state.resources import TavernResources

V1 = "/pmp-dsh-tavern/api/v1"
#: Every sampler SillyTavern's Default preset sets (top_k 0 and seed -1 mean "not sent").
DEFAULT_PRESET_CALL = {
    "temperature": 1.0,
    "maxTokens": 300,
    "topP": 1.0,
    "minP": 0.0,
    "topA": 0.0,
    "frequencyPenalty": 0.0,
    "presencePenalty": 0.0,
    "repetitionPenalty": 1.0,
}


class TavernApi:
    """HTTP helpers over the test client (mutations carry the same-origin header)."""

    def __init__(self, host: RunningHost) -> None:
        self.host = host

    async def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        status: int = 200,
        *,
        data: bytes | None = None,
        content_type: str | None = None,
    ) -> Any:
        headers = {"Origin": self.host.origin} if method != "GET" else {}
        if content_type:
            headers["Content-Type"] = content_type
        resp = await self.host.client.request(method, path, json=body, data=data, headers=headers)
        payload = await resp.json()
        assert resp.status == status, payload
        return payload

    async def v1(self, method: str, path: str, body: Any = None, status: int = 200) -> Any:
        return await self.call(method, V1 + path, body, status)

    async def new_session(self, **body: Any) -> str:
        data = await self.call("POST", "/host/api/sessions", {"title": "t", **body}, 201)
        session_id: str = data["session"]["id"]
        return session_id

    async def send(self, session_id: str, text: str = "Hi") -> None:
        """Queue input without waiting for the turn."""
        await self.call("POST", f"/host/api/sessions/{session_id}/prompt", {"text": text}, 202)

    async def idle(self, session_id: str) -> None:
        await self.host.get(AGENTS).wait_idle(session_id)

    async def resolve(self, session_id: str) -> None:
        await self.host.get(AGENTS).resolve_agent(session_id)

    async def events(self, session_id: str) -> list[dict[str, Any]]:
        page = await self.call("GET", f"/host/api/sessions/{session_id}/history?limit=1000")
        events: list[dict[str, Any]] = list(reversed(page["events"]))
        return events

    async def rp_follow(self, on: bool) -> None:
        """Set ``ui-settings.rpFollowCharacter`` (on by default: binding a card enters RP, which
        adds the ``rp:policy`` section and pins read-only). Tests of something else turn it off."""
        body = {"locale": "en", "scale": 1, "rpFollowCharacter": on}
        await self.call("PUT", V1 + "/ui-settings", body)

    async def fork(self, session_id: str, at: int | None = None) -> str:
        """Fork at event ``at`` (default: the latest event)."""
        if at is None:
            history = await self.call("GET", f"/host/api/sessions/{session_id}/history?limit=1")
            at = history["events"][0]["seq"]
        data = await self.call(
            "POST", f"/host/api/sessions/{session_id}/fork", {"atEventId": at}, 201
        )
        child: str = data["session"]["id"]
        return child

    @property
    def provider(self) -> SyntheticProvider:
        provider = self.host.get(PROVIDER)
        assert isinstance(provider, SyntheticProvider)
        return provider

    # -- resources (subclasses say where their TavernResources is) ------------------------------
    @property
    def resources(self) -> TavernResources:
        raise NotImplementedError

    async def preset(self, name: str) -> str:
        return (await self.resources.create_preset({"name": name})).id

    async def character(self, name: str, greetings: int = 1) -> str:
        body = {"name": name, "alternateGreetings": [f"g{i}" for i in range(1, greetings)]}
        return (await self.resources.create_character(body)).record.id

    async def user(self, name: str) -> str:
        return (await self.resources.create_user({"name": name, "description": "d"})).id

    async def world_book(self, name: str) -> str:
        return (await self.resources.create_world_book({"name": name})).id

    def enqueue_slow_reply(self, delay_s: float = 0.2) -> None:
        """Keep the next turn running for ``delay_s`` per word (to hit running-agent rules)."""
        self.provider.enqueue(SyntheticReply(text="slow reply here", delay_s=delay_s))


HostStarter = Callable[..., Awaitable[tuple[CoreTestHost, Any]]]


@asynccontextmanager
async def host_starter(
    load: Callable[[CoreTestHost], Awaitable[Any]],
) -> AsyncIterator[Callable[..., Awaitable[tuple[CoreTestHost, Any]]]]:
    """``start(data_dir, **config)`` starts a host, runs ``load(host)`` (which returns the
    helper object) and returns ``(host, helper)``; every host is closed on exit."""
    hosts: list[CoreTestHost] = []

    async def start(data_dir: Path, **overrides: Any) -> tuple[CoreTestHost, Any]:
        host = await start_test_host(data_dir, **overrides)
        hosts.append(host)
        return host, await load(host)

    try:
        yield start
    finally:
        for host in reversed(hosts):
            with suppress(RuntimeError):  # a test may have closed it already
                await host.close()
