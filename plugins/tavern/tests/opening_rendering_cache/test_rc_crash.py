"""A process killed with SIGKILL between writing a source's bytes and writing index.json leaves
no index entry that points at missing bytes; the next open collects the orphaned files. A failed
write changes nothing; damaged bytes are rewritten when their source is published again."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import textwrap
from pathlib import Path

import pytest

from innkeeper_tavern.features.opening_rendering_cache import store as store_module
from innkeeper_tavern.features.opening_rendering_cache.model import CacheError, Graph, parse_graph
from innkeeper_tavern.features.opening_rendering_cache.store import (
    RenderingCacheStore,
    source_file_name,
)

WRITER = textwrap.dedent(
    """
    import asyncio, logging, sys, time
    from pathlib import Path
    from innkeeper_tavern.features.opening_rendering_cache import store as store_module
    from innkeeper_tavern.features.opening_rendering_cache.model import parse_graph

    mode = sys.argv[2]
    real_write = store_module.atomic_write

    def stalling_write(path, data):
        if path.name != "index.json":
            stalling_write.sources_written = True
        elif mode == "stall" and stalling_write.armed and stalling_write.sources_written:
            print("between", flush=True)  # the new source bytes are on disk, the index is not
            time.sleep(600)
        else:
            stalling_write.sources_written = False
        real_write(path, data)

    stalling_write.sources_written = False

    stalling_write.armed = False
    store_module.atomic_write = stalling_write

    def graph(i):
        sources = [{"url": f"https://c.example/{i}/{j}.js", "content": f"{i}:{j}" * 2000,
                    "downloadedAt": i} for j in range(4)]
        return parse_graph({"metadata": {"i": i}, "sources": sources})

    async def main():
        store = store_module.RenderingCacheStore(Path(sys.argv[1]), logger=logging.getLogger())
        await store.open()
        i = 0
        while True:
            owner = f"o{i % 3}"
            await store.publish(owner, await store.begin(owner), graph(i))
            i += 1
            if i == 3:
                stalling_write.armed = True
                print("running", flush=True)

    asyncio.run(main())
    """
)


async def run_and_kill(data_dir: Path, mode: str, wait_for: str, delay: float) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", WRITER, str(data_dir), mode, stdout=asyncio.subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        line = b""
        while line.decode().strip() != wait_for:
            line = await asyncio.wait_for(proc.stdout.readline(), 60)
            assert line, "the writer exited early"
        await asyncio.sleep(delay)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        await asyncio.wait_for(proc.wait(), timeout=30)
    assert proc.returncode == -signal.SIGKILL


async def assert_consistent(data_dir: Path) -> RenderingCacheStore:
    store = RenderingCacheStore(data_dir, logger=logging.getLogger("test"))
    await store.open()
    referenced = set()
    for record in store.owners().values():
        for ref in record.sources:
            referenced.add(source_file_name(ref))
            text = await store.read(ref)  # present, right size, right SHA-256
            assert text.startswith(f"{record.metadata and record.metadata['i']}:")
    # Orphans from the killed write are collected at open.
    assert {p.name for p in store.sources_dir.iterdir()} == referenced
    return store


@pytest.mark.slow
async def test_sigkill_between_source_write_and_index_write(tmp_path: Path) -> None:
    await run_and_kill(tmp_path, "stall", "between", 0.0)
    sources = tmp_path / "rendering-cache" / "sources"
    on_disk = {p.name for p in sources.iterdir()}
    store = await assert_consistent(tmp_path)
    # The stalled publication's bytes were written, but no index entry names them.
    assert len(on_disk) > len(list(store.sources_dir.iterdir()))
    assert sorted(r.metadata["i"] for r in store.owners().values() if r.metadata) == [0, 1, 2]


@pytest.mark.slow
@pytest.mark.parametrize("delay", [0.01, 0.05, 0.2])
async def test_sigkill_at_any_moment_leaves_a_consistent_index(
    tmp_path: Path, delay: float
) -> None:
    await run_and_kill(tmp_path, "loop", "running", delay)
    store = await assert_consistent(tmp_path)
    assert len(store.owners()) == 3


def small_graph(text: str) -> Graph:
    source = {"url": "https://c.example/a.js", "content": text, "downloadedAt": 1}
    return parse_graph({"metadata": {}, "sources": [source]})


async def test_a_failed_write_answers_a_code_and_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = RenderingCacheStore(tmp_path, logger=logging.getLogger("test"))
    await store.open()
    assert await store.publish("o", await store.begin("o"), small_graph("one"))
    generation = await store.begin("o")
    before = store.index_path.read_bytes()

    def failing(path: Path, data: bytes) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(store_module, "atomic_write", failing)
    with pytest.raises(CacheError) as caught:
        await store.publish("o", generation, small_graph("two"))
    assert (caught.value.status, caught.value.code) == (500, "RENDERING_CACHE_WRITE_FAILED")
    assert store.index_path.read_bytes() == before
    assert store.owner("o").pending
    async with store.reading():
        assert await store.read(store.owner("o").sources[0]) == "one"


async def test_a_damaged_file_is_rewritten_when_its_source_is_published_again(
    tmp_path: Path,
) -> None:
    store = RenderingCacheStore(tmp_path, logger=logging.getLogger("test"))
    await store.open()
    assert await store.publish("o", await store.begin("o"), small_graph("same"))
    (path,) = store.sources_dir.iterdir()
    path.write_text("ruin")  # same size, other bytes
    assert await store.publish("p", await store.begin("p"), small_graph("same"))
    async with store.reading():
        assert await store.read(store.owner("o").sources[0]) == "same"
