"""Every preset, character, world-book and user row of the v1 route table (docs/resources.md#routes)
is served, and arbitrary JSON bodies never crash a handler."""

from __future__ import annotations

import random
from typing import Any

import pytest

Tavern = Any
# (method, path) rows of the v1 route table this issue covers; :id is a stored-looking id
# that does not exist.
ROWS = [
    ("GET", "/presets"),
    ("POST", "/presets"),
    ("GET", "/presets/:id"),
    ("PUT", "/presets/:id"),
    ("DELETE", "/presets/:id"),
    ("POST", "/import"),
    ("GET", "/presets/:id/export"),
    ("GET", "/presets/:id/regex-scripts"),
    ("PUT", "/presets/:id/regex-scripts"),
    ("GET", "/presets/:id/world-books"),
    ("PUT", "/presets/:id/world-books"),
    ("GET", "/characters/:id/regex-scripts"),
    ("PUT", "/characters/:id/regex-scripts"),
    ("GET", "/characters/:id/world-books"),
    ("PUT", "/characters/:id/world-books"),
    ("GET", "/characters"),
    ("POST", "/characters"),
    ("POST", "/characters/import"),
    ("GET", "/characters/:id"),
    ("PATCH", "/characters/:id"),
    ("DELETE", "/characters/:id"),
    ("GET", "/characters/:id/json"),
    ("GET", "/characters/:id/png"),
    ("PATCH", "/characters/:id/world-book"),
    ("PUT", "/characters/order"),
    ("POST", "/characters/relink"),
    ("GET", "/world-books"),
    ("POST", "/world-books"),
    ("GET", "/world-books/:id"),
    ("PATCH", "/world-books/:id"),
    ("DELETE", "/world-books/:id"),
    ("GET", "/users"),
    ("POST", "/users"),
    ("POST", "/users/import"),
    ("GET", "/users/:id/export"),
    ("GET", "/users/:id"),
    ("PATCH", "/users/:id"),
    ("DELETE", "/users/:id"),
    ("POST", "/world-books/import"),
    ("GET", "/world-books/:id/json"),
    ("GET", "/users/:id/world-books"),
    ("PUT", "/users/:id/world-books"),
]


@pytest.mark.parametrize(("method", "path"), ROWS)
async def test_row_is_served(tavern: Tavern, method: str, path: str) -> None:
    body = None if method in ("GET", "DELETE") else {}
    status_body = await tavern.call(method, path.replace(":id", "x-missing"), json=body)
    if isinstance(status_body, dict):
        assert status_body.get("code") not in ("NOT_FOUND", "METHOD_NOT_ALLOWED"), status_body
        assert status_body.get("code") != "INTERNAL_ERROR"


def random_json(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(8 if depth < 3 else 5)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False])
    if kind == 2:
        return rng.choice([0, -1, 1.5, 10**20, 100])
    if kind == 3:
        return rng.choice(["", "x", "world-book-1", "custom", "🙂" * 3])
    if kind == 4:
        return rng.choice([[], {}])
    if kind == 5:
        return [random_json(rng, depth + 1) for _ in range(rng.randrange(4))]
    keys = [
        "name",
        "entries",
        "uid",
        "keys",
        "content",
        "book",
        "characterBook",
        "mode",
        "characterIds",
        "worldBookIds",
        "regexScripts",
        "sampling",
        "prompts",
        "avatar",
        "description",
        "position",
        "order",
        "extra",
        "extensions",
    ]
    return {rng.choice(keys): random_json(rng, depth + 1) for _ in range(rng.randrange(5))}


async def test_arbitrary_json_bodies_never_crash(tavern: Tavern) -> None:
    preset = (await tavern.call("POST", "/presets", json={"name": "P"}, status=201))["preset"]
    card = (await tavern.call("POST", "/characters", json={"name": "C"}, status=201))["character"]
    book = (await tavern.call("POST", "/world-books", json={"name": "B"}, status=201))["worldBook"]
    user = (await tavern.call("POST", "/users", json={"name": "U"}, status=201))["user"]
    targets = [
        ("PUT", f"/presets/{preset['id']}"),
        ("PUT", f"/presets/{preset['id']}/regex-scripts"),
        ("PUT", f"/presets/{preset['id']}/world-books"),
        ("PATCH", f"/characters/{card['id']}"),
        ("PATCH", f"/characters/{card['id']}/world-book"),
        ("PUT", f"/characters/{card['id']}/world-books"),
        ("PUT", "/characters/order"),
        ("POST", "/characters/relink"),
        ("PATCH", f"/world-books/{book['id']}"),
        ("PATCH", f"/users/{user['id']}"),
        ("PUT", f"/users/{user['id']}/world-books"),
        ("POST", "/import"),
        ("POST", "/presets"),
        ("POST", "/characters"),
        ("POST", "/world-books"),
        ("POST", "/users"),
    ]
    rng = random.Random(7)
    for _ in range(12):
        for method, path in targets:
            body = random_json(rng)
            resp = await tavern.client.request(
                method, "/pmp-dsh-tavern/api/v1" + path, json=body, headers=tavern.origin
            )
            assert resp.status < 500, (method, path, body, await resp.text())
            assert resp.content_type == "application/json"
