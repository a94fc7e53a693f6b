"""Avatar thumbnails: bounded decoding with Pillow and a disk cache keyed by source digest."""

from .cache import MAX_CACHE_BYTES, THUMBNAILS_DIR, Thumbnail, ThumbnailCache
from .images import (
    AVATAR_TOO_LARGE,
    AVATAR_UNDECODABLE,
    MAX_SOURCE_PIXELS,
    THUMBNAIL_MEDIA_TYPE,
    THUMBNAIL_SIZES,
    make_thumbnail,
)

__all__ = [
    "AVATAR_TOO_LARGE",
    "AVATAR_UNDECODABLE",
    "MAX_CACHE_BYTES",
    "MAX_SOURCE_PIXELS",
    "THUMBNAILS_DIR",
    "THUMBNAIL_MEDIA_TYPE",
    "THUMBNAIL_SIZES",
    "Thumbnail",
    "ThumbnailCache",
    "make_thumbnail",
]
