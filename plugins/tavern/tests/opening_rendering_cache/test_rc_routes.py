"""The /v1/rendering-cache routes over a running host: owner generations, pending/publish CAS,
tombstones, legacy import, sources by exact URL, the fixed opening snapshot, and bad input that
answers a stable code and changes nothing."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path
from typing import Any

from tavern_harness import V1

from innkeeper_tavern.features.opening_books.manifest import load_manifest

RC = "/rendering-cache"
OPENING_TEXT = (
    "// Innkeeper rendering-cache test opening snapshot (inert text; never evaluated).\n"
    "export const opening = 'test';\n"
)
OPENING_URL = "https://innkeeper.invalid/rendering-cache/opening-test.js"


def src(url: str, content: str, at: int = 1) -> dict[str, Any]:
    return {"url": url, "content": content, "downloadedAt": at}


def graph(*sources: dict[str, Any], **metadata: Any) -> dict[str, Any]:
    return {"metadata": metadata, "sources": list(sources)}


async def publish(tavern: Any, owner: str, g: dict[str, Any]) -> int:
    gen = (await tavern.v1("POST", f"{RC}/graphs?owner={owner}", {}))["value"]
    out = await tavern.v1("PUT", f"{RC}/graphs?owner={owner}", {"generation": gen, "graph": g})
    assert out["value"] is True
    return int(gen)


def source_files(cache_root: Path) -> list[str]:
    folder = cache_root / "sources"
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


async def test_the_shipped_manifest_registers_the_test_snapshot() -> None:
    data = OPENING_TEXT.encode()
    assert load_manifest().accepts(OPENING_URL, hashlib.sha256(data).hexdigest(), len(data))


async def test_owner_generations_pending_publish_and_tombstone(
    tavern: Any, cache_root: Path
) -> None:
    owner = "card%3A1"
    empty = await tavern.v1("GET", f"{RC}/graphs?owner={owner}")
    assert empty == {"ok": True, "value": {"generation": 0}}
    gen = (await tavern.v1("POST", f"{RC}/graphs?owner={owner}", {}))["value"]
    assert gen == 1
    pending = (await tavern.v1("GET", f"{RC}/graphs?owner={owner}"))["value"]
    assert pending == {"generation": 1, "pending": True}
    # A stale generation never publishes.
    stale = await tavern.v1("PUT", f"{RC}/graphs?owner={owner}", {"generation": 0, "graph": {}})
    assert stale["value"] is False
    g = graph(src("https://a.example/x.js", "let x = 1;"), entry="x.js")
    ok = await tavern.v1("PUT", f"{RC}/graphs?owner={owner}", {"generation": 1, "graph": g})
    assert ok["value"] is True
    again = await tavern.v1("PUT", f"{RC}/graphs?owner={owner}", {"generation": 1, "graph": g})
    assert again["value"] is False  # no longer pending
    digest = hashlib.sha256(b"let x = 1;").hexdigest()
    stored = (await tavern.v1("GET", f"{RC}/graphs?owner={owner}"))["value"]
    assert stored == {
        "generation": 1,
        "graph": {
            "metadata": {"entry": "x.js"},
            "sources": [
                {
                    "url": "https://a.example/x.js",
                    "content": "let x = 1;",
                    "contentDigest": digest,
                    "downloadedAt": 1,
                }
            ],
        },
    }
    # A new pending generation keeps the previous references until it publishes.
    assert (await tavern.v1("POST", f"{RC}/graphs?owner={owner}", {}))["value"] == 2
    kept = (await tavern.v1("GET", f"{RC}/graphs?owner={owner}"))["value"]
    assert kept["pending"] is True and kept["graph"]["sources"][0]["content"] == "let x = 1;"
    g2 = graph(src("https://a.example/y.js", "let y = 2;"))
    assert (await tavern.v1("PUT", f"{RC}/graphs?owner={owner}", {"generation": 2, "graph": g2}))[
        "value"
    ] is True
    # The obsolete x.js bytes are collected after publication.
    assert len(source_files(cache_root)) == 1
    # DELETE releases the references and keeps a newer tombstone generation.
    assert (await tavern.v1("DELETE", f"{RC}/graphs?owner={owner}"))["value"] == 3
    assert (await tavern.v1("GET", f"{RC}/graphs?owner={owner}"))["value"] == {"generation": 3}
    assert source_files(cache_root) == []
    # A tombstone is a Host record: a legacy import never overwrites it.
    imp = await tavern.v1(
        "POST", f"{RC}/graphs/import?owner={owner}", {"generation": 9, "graph": g}
    )
    assert imp["value"] is False


async def test_list_returns_each_source_once_and_metadata_only(tavern: Any) -> None:
    shared = src("https://a.example/lib.js", "export default 1;", at=5)
    await publish(tavern, "one", graph(shared, n=1))
    await publish(tavern, "two", graph(shared, src("https://a.example/two.js", "2"), n=2))
    full = (await tavern.v1("GET", f"{RC}/graphs"))["value"]
    assert set(full["graphs"]) == {"one", "two"}
    assert sorted(s["url"] for s in full["sources"]) == [
        "https://a.example/lib.js",
        "https://a.example/two.js",
    ]
    assert full["graphs"]["one"]["graph"]["metadata"] == {"n": 1}
    assert "content" not in full["graphs"]["one"]["graph"]["sources"][0]
    meta = (await tavern.v1("GET", f"{RC}/graphs?metadata=1"))["value"]
    assert set(meta) == {"graphs"} and meta["graphs"] == full["graphs"]


async def test_sources_by_exact_url_newest_version(tavern: Any) -> None:
    await publish(tavern, "old", graph(src("https://a.example/s.js", "old", at=10)))
    await publish(tavern, "new", graph(src("https://a.example/s.js", "new", at=20)))
    value = (await tavern.v1("GET", f"{RC}/sources?url=https://a.example/s.js"))["value"]
    assert value == {
        "content": "new",
        "contentDigest": hashlib.sha256(b"new").hexdigest(),
        "downloadedAt": 20,
    }
    miss = await tavern.v1("GET", f"{RC}/sources?url=https://a.example/s.js?v=2")
    assert miss["value"] is None
    none = await tavern.v1("GET", f"{RC}/sources", status=400)
    assert none["code"] == "RENDERING_CACHE_URL_INVALID"


async def test_legacy_import_only_without_a_host_record(tavern: Any) -> None:
    g = graph(src("https://a.example/l.js", "legacy"), legacy=True)
    body = {"generation": 7, "pending": False, "graph": g}
    assert (await tavern.v1("POST", f"{RC}/graphs/import?owner=l", body))["value"] is True
    stored = (await tavern.v1("GET", f"{RC}/graphs?owner=l"))["value"]
    assert stored["generation"] == 7 and stored["graph"]["metadata"] == {"legacy": True}
    again = {"generation": 8, "graph": graph()}
    assert (await tavern.v1("POST", f"{RC}/graphs/import?owner=l", again))["value"] is False
    assert (await tavern.v1("GET", f"{RC}/graphs?owner=l"))["value"] == stored


async def test_opening_snapshot_registered_only(tavern: Any, cache_root: Path) -> None:
    assert (await tavern.v1("GET", f"{RC}/opening"))["value"] == {"generation": 0, "content": None}
    bad = {"content": src(OPENING_URL, OPENING_TEXT + " ")}
    refused = await tavern.v1("PUT", f"{RC}/opening", bad, status=400)
    assert refused["code"] == "RENDERING_CACHE_OPENING_UNREGISTERED"
    other = {"content": src("https://a.example/o.js", OPENING_TEXT)}
    refused = await tavern.v1("PUT", f"{RC}/opening", other, status=400)
    assert refused["code"] == "RENDERING_CACHE_OPENING_UNREGISTERED"
    assert source_files(cache_root) == []
    good = {"content": src(OPENING_URL, OPENING_TEXT, at=3)}
    assert (await tavern.v1("PUT", f"{RC}/opening", good))["value"] is True
    value = (await tavern.v1("GET", f"{RC}/opening"))["value"]
    assert value["generation"] == 1 and value["content"]["content"] == OPENING_TEXT
    # Create-only legacy import: refused once content exists, and after a tombstone.
    create_only = {**good, "onlyMissing": True}
    assert (await tavern.v1("PUT", f"{RC}/opening", create_only))["value"] is False
    assert (await tavern.v1("DELETE", f"{RC}/opening"))["value"] == 2
    assert (await tavern.v1("GET", f"{RC}/opening"))["value"] == {"generation": 2, "content": None}
    assert (await tavern.v1("PUT", f"{RC}/opening", create_only))["value"] is False
    assert source_files(cache_root) == []


async def snapshot(tavern: Any, cache_root: Path) -> tuple[Any, Any, bytes]:
    index = cache_root / "index.json"
    return (
        await tavern.v1("GET", f"{RC}/graphs"),
        await tavern.v1("GET", f"{RC}/opening"),
        index.read_bytes(),
    )


async def test_bad_input_answers_a_stable_code_and_changes_nothing(
    tavern: Any, cache_root: Path
) -> None:
    await publish(tavern, "o", graph(src("https://a.example/a.js", "a")))
    assert (await tavern.v1("POST", f"{RC}/graphs?owner=o", {}))["value"] == 2
    before = await snapshot(tavern, cache_root)
    ok_source = src("https://a.example/b.js", "b")
    cases: list[tuple[str, str, Any, int, str]] = [
        ("POST", "/graphs", {}, 400, "RENDERING_CACHE_OWNER_REQUIRED"),
        ("POST", "/graphs?owner=" + "x" * 600, {}, 400, "RENDERING_CACHE_OWNER_INVALID"),
        ("POST", "/graphs?owner=o", {"extra": 1}, 400, "RENDERING_CACHE_UNKNOWN_FIELD"),
        ("POST", "/graphs?owner=o", [], 400, "RENDERING_CACHE_INVALID_BODY"),
        ("PUT", "/graphs?owner=o", {"generation": 2}, 400, "RENDERING_CACHE_INVALID_BODY"),
        (
            "PUT",
            "/graphs?owner=o",
            {"generation": 2, "graph": {}, "x": 1},
            400,
            "RENDERING_CACHE_UNKNOWN_FIELD",
        ),
        (
            "PUT",
            "/graphs?owner=o",
            {"generation": "2", "graph": {}},
            400,
            "RENDERING_CACHE_GENERATION_INVALID",
        ),
        (
            "PUT",
            "/graphs?owner=o",
            {"generation": 2, "graph": {"metadata": {}, "edges": []}},
            400,
            "RENDERING_CACHE_UNKNOWN_FIELD",
        ),
        (
            "PUT",
            "/graphs?owner=o",
            {"generation": 2, "graph": graph({**ok_source, "size": 1})},
            400,
            "RENDERING_CACHE_UNKNOWN_FIELD",
        ),
        (
            "PUT",
            "/graphs?owner=o",
            {"generation": 2, "graph": graph({**ok_source, "contentDigest": "0" * 64})},
            400,
            "RENDERING_CACHE_DIGEST_MISMATCH",
        ),
        (
            "PUT",
            "/graphs?owner=o",
            {"generation": 2, "graph": graph(ok_source, ok_source)},
            400,
            "RENDERING_CACHE_DUPLICATE_SOURCE",
        ),
        (
            "PUT",
            "/graphs?owner=o",
            {"generation": 2, "graph": graph({**ok_source, "downloadedAt": -1})},
            400,
            "RENDERING_CACHE_SOURCE_INVALID",
        ),
        (
            "PUT",
            "/graphs?owner=o",
            {"generation": 2, "graph": graph({**ok_source, "url": ""})},
            400,
            "RENDERING_CACHE_URL_INVALID",
        ),
        (
            "POST",
            "/graphs/import?owner=new",
            {"generation": 1, "pending": "yes"},
            400,
            "RENDERING_CACHE_INVALID_BODY",
        ),
        (
            "POST",
            "/graphs/import?owner=new",
            {"generation": 1, "tombstone": True},
            400,
            "RENDERING_CACHE_UNKNOWN_FIELD",
        ),
        (
            "PUT",
            "/opening",
            {"content": src(OPENING_URL, OPENING_TEXT), "force": True},
            400,
            "RENDERING_CACHE_UNKNOWN_FIELD",
        ),
        (
            "PUT",
            "/opening",
            {"content": src(OPENING_URL, OPENING_TEXT), "onlyMissing": 1},
            400,
            "RENDERING_CACHE_INVALID_BODY",
        ),
    ]
    for method, path, body, status, code in cases:
        out = await tavern.v1(method, RC + path, body, status=status)
        assert out["code"] == code, (method, path, out)
        assert await snapshot(tavern, cache_root) == before, (method, path)


async def send_large(tavern: Any, method: str, path: str, body: Any, status: int) -> Any:
    """A large JSON body streamed from a buffer (aiohttp warns on big raw bytes)."""
    headers = {"Origin": tavern.host.origin, "Content-Type": "application/json"}
    data = io.BytesIO(json.dumps(body).encode())
    resp = await tavern.host.client.request(method, V1 + path, data=data, headers=headers)
    payload = await resp.json()
    assert resp.status == status, payload
    return payload


async def test_oversized_bodies_answer_413_and_change_nothing(
    tavern: Any, cache_root: Path
) -> None:
    await publish(tavern, "o", graph(src("https://a.example/a.js", "a")))
    assert (await tavern.v1("POST", f"{RC}/graphs?owner=o", {}))["value"] == 2
    before = await snapshot(tavern, cache_root)
    big_meta = graph(blob="m" * (2 * 1024 * 1024))
    out = await send_large(
        tavern, "PUT", f"{RC}/graphs?owner=o", {"generation": 2, "graph": big_meta}, 413
    )
    assert out["code"] == "RENDERING_CACHE_METADATA_TOO_LARGE"
    big_source = graph(src("https://a.example/big.js", "s" * (8 * 1024 * 1024 + 1)))
    out = await send_large(
        tavern, "PUT", f"{RC}/graphs?owner=o", {"generation": 2, "graph": big_source}, 413
    )
    assert out["code"] == "RENDERING_CACHE_SOURCE_TOO_LARGE"
    # Past the route's body cap the host refuses before the handler runs.
    out = await tavern.v1("POST", f"{RC}/graphs?owner=o", {"pad": "p" * 2048}, status=413)
    assert out["code"]
    huge = {"content": src(OPENING_URL, "o" * (10 * 1024 * 1024))}
    out = await send_large(tavern, "PUT", f"{RC}/opening", huge, 413)
    assert out["code"]
    assert await snapshot(tavern, cache_root) == before


async def test_a_tampered_source_fails_verification_on_read(tavern: Any, cache_root: Path) -> None:
    await publish(tavern, "o", graph(src("https://a.example/a.js", "original")))
    folder = cache_root / "sources"
    (path,) = folder.iterdir()
    path.write_text("tampered")
    out = await tavern.v1("GET", f"{RC}/graphs?owner=o", status=500)
    assert out["code"] == "RENDERING_CACHE_SOURCE_CORRUPT"
    out = await tavern.v1("GET", f"{RC}/sources?url=https://a.example/a.js", status=500)
    assert out["code"] == "RENDERING_CACHE_SOURCE_CORRUPT"
    # Metadata stays readable without touching the bytes.
    meta = await tavern.v1("GET", f"{RC}/graphs?metadata=1")
    assert meta["value"]["graphs"]["o"]["generation"] == 1


async def test_a_reload_keeps_graphs_opening_and_pending_generations(tavern: Any) -> None:
    await publish(tavern, "kept", graph(src("https://a.example/k.js", "kept"), n=1))
    assert (await tavern.v1("POST", f"{RC}/graphs?owner=kept", {}))["value"] == 2
    good = {"content": src(OPENING_URL, OPENING_TEXT, at=3)}
    assert (await tavern.v1("PUT", f"{RC}/opening", good))["value"] is True
    before = (await tavern.v1("GET", f"{RC}/graphs"), await tavern.v1("GET", f"{RC}/opening"))
    await tavern.host.reload("tavern")
    after = (await tavern.v1("GET", f"{RC}/graphs"), await tavern.v1("GET", f"{RC}/opening"))
    assert after == before
    # The pending generation survived: it still publishes exactly once.
    body = {"generation": 2, "graph": graph(n=2)}
    assert (await tavern.v1("PUT", f"{RC}/graphs?owner=kept", body))["value"] is True
    assert (await tavern.v1("PUT", f"{RC}/graphs?owner=kept", body))["value"] is False
    await tavern.host.unload("tavern")
    resp = await tavern.host.client.get(V1 + RC + "/opening")
    assert resp.status == 404  # the routes go with the plugin
