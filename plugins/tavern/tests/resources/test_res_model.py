"""Random operation sequences against TavernResources, checked after every step against a plain
Python model of the spec's rules (relations, deletions, tombstones, custom order)."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

import pytest

from innkeeper_tavern.state.resources import ResourceError, TavernResources


def make(root: Path) -> TavernResources:
    ticks = itertools.count()
    ids = itertools.count()
    return TavernResources(
        root,
        clock=lambda: f"2026-01-01T00:00:00.{next(ticks):06d}Z",
        ids=lambda prefix: f"{prefix}-{next(ids)}",
    )


class Model:
    def __init__(self) -> None:
        self.cards: list[str] = []  # creation order
        self.books: list[str] = []
        self.presets: list[str] = []
        self.bindings: dict[tuple[str, str], list[str]] = {}
        self.order: list[str] = []
        self.mode = "updated"
        self.tombstones: list[str] = []


async def check(res: TavernResources, model: Model) -> None:
    cards, mode, missing = res.list_characters()
    assert mode == model.mode
    assert sorted(e.id for e in res.characters.entries()) == sorted(model.cards)
    assert [t.id for t in missing] == model.tombstones
    if mode == "custom":
        shown = [json.loads(bytes(row))["id"] for row in cards]
        assert shown == [c for c in model.order if c in model.cards] + [
            c for c in model.cards if c not in model.order
        ]
    for (kind, owner), ids in model.bindings.items():
        assert res.world_book_ids(kind, owner) == ids, (kind, owner)  # type: ignore[arg-type]
    # Nothing refers to deleted owners or books.
    stored = res.bindings.state
    for owner_map, live in ((stored.preset, model.presets), (stored.character, model.cards)):
        for owner, ids in owner_map.items():
            assert owner in live and all(b in model.books for b in ids)


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_random_operations_follow_the_rules(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    res = make(tmp_path)
    await res.open()
    model = Model()
    for _ in range(70):
        op = rng.choice(
            [
                "card",
                "card",
                "book",
                "book",
                "preset",
                "bind",
                "bind",
                "del_card",
                "del_book",
                "del_preset",
                "order",
                "mode",
                "bad_order",
            ]
        )
        if op == "card":
            result = await res.create_character({"name": f"c{rng.randrange(5)}"})
            model.cards.append(result.record.id)
            if model.mode == "custom" or model.order:
                model.order.append(result.record.id)
        elif op == "book":
            model.books.append((await res.create_world_book({"name": "b"})).id)
        elif op == "preset":
            model.presets.append((await res.create_preset({"name": "p"})).id)
        elif op == "bind":
            kind = rng.choice(["preset", "character"])
            owners = model.presets if kind == "preset" else model.cards
            if not owners or not model.books:
                continue
            owner = rng.choice(owners)
            ids = [rng.choice(model.books) for _ in range(rng.randrange(4))]
            bad = rng.random() < 0.2
            if bad:
                ids.append("world-book-missing")
                with pytest.raises(ResourceError):
                    await res.set_world_book_ids(kind, owner, ids)  # type: ignore[arg-type]
            else:
                stored = await res.set_world_book_ids(kind, owner, ids)  # type: ignore[arg-type]
                expected = list(dict.fromkeys(ids))
                assert stored == expected
                if expected:
                    model.bindings[(kind, owner)] = expected
                else:
                    model.bindings.pop((kind, owner), None)
        elif op == "del_card" and model.cards:
            cid = rng.choice(model.cards)
            await res.delete_character(cid)
            model.cards.remove(cid)
            model.order = [c for c in model.order if c != cid]
            model.tombstones.append(cid)
            model.bindings.pop(("character", cid), None)
        elif op == "del_book" and model.books:
            bid = rng.choice(model.books)
            await res.delete_world_book(bid)
            model.books.remove(bid)
            for key in list(model.bindings):
                left = [b for b in model.bindings[key] if b != bid]
                if left:
                    model.bindings[key] = left
                else:
                    del model.bindings[key]
        elif op == "del_preset" and model.presets:
            pid = rng.choice(model.presets)
            await res.delete_preset(pid)
            model.presets.remove(pid)
            model.bindings.pop(("preset", pid), None)
        elif op == "order" and model.cards:
            perm = list(model.cards)
            rng.shuffle(perm)
            await res.set_character_order("custom", perm)
            model.mode, model.order = "custom", perm
        elif op == "mode":
            mode = rng.choice(["updated", "name", "custom"])
            if mode == "custom" and not model.order:
                cards, _, _ = res.list_characters()
                model.order = [json.loads(bytes(c))["id"] for c in cards]
            await res.set_character_order(mode, None)
            model.mode = mode
        elif op == "bad_order" and model.cards:
            before = res.character_state.state
            with pytest.raises(ResourceError):
                await res.set_character_order("custom", [*model.cards, model.cards[0]])
            assert res.character_state.state is before
        await check(res, model)
    # A fresh instance reads the same state back from disk.
    again = make(tmp_path)
    await again.open()
    await check(again, model)


async def test_deletion_listeners_hear_every_delete(tmp_path: Path) -> None:
    res = make(tmp_path)
    await res.open()
    heard: list[tuple[str, str]] = []

    async def listener(kind: str, resource_id: str) -> None:
        heard.append((kind, resource_id))

    async def broken(kind: str, resource_id: str) -> None:
        raise RuntimeError("selection store unavailable")

    res.deletion_listeners.extend([broken, listener])
    preset = await res.create_preset({"name": "p"})
    card = (await res.create_character({"name": "c"})).record
    user = await res.create_user({"name": "u"})
    book = await res.create_world_book({"name": "b"})
    await res.delete_preset(preset.id)
    await res.delete_character(card.id)
    await res.delete_user(user.id)
    await res.delete_world_book(book.id)
    assert heard == [
        ("preset", preset.id),
        ("character-card", card.id),
        ("user", user.id),
        ("world-book", book.id),
    ]
    # A failed delete tells nobody.
    with pytest.raises(ResourceError):
        await res.delete_preset(preset.id)
    assert len(heard) == 4
