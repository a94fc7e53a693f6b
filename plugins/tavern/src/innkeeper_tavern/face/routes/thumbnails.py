"""``GET /characters/:id/thumbnail?size=``: a card's avatar scaled down for a grid, as WebP.

The library grid shows hundreds of avatars; the card PNG (``/characters/:id/png``) is the whole
export, often megabytes with its metadata. A thumbnail is made once per avatar digest and size
and served from the disk cache (:mod:`innkeeper_tavern.state.thumbnails`) with an ``ETag``.
"""

from __future__ import annotations

from typing import Final

from aiohttp import web

from innkeeper_hostapi import HttpProblem
from innkeeper_tavern.state.resources import TavernResources
from innkeeper_tavern.state.resources.errors import CHARACTER_NOT_FOUND
from innkeeper_tavern.state.thumbnails import (
    THUMBNAIL_MEDIA_TYPE,
    THUMBNAIL_SIZES,
    ThumbnailCache,
)

from .common import Route, handler, resource_id

#: The size a request without ``?size=`` gets (the grid's card width at 2× pixel density).
DEFAULT_THUMBNAIL_SIZE: Final = 192
AVATAR_SIZE_INVALID: Final = "AVATAR_SIZE_INVALID"


def _size(request: web.Request) -> int:
    raw = request.query.get("size")
    if raw is None:
        return DEFAULT_THUMBNAIL_SIZE
    if raw.isdigit() and int(raw) in THUMBNAIL_SIZES:
        return int(raw)
    sizes = ", ".join(map(str, THUMBNAIL_SIZES))
    raise HttpProblem(400, AVATAR_SIZE_INVALID, f"size must be one of {sizes}")


def routes(res: TavernResources) -> list[Route]:
    """The thumbnail route, its cache under the plugin's data directory."""
    cache = ThumbnailCache(res.root)
    library = res.characters
    max_bytes = library.kind.max_artifact_bytes

    @handler
    async def thumbnail(request: web.Request) -> web.StreamResponse:
        card_id = resource_id(request, CHARACTER_NOT_FOUND, "character")
        size = _size(request)
        if library.entry(card_id) is None:
            cache.forget(card_id)
            raise library.not_found(card_id)
        cover = library.artifact_path(card_id)
        headers = {"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}
        digest = await cache.digest(card_id, cover, max_bytes)
        etag = cache.etag(digest, size)
        if etag in request.headers.get("If-None-Match", ""):
            return web.Response(status=304, headers={**headers, "ETag": etag})
        thumb = await cache.get(card_id, cover, max_bytes, size)
        return web.Response(
            body=thumb.data,
            content_type=THUMBNAIL_MEDIA_TYPE,
            headers={**headers, "ETag": thumb.etag},
        )

    return [Route("GET", "/characters/{id}/thumbnail", thumbnail, "tavern.v1.characters.thumbnail")]
