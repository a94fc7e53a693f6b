"""Arbitrary JSON bodies never crash a template or configuration handler (never a 500)."""

from __future__ import annotations

import random
from typing import Any

from tavern_harness import V1

from .conftest import Tavern

KEYS = [
    "name",
    "selection",
    "sourceSessionId",
    "id",
    "source",
    "mode",
    "sessionId",
    "templateId",
    "targetSessionId",
    "presetId",
    "characterCardId",
    "userId",
    "worldBookIds",
    "character",
    "greetingIndex",
    "preferCharacterSystemPrompt",
    "rp",
    "active",
    "sandboxBefore",
    "format",
    "version",
    "resourceType",
    "data",
]


def random_json(rng: random.Random, strings: list[str], depth: int = 0) -> Any:
    kind = rng.randrange(8 if depth < 4 else 5)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False])
    if kind == 2:
        return rng.choice([0, -1, 1, 1.0, 1.5, 2**53, 10**20])
    if kind == 3:
        return rng.choice(strings)
    if kind == 4:
        return rng.choice([[], {}])
    if kind == 5:
        return [random_json(rng, strings, depth + 1) for _ in range(rng.randrange(4))]
    return {rng.choice(KEYS): random_json(rng, strings, depth + 1) for _ in range(rng.randrange(5))}


async def test_arbitrary_json_bodies_never_crash(tavern: Tavern) -> None:
    session = await tavern.new_session()
    preset = await tavern.preset("P")
    tid = (await tavern.v1("POST", "/session-templates", {"name": "T"}, 201))["template"]["id"]
    strings = [
        "",
        "x",
        "current",
        "template",
        "pmp-dsh-tavern",
        "session-template",
        "command",
        "read-only",
        "__proto__",
        "🙂" * 3,
        session,
        preset,
        tid,
    ]
    targets = [
        ("POST", "/session-templates"),
        ("POST", "/session-templates/import"),
        ("POST", "/session-templates/select"),
        ("PATCH", f"/session-templates/{tid}"),
        ("POST", "/session-configurations/preview"),
        ("POST", "/session-configurations/apply"),
    ]
    rng = random.Random(11)
    for _ in range(40):
        for method, path in targets:
            body = random_json(rng, strings)
            resp = await tavern.host.client.request(
                method, V1 + path, json=body, headers={"Origin": tavern.host.origin}
            )
            assert resp.status < 500, (method, path, body, await resp.text())
            assert resp.content_type == "application/json"
    # Whatever happened, the stores still load what they wrote.
    assert tavern.templates.templates()
