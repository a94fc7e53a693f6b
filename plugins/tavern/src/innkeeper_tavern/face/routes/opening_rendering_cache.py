"""Rendering cache storage (`docs/contract/openings.md#rendering-cache`): inert storage for the
bundled renderer's dependency graphs, their source texts and the fixed opening snapshot, under
``/pmp-dsh-tavern/api/v1/rendering-cache``. It never downloads URLs or evaluates anything.

:func:`install_rendering_cache` opens the store (:mod:`.store`) and registers the routes;
docs/rendering-cache.md documents the shapes and codes.
"""

from __future__ import annotations

from typing import Any, Final

from aiohttp import web

from innkeeper_hostapi import HttpProblem, PluginContext, json_response, read_json
from innkeeper_hostapi.structure import StructureLimits
from innkeeper_tavern.features.opening_books.manifest import Manifest, load_manifest
from innkeeper_tavern.features.opening_rendering_cache.model import (
    MAX_GRAPH_METADATA_BYTES,
    MAX_SOURCE_BYTES,
    MAX_TOTAL_BYTES,
    CacheError,
    SourceRef,
    parse_generation,
    parse_graph,
    parse_owner,
    parse_source,
    reject_unknown,
)
from innkeeper_tavern.features.opening_rendering_cache.store import OwnerRecord, RenderingCacheStore
from innkeeper_tavern.pure.api_paths import V1_PREFIX

__all__ = ["RenderingCacheStore", "install_rendering_cache"]

PREFIX: Final = V1_PREFIX + "/rendering-cache"
#: A graph body: every source at most once up to the 64 MiB budget, its metadata, JSON escapes.
GRAPH_MAX_BODY: Final = MAX_TOTAL_BYTES + MAX_GRAPH_METADATA_BYTES + 8 * 1024 * 1024
#: The opening body: one source.
OPENING_MAX_BODY: Final = MAX_SOURCE_BYTES + 1024 * 1024
#: ``POST /graphs`` and other small bodies.
SMALL_MAX_BODY: Final = 1024
#: Source strings may reach the per-source cap (the model answers its own code above it).
GRAPH_JSON_LIMITS: Final = StructureLimits(max_string_bytes=MAX_SOURCE_BYTES + 1024 * 1024)


def _problem(exc: CacheError) -> HttpProblem:
    return HttpProblem(exc.status, exc.code, exc.message)


def _ok(value: Any) -> web.Response:
    return json_response({"ok": True, "value": value})


async def _hydrate(store: RenderingCacheStore, ref: SourceRef) -> dict[str, Any]:
    return {
        "url": ref.url,
        "content": await store.read(ref),
        "contentDigest": ref.digest,
        "downloadedAt": ref.downloaded_at,
    }


def _record_json(record: OwnerRecord, graph: dict[str, Any] | None) -> dict[str, Any]:
    out: dict[str, Any] = {"generation": record.generation}
    if record.pending:
        out["pending"] = True
    if graph is not None:
        out["graph"] = graph
    return out


def _ref_json(ref: SourceRef) -> dict[str, Any]:
    return {"url": ref.url, "contentDigest": ref.digest, "downloadedAt": ref.downloaded_at}


async def install_rendering_cache(
    ctx: PluginContext, manifest: Manifest | None = None
) -> RenderingCacheStore:
    """Open ``<plugin data>/rendering-cache/`` and register its routes (through ``ctx``).
    ``PUT /opening`` accepts the snapshots of ``manifest`` (the opening manifest shared with the
    opening world books; default: the shipped one)."""
    store = RenderingCacheStore(ctx.data_dir, logger=ctx.logger)
    await store.open()
    accepted = manifest if manifest is not None else load_manifest()

    async def list_graphs(request: web.Request) -> web.StreamResponse:
        owner = request.query.get("owner")
        async with store.reading():
            if owner is not None:
                return await get_owner(parse_owner(owner))
            return await list_all(request.query.get("metadata") == "1")

    async def list_all(metadata_only: bool) -> web.StreamResponse:
        graphs: dict[str, Any] = {}
        unique: dict[tuple[str, str], SourceRef] = {}
        for name, record in store.owners().items():
            graph = None
            if record.metadata is not None:
                graph = {
                    "metadata": record.metadata,
                    "sources": [_ref_json(s) for s in record.sources],
                }
                for ref in record.sources:
                    unique.setdefault(ref.key, ref)
            graphs[name] = _record_json(record, graph)
        if metadata_only:
            return _ok({"graphs": graphs})
        sources = [await _hydrate(store, ref) for ref in unique.values()]
        return _ok({"graphs": graphs, "sources": sources})

    async def get_owner(owner: str) -> web.StreamResponse:
        record = store.owner(owner)
        graph = None
        if record.metadata is not None:
            sources = [await _hydrate(store, ref) for ref in record.sources]
            graph = {"metadata": record.metadata, "sources": sources}
        return _ok(_record_json(record, graph))

    async def begin(request: web.Request) -> web.StreamResponse:
        owner = parse_owner(request.query.get("owner"))
        reject_unknown(await read_json(request), set(), "body")
        return _ok(await store.begin(owner))

    async def publish(request: web.Request) -> web.StreamResponse:
        owner = parse_owner(request.query.get("owner"))
        body = reject_unknown(await read_json(request), {"generation", "graph"}, "body")
        generation = parse_generation(body.get("generation"))
        graph = parse_graph(body.get("graph"))
        return _ok(await store.publish(owner, generation, graph))

    async def delete(request: web.Request) -> web.StreamResponse:
        return _ok(await store.delete(parse_owner(request.query.get("owner"))))

    async def import_legacy(request: web.Request) -> web.StreamResponse:
        owner = parse_owner(request.query.get("owner"))
        body = reject_unknown(await read_json(request), {"generation", "pending", "graph"}, "body")
        generation = parse_generation(body.get("generation"))
        pending = body.get("pending", False)
        if not isinstance(pending, bool):
            raise CacheError(400, "RENDERING_CACHE_INVALID_BODY", "pending must be a boolean")
        raw_graph = body.get("graph")
        graph = parse_graph(raw_graph) if raw_graph is not None else None
        return _ok(await store.import_legacy(owner, generation, pending, graph))

    async def get_source(request: web.Request) -> web.StreamResponse:
        url = request.query.get("url")
        if not url:
            raise CacheError(400, "RENDERING_CACHE_URL_INVALID", "url query parameter required")
        async with store.reading():
            ref = store.newest(url)
            if ref is None:
                return _ok(None)
            hydrated = await _hydrate(store, ref)
        del hydrated["url"]
        return _ok(hydrated)

    async def get_opening(request: web.Request) -> web.StreamResponse:
        async with store.reading():
            opening = store.opening
            content = await _hydrate(store, opening.content) if opening.content else None
        return _ok({"generation": opening.generation, "content": content})

    async def put_opening(request: web.Request) -> web.StreamResponse:
        body = reject_unknown(await read_json(request), {"content", "onlyMissing"}, "body")
        only_missing = body.get("onlyMissing", False)
        if not isinstance(only_missing, bool):
            raise CacheError(400, "RENDERING_CACHE_INVALID_BODY", "onlyMissing must be a boolean")
        source = parse_source(body.get("content"))
        ref = source.ref
        if not accepted.accepts(ref.url, ref.digest, ref.size):
            raise CacheError(
                400,
                "RENDERING_CACHE_OPENING_UNREGISTERED",
                "the opening snapshot's URL, SHA-256 and size match no manifest entry",
            )
        return _ok(await store.put_opening(source, only_missing=only_missing))

    async def delete_opening(request: web.Request) -> web.StreamResponse:
        return _ok(await store.delete_opening())

    def guarded(handler: Any) -> Any:
        async def run(request: web.Request) -> web.StreamResponse:
            try:
                return await handler(request)  # type: ignore[no-any-return]
            except CacheError as exc:
                raise _problem(exc) from None

        return run

    graphs = f"{PREFIX}/graphs"
    routes: list[tuple[str, str, Any, str, int | None]] = [
        ("GET", graphs, list_graphs, "graphs.get", None),
        ("POST", graphs, begin, "graphs.begin", SMALL_MAX_BODY),
        ("PUT", graphs, publish, "graphs.publish", GRAPH_MAX_BODY),
        ("DELETE", graphs, delete, "graphs.delete", None),
        ("POST", f"{graphs}/import", import_legacy, "graphs.import", GRAPH_MAX_BODY),
        ("GET", f"{PREFIX}/sources", get_source, "sources.get", None),
        ("GET", f"{PREFIX}/opening", get_opening, "opening.get", None),
        ("PUT", f"{PREFIX}/opening", put_opening, "opening.put", OPENING_MAX_BODY),
        ("DELETE", f"{PREFIX}/opening", delete_opening, "opening.delete", None),
    ]
    for method, path, handler, name, max_body in routes:
        ctx.add_route(
            method,
            path,
            guarded(handler),
            name=f"tavern.rendering-cache.{name}",
            max_body=max_body,
            json_limits=GRAPH_JSON_LIMITS if max_body and max_body > SMALL_MAX_BODY else None,
        )
    return store
