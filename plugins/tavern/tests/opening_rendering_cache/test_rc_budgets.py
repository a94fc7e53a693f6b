"""Each rendering-cache budget holds exactly at its limit and refuses one past it, leaving the
store (memory, index.json and files) unchanged."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from innkeeper_tavern.features.opening_rendering_cache.model import (
    MAX_GRAPH_METADATA_BYTES,
    MAX_INDEX_BYTES,
    MAX_OWNERS,
    MAX_SOURCE_BYTES,
    MAX_SOURCES,
    CacheError,
    Graph,
    canonical_json,
    parse_graph,
    parse_source,
)
from innkeeper_tavern.features.opening_rendering_cache.store import RenderingCacheStore

LOG = logging.getLogger("test.rendering-cache")


async def opened(data_dir: Path) -> RenderingCacheStore:
    store = RenderingCacheStore(data_dir, logger=LOG)
    await store.open()
    return store


def graph_of(*contents: tuple[str, str], **metadata: object) -> Graph:
    sources = [{"url": u, "content": c, "downloadedAt": 1} for u, c in contents]
    return parse_graph({"metadata": metadata, "sources": sources})


async def publish(store: RenderingCacheStore, owner: str, graph: Graph) -> bool:
    return await store.publish(owner, await store.begin(owner), graph)


def state_of(store: RenderingCacheStore) -> tuple[bytes, list[str]]:
    files = (
        sorted(p.name for p in store.sources_dir.iterdir()) if store.sources_dir.exists() else []
    )
    return store.index_path.read_bytes(), files


async def refused(store: RenderingCacheStore, owner: str, graph: Graph, code: str) -> None:
    generation = await store.begin(owner)
    before = state_of(store)
    with pytest.raises(CacheError) as caught:
        await store.publish(owner, generation, graph)
    assert caught.value.code == code
    assert state_of(store) == before
    assert store.owner(owner).pending  # still publishable with a graph that fits


async def test_512_sources_fit_and_the_513th_is_refused(tmp_path: Path) -> None:
    store = await opened(tmp_path)
    per_owner = 64
    for i in range(MAX_SOURCES // per_owner):
        g = graph_of(*((f"https://s.example/{i}/{j}.js", f"{i}-{j}") for j in range(per_owner)))
        assert await publish(store, f"o{i}", g)
    assert len(list(store.sources_dir.iterdir())) == MAX_SOURCES
    await refused(
        store,
        "extra",
        graph_of(("https://s.example/x.js", "x")),
        "RENDERING_CACHE_TOO_MANY_SOURCES",
    )
    # The same URL and text shared by another graph is the same stored source: it fits.
    assert await publish(store, "shared", graph_of(("https://s.example/0/0.js", "0-0")))
    # Reopened, everything is still there and verified.
    again = await opened(tmp_path)
    assert len(list(again.sources_dir.iterdir())) == MAX_SOURCES
    assert await again.read(again.owner("o7").sources[63]) == "7-63"


def test_a_source_of_8_mib_fits_and_one_byte_more_is_refused() -> None:
    at_limit = parse_source({"url": "u", "content": "a" * MAX_SOURCE_BYTES, "downloadedAt": 0})
    assert at_limit.ref.size == MAX_SOURCE_BYTES
    # Counted in UTF-8 bytes, not characters: one 2-byte character tips it over.
    over = "a" * (MAX_SOURCE_BYTES - 1) + "é"
    with pytest.raises(CacheError) as caught:
        parse_source({"url": "u", "content": over, "downloadedAt": 0})
    assert (caught.value.status, caught.value.code) == (413, "RENDERING_CACHE_SOURCE_TOO_LARGE")


async def test_64_mib_in_total_fits_and_one_byte_more_is_refused(tmp_path: Path) -> None:
    store = await opened(tmp_path)
    for i in range(8):  # 8 x 8 MiB = 64 MiB exactly
        assert await publish(
            store, f"o{i}", graph_of((f"https://b.example/{i}", str(i) * MAX_SOURCE_BYTES))
        )
    await refused(
        store, "extra", graph_of(("https://b.example/one", "1")), "RENDERING_CACHE_TOTAL_TOO_LARGE"
    )
    # Replacing a graph frees its bytes: the same owner can swap 8 MiB for 8 MiB.
    assert await publish(store, "o0", graph_of(("https://b.example/new", "n" * MAX_SOURCE_BYTES)))
    assert len(list(store.sources_dir.iterdir())) == 8


def test_metadata_of_2_mib_fits_and_one_byte_more_is_refused() -> None:
    overhead = len(canonical_json({"k": ""}))
    fits = {"k": "m" * (MAX_GRAPH_METADATA_BYTES - overhead)}
    assert len(canonical_json(fits)) == MAX_GRAPH_METADATA_BYTES
    assert parse_graph({"metadata": fits, "sources": []}).metadata == fits
    over = {"k": "m" * (MAX_GRAPH_METADATA_BYTES - overhead + 1)}
    with pytest.raises(CacheError) as caught:
        parse_graph({"metadata": over, "sources": []})
    assert (caught.value.status, caught.value.code) == (413, "RENDERING_CACHE_METADATA_TOO_LARGE")


def seed_owners(data_dir: Path, count: int) -> None:
    """An index.json holding ``count`` tombstoned owners (faster than 4,096 separate writes)."""
    owners = {
        f"o{i}": {"generation": 1, "pending": False, "tombstone": True, "graph": None}
        for i in range(count)
    }
    doc = {
        "version": 1,
        "owners": owners,
        "opening": {"generation": 0, "tombstone": False, "content": None},
    }
    folder = data_dir / "rendering-cache"
    folder.mkdir(parents=True)
    (folder / "index.json").write_text(json.dumps(doc))


async def test_4096_owners_fit_and_the_4097th_is_refused(tmp_path: Path) -> None:
    seed_owners(tmp_path, MAX_OWNERS - 1)
    store = await opened(tmp_path)
    assert await store.begin("last") == 1  # the 4,096th owner
    before = state_of(store)
    for attempt in (store.begin, store.delete):
        with pytest.raises(CacheError) as caught:
            await attempt("one-more")
        assert (caught.value.status, caught.value.code) == (409, "RENDERING_CACHE_TOO_MANY_OWNERS")
    with pytest.raises(CacheError):
        await store.import_legacy("one-more", 1, False, None)
    assert state_of(store) == before
    assert "one-more" not in store.owners()
    # Existing owners (tombstones included) keep working.
    assert await store.begin("o0") == 2


async def test_a_16_mib_index_fits_and_one_byte_more_is_refused(tmp_path: Path) -> None:
    store = await opened(tmp_path)
    big = "m" * (MAX_GRAPH_METADATA_BYTES - 100)
    for i in range(7):
        assert await publish(store, f"o{i}", graph_of(k=big))
    # A small graph on "x", then a second generation sized so the index is exactly 16 MiB.
    assert await publish(store, "x", graph_of(k=""))
    small = store.index_path.stat().st_size
    generation = await store.begin("x")
    fill = MAX_INDEX_BYTES - small
    assert fill < MAX_GRAPH_METADATA_BYTES
    assert await store.publish("x", generation, graph_of(k="m" * fill))
    assert store.index_path.stat().st_size == MAX_INDEX_BYTES
    await refused(store, "x", graph_of(k="m" * (fill + 1)), "RENDERING_CACHE_INDEX_TOO_LARGE")
    # "x" stays pending (``true`` is a byte shorter than ``false``): one byte is free again.
    await refused(store, "o0", graph_of(k=big + "mm"), "RENDERING_CACHE_INDEX_TOO_LARGE")
