"""Helpers of the opening world-book tests (on ``pythonpath`` like :mod:`tavern_harness`): bind
a card's greeting to a session and build ``sourceIdentity`` / snapshot bodies from the shipped
opening manifest's test data."""

from __future__ import annotations

import hashlib
import io
from importlib import resources as package_files
from typing import Any

from tavern_harness import V1, TavernApi

from innkeeper_hostapi.catalogs import TAVERN_MEMORY_SOURCES
from innkeeper_tavern.features.opening_books import TAVERN_OPENING_WORLD_BOOKS, OpeningWorldBooks
from innkeeper_tavern.features.prompt_profile import ASSEMBLY_AUDIT
from innkeeper_tavern.plugin import TAVERN_RESOURCES
from innkeeper_tavern.state.resources import TavernResources

SNAPSHOT_BASE = "https://innkeeper.invalid/opening-books/"
PRIMARY = "lantern-inn-openings.js"
SIBLING = "lantern-inn-openings.alt.js"
GREETINGS = ("Welcome to the Lantern Inn.", "The cellar door creaks open.", "Wind on the roof.")


def snapshot(name: str = PRIMARY) -> dict[str, Any]:
    """``{url, sha256, content}`` of a shipped test snapshot."""
    folder = package_files.files("innkeeper_tavern.features.opening_books").joinpath("snapshots")
    content = folder.joinpath(name).read_text("utf-8")
    digest = hashlib.sha256(content.encode()).hexdigest()
    return {"url": SNAPSHOT_BASE + name, "sha256": digest, "content": content}


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class Books(TavernApi):
    """HTTP helpers for the opening world-book routes."""

    @property
    def resources(self) -> TavernResources:
        return self.host.get(TAVERN_RESOURCES)

    @property
    def service(self) -> OpeningWorldBooks:
        return self.host.get(TAVERN_OPENING_WORLD_BOOKS)

    async def card(self) -> str:
        body = {
            "name": "Mara",
            "firstMessage": GREETINGS[0],
            "alternateGreetings": list(GREETINGS[1:]),
        }
        return (await self.resources.create_character(body)).record.id

    async def select(self, session: str, card: str, index: int) -> None:
        body = {
            "sessionId": session,
            "characterCardId": card,
            "character": {"greetingIndex": index},
        }
        await self.v1("POST", "/character-selection", body)

    async def bound(self, card: str | None = None, index: int = 1) -> tuple[str, str]:
        """A new session with ``card`` (a new one by default) at greeting ``index``."""
        card = card or await self.card()
        session = await self.new_session()
        await self.select(session, card, index)
        return session, card

    def identity(self, session: str, card: str, index: int = 1) -> dict[str, Any]:
        return {
            "version": 1,
            "owner": "pmp-dsh-tavern",
            "sessionId": session,
            "characterId": card,
            "greetingIndex": index,
            "greetingSha256": sha(GREETINGS[index]),
            "identitySha256": snapshot()["sha256"],
        }

    def prepare_body(
        self, session: str, card: str, opening: str = "cellar", index: int = 1, **extra: Any
    ) -> dict[str, Any]:
        return {
            "sourceIdentity": self.identity(session, card, index),
            "openingId": opening,
            "identitySource": snapshot(),
            **extra,
        }

    async def prepare(self, session: str, body: dict[str, Any], status: int = 200) -> Any:
        path = f"/sessions/{session}/opening-worldbook/prepare"
        return await self.v1("POST", path, body, status)

    async def commit(self, session: str, body: dict[str, Any], status: int = 200) -> Any:
        return await self.v1("POST", f"/sessions/{session}/opening-worldbook/commit", body, status)

    @staticmethod
    def commit_body(proposal: dict[str, Any], operation: str = "op-1") -> dict[str, Any]:
        return {
            "proposalId": proposal["proposalId"],
            "expectedRevision": proposal["expectedRevision"],
            "operationId": operation,
            "sourceIdentity": proposal["sourceIdentity"],
            "reviewed": True,
            "write": True,
        }

    async def committed(self, session: str, card: str, opening: str = "cellar") -> Any:
        proposal = await self.prepare(session, self.prepare_body(session, card, opening))
        return await self.commit(session, self.commit_body(proposal))

    async def prompt_and_wait(self, session: str, text: str) -> None:
        await self.send(session, text)
        await self.idle(session)

    def audit(self, session: str) -> dict[str, Any]:
        record = self.host.get(ASSEMBLY_AUDIT).latest(session)
        assert record is not None
        return record

    async def list_bound(self, session: str) -> list[dict[str, Any]]:
        sources = self.host.get(TAVERN_MEMORY_SOURCES)
        bound = await sources.list_bound(scope={"sessionId": session, "authority": "local"})
        return [dict(item) for item in bound["items"]]

    async def raw(self, method: str, path: str, data: bytes) -> tuple[int, Any]:
        headers = {"Origin": self.host.origin, "Content-Type": "application/json"}
        body = io.BytesIO(data)  # large bodies: not raw bytes (aiohttp warns)
        resp = await self.host.client.request(method, V1 + path, data=body, headers=headers)
        return resp.status, await resp.json()


def fired(record: dict[str, Any], resource_id: str) -> list[str]:
    """The lore ids of ``resource_id``'s entries the request activated."""
    out = []
    for book in record["lore"]["books"]:
        for item in book["decisions"]:
            lore = item["loreId"]
            if lore.startswith(resource_id + ":") and item["decision"] == "included":
                out.append(lore)
    return out
