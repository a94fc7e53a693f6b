"""Mutated and arbitrary bytes through the import routes end in a clean 4xx (or a valid import),
never a 500, and a rejected body writes nothing."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

Tavern = Any
CORPUS = Path(__file__).resolve().parents[5] / "shared" / "sillytavern-corpus"
SEEDS = [
    (
        "/characters/import",
        "image/png",
        CORPUS / "sillytavern-content" / "default_CodingSensei.png",
    ),
    ("/characters/import", "application/json", CORPUS / "prolix-oc-st-presets/cards/Pxansatu.json"),
    ("/world-books/import", "application/json", CORPUS / "sillytavern-repo/tag-1.0.0/Toaru.json"),
    ("/users/import", "application/json", None),
]
USER = b'{"format":"pmp-dsh-tavern","version":1,"resourceType":"user","data":{"name":"R"}}'
LISTS = {
    "/characters/import": "/characters",
    "/world-books/import": "/world-books",
    "/users/import": "/users",
}
KEYS = {"/characters": "characters", "/world-books": "worldBooks", "/users": "users"}


def mutate(rng: random.Random, data: bytes) -> bytes:
    buf = bytearray(data)
    choice = rng.randrange(4)
    if choice == 0:  # flip bytes
        for _ in range(rng.randint(1, 8)):
            buf[rng.randrange(len(buf))] = rng.randrange(256)
    elif choice == 1:  # truncate
        del buf[rng.randrange(len(buf)) :]
    elif choice == 2:  # splice random bytes in
        at = rng.randrange(len(buf))
        buf[at:at] = rng.randbytes(rng.randint(1, 64))
    else:  # arbitrary bytes
        return rng.randbytes(rng.randint(0, 512))
    return bytes(buf)


async def test_mutated_imports_fail_cleanly(tavern: Tavern) -> None:
    rng = random.Random(4)
    for route, ctype, path in SEEDS:
        seed = path.read_bytes() if path else USER
        listing = LISTS[route]
        for _ in range(40):
            before = len((await tavern.get(listing))[KEYS[listing]])
            data = mutate(rng, seed)
            resp = await tavern.client.post(
                "/pmp-dsh-tavern/api/v1" + route,
                data=data,
                headers={**tavern.origin, "Content-Type": ctype},
            )
            body = await resp.json()
            assert resp.status == 201 or 400 <= resp.status < 500, (route, resp.status, body)
            after = len((await tavern.get(listing))[KEYS[listing]])
            if resp.status == 201:
                assert after == before + 1
            else:
                assert body["ok"] is False and body["code"]
                assert after == before
    assert not list(tavern.root.rglob("*.tmp"))
