"""A host with the Assembler loaded, drop-in source plugins and HTTP helpers."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from innkeeper_core.providers.synthetic import SyntheticProvider
from innkeeper_hostapi.agents import AGENTS, PROVIDER
from innkeeper_hostapi.assembly import PROMPT_ASSEMBLER, AssemblerService, Module, Strategy
from innkeeper_hostapi.testing import RunningHost

ASM = "/dsh-assembler/api/v1"

#: A drop-in plugin registering one source through ``{key}``; ``{items}`` is a Python list of
#: ``Contribution`` expressions.
SOURCE_PLUGIN = """
from innkeeper_hostapi import hookimpl
from innkeeper_hostapi.assembly import (
    PROMPT_SOURCES, TAVERN_REQUEST_SOURCES, AtDepth, AuthorsNote, ChatStart, Context,
    Contribution, InSystem,
)


class Source:
    id = {source_id!r}
    calls = []

    async def render(self, request):
        Source.calls.append((request.session_id, request.preview))
        return {items}


@hookimpl
def innkeeper_plugin_setup(ctx):
    ctx.get({key}).register(ctx, Source())
"""


class Api:
    """HTTP helper (mutations carry the same-origin header)."""

    def __init__(self, host: RunningHost, tmp: Path) -> None:
        self.host = host
        self.tmp = tmp

    async def call(self, method: str, path: str, body: Any = None, status: int = 200) -> Any:
        headers = {"Origin": self.host.origin} if method != "GET" else None
        resp = await self.host.client.request(method, path, json=body, headers=headers)
        data = await resp.json()
        assert resp.status == status, data
        return data

    async def new_session(self) -> str:
        data = await self.call("POST", "/host/api/sessions", {"title": "asm"}, status=201)
        session_id: str = data["session"]["id"]
        return session_id

    async def turn(self, session_id: str, text: str) -> None:
        await self.call(
            "POST", f"/host/api/sessions/{session_id}/prompt", {"text": text, "mode": "queue"}, 202
        )
        await self.host.get(AGENTS).wait_idle(session_id)

    async def events(self, session_id: str) -> list[dict[str, Any]]:
        page = await self.call("GET", f"/host/api/sessions/{session_id}/history?limit=1000")
        events: list[dict[str, Any]] = list(reversed(page["events"]))
        return events

    async def messages(self, session_id: str) -> list[dict[str, Any]]:
        data = await self.call("GET", f"/host/api/sessions/{session_id}/messages")
        messages: list[dict[str, Any]] = data["messages"]
        return messages

    @property
    def provider(self) -> SyntheticProvider:
        provider = self.host.get(PROVIDER)
        assert isinstance(provider, SyntheticProvider)
        return provider

    @property
    def assembler(self) -> AssemblerService:
        return self.host.get(PROMPT_ASSEMBLER)

    def source_plugin(
        self, plugin_id: str, source_id: str, items: str, key: str = "PROMPT_SOURCES"
    ) -> str:
        folder = self.tmp / "plugins" / plugin_id
        folder.mkdir(parents=True, exist_ok=True)
        body = SOURCE_PLUGIN.format(source_id=source_id, items=items, key=key)
        (folder / "__init__.py").write_text(body)
        return str(folder)

    def plugin(self, plugin_id: str, source: str) -> str:
        folder = self.tmp / "plugins" / plugin_id
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "__init__.py").write_text(textwrap.dedent(source))
        return str(folder)

    async def use(self, session_id: str, strategy: Strategy) -> None:
        """Store ``strategy`` and apply it to the session."""
        await self.assembler.put_strategy(strategy)
        await self.assembler.apply(session_id, strategy.id)


@pytest.fixture
def api(innkeeper_host: RunningHost, tmp_path: Path) -> Api:
    return Api(innkeeper_host, tmp_path)


@pytest.fixture
def modules() -> Callable[..., tuple[Module, ...]]:
    def build(*sources: str) -> tuple[Module, ...]:
        return tuple(Module(source=s) for s in sources)

    return build
