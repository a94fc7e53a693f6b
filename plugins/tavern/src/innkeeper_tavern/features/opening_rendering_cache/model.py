"""Shapes, limits and input validation of the rendering cache
(`docs/contract/openings.md#rendering-cache`). Everything here is pure: :mod:`.store` owns the
files.

A graph as a client sends it (``PUT /graphs``, ``POST /graphs/import``)::

    {"metadata": {...any JSON object...},
     "sources": [{"url": str, "content": str, "contentDigest"?: str, "downloadedAt": int}]}

``contentDigest`` is the lowercase hex SHA-256 of the UTF-8 bytes of ``content``; when given it
must match. ``downloadedAt`` is milliseconds since the epoch. Unknown fields are refused.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "MAX_GRAPH_METADATA_BYTES",
    "MAX_INDEX_BYTES",
    "MAX_OWNERS",
    "MAX_SOURCES",
    "MAX_SOURCE_BYTES",
    "MAX_TOTAL_BYTES",
    "CacheError",
    "Graph",
    "SourceInput",
    "SourceRef",
    "canonical_json",
    "parse_graph",
    "parse_owner",
    "parse_source",
    "reject_unknown",
]

#: Distinct stored sources (exact URL + digest) in the whole environment, opening included.
MAX_SOURCES: Final = 512
#: Physical bytes of all stored sources together.
MAX_TOTAL_BYTES: Final = 64 * 1024 * 1024
#: UTF-8 bytes of one source.
MAX_SOURCE_BYTES: Final = 8 * 1024 * 1024
#: Owner records (tombstones included).
MAX_OWNERS: Final = 4096
#: Canonical JSON bytes of one graph's ``metadata``.
MAX_GRAPH_METADATA_BYTES: Final = 2 * 1024 * 1024
#: Bytes of ``index.json``.
MAX_INDEX_BYTES: Final = 16 * 1024 * 1024
#: An owner key or a source URL longer than this is refused.
MAX_OWNER_CHARS: Final = 512
MAX_URL_CHARS: Final = 8192


class CacheError(Exception):
    """A refused request: HTTP ``status``, stable ``code`` and a message (no bodies)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class SourceRef:
    """A stored source as the index names it (the bytes are in ``sources/``)."""

    url: str
    digest: str
    size: int
    downloaded_at: int

    @property
    def key(self) -> tuple[str, str]:
        return (self.url, self.digest)

    def to_json(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "digest": self.digest,
            "size": self.size,
            "downloadedAt": self.downloaded_at,
        }

    @staticmethod
    def from_json(raw: Any) -> SourceRef:
        return SourceRef(
            url=str(raw["url"]),
            digest=str(raw["digest"]),
            size=int(raw["size"]),
            downloaded_at=int(raw["downloadedAt"]),
        )


@dataclass(frozen=True, slots=True)
class SourceInput:
    """A source with its text, validated (``ref`` describes exactly ``data``)."""

    ref: SourceRef
    data: bytes


@dataclass(frozen=True, slots=True)
class Graph:
    """A validated graph: metadata plus its sources."""

    metadata: dict[str, Any]
    sources: tuple[SourceInput, ...]


def canonical_json(value: Any) -> bytes:
    """Compact UTF-8 JSON (the size the budgets measure)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def reject_unknown(body: Any, allowed: set[str], what: str) -> dict[str, Any]:
    """``body`` as an object with only ``allowed`` fields (400 otherwise)."""
    if not isinstance(body, dict):
        raise CacheError(400, "RENDERING_CACHE_INVALID_BODY", f"{what} must be a JSON object")
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise CacheError(
            400, "RENDERING_CACHE_UNKNOWN_FIELD", f"{what}: unknown field {unknown[0]!r}"
        )
    return body


def parse_owner(raw: str | None) -> str:
    """The ``owner`` query parameter: a non-empty string of at most 512 characters."""
    if raw is None or raw == "":
        raise CacheError(400, "RENDERING_CACHE_OWNER_REQUIRED", "owner query parameter required")
    if len(raw) > MAX_OWNER_CHARS:
        raise CacheError(400, "RENDERING_CACHE_OWNER_INVALID", "owner is too long")
    return raw


def parse_url(raw: Any) -> str:
    if not isinstance(raw, str) or raw == "" or len(raw) > MAX_URL_CHARS:
        raise CacheError(400, "RENDERING_CACHE_URL_INVALID", "url must be a non-empty string")
    return raw


def parse_generation(raw: Any) -> int:
    if not isinstance(raw, int) or isinstance(raw, bool) or raw < 0:
        raise CacheError(
            400, "RENDERING_CACHE_GENERATION_INVALID", "generation must be a non-negative integer"
        )
    return raw


def parse_source(raw: Any) -> SourceInput:
    """One ``{url, content, contentDigest?, downloadedAt}`` entry."""
    body = reject_unknown(raw, {"url", "content", "contentDigest", "downloadedAt"}, "source")
    url = parse_url(body.get("url"))
    content = body.get("content")
    if not isinstance(content, str):
        raise CacheError(400, "RENDERING_CACHE_SOURCE_INVALID", "source content must be a string")
    try:
        data = content.encode("utf-8")
    except UnicodeEncodeError:
        raise CacheError(400, "RENDERING_CACHE_SOURCE_INVALID", "source is not UTF-8") from None
    if len(data) > MAX_SOURCE_BYTES:
        raise CacheError(
            413, "RENDERING_CACHE_SOURCE_TOO_LARGE", f"a source is over {MAX_SOURCE_BYTES} bytes"
        )
    digest = hashlib.sha256(data).hexdigest()
    claimed = body.get("contentDigest")
    if claimed is not None and claimed != digest:
        raise CacheError(
            400, "RENDERING_CACHE_DIGEST_MISMATCH", "contentDigest is not the content's SHA-256"
        )
    at = body.get("downloadedAt")
    if not isinstance(at, int) or isinstance(at, bool) or at < 0:
        raise CacheError(
            400, "RENDERING_CACHE_SOURCE_INVALID", "downloadedAt must be a non-negative integer"
        )
    return SourceInput(SourceRef(url, digest, len(data), at), data)


def parse_graph(raw: Any) -> Graph:
    """A whole graph (metadata within 2 MiB, sources unique by URL)."""
    body = reject_unknown(raw, {"metadata", "sources"}, "graph")
    metadata = body.get("metadata", {})
    if not isinstance(metadata, dict):
        raise CacheError(400, "RENDERING_CACHE_INVALID_BODY", "graph metadata must be an object")
    if len(canonical_json(metadata)) > MAX_GRAPH_METADATA_BYTES:
        raise CacheError(
            413,
            "RENDERING_CACHE_METADATA_TOO_LARGE",
            f"graph metadata is over {MAX_GRAPH_METADATA_BYTES} bytes",
        )
    raw_sources = body.get("sources", [])
    if not isinstance(raw_sources, list):
        raise CacheError(400, "RENDERING_CACHE_INVALID_BODY", "graph sources must be an array")
    sources = tuple(parse_source(item) for item in raw_sources)
    urls = [s.ref.url for s in sources]
    if len(set(urls)) != len(urls):
        raise CacheError(400, "RENDERING_CACHE_DUPLICATE_SOURCE", "a graph names a URL twice")
    return Graph(metadata, sources)
