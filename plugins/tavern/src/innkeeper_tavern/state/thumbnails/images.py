"""Bounded decoding and resizing of avatar images with Pillow (PNG, JPEG, WebP, GIF).

A stored avatar is untrusted input: a PNG of a few kilobytes can declare 100,000 × 100,000
pixels. The header's size is checked against :data:`MAX_SOURCE_PIXELS` before any pixel is
decoded, and Pillow's own decompression-bomb guard is made an error, not a warning.
"""

from __future__ import annotations

import io
import warnings
from typing import Final

from PIL import Image, ImageOps, UnidentifiedImageError

from innkeeper_tavern.state.resources.errors import ResourceError

#: Widths/heights a thumbnail may be asked for (the longest edge, in pixels): a small fixed set
#: keeps the cache bounded and every client on the same files.
THUMBNAIL_SIZES: Final = (96, 192, 384)
#: Largest source image decoded for a thumbnail (pixels): 6,000 × 6,000 is more than any card
#: avatar needs and about 144 MiB of RGBA at most while it is resized.
MAX_SOURCE_PIXELS: Final = 36_000_000
#: Formats a source may be in.
SOURCE_FORMATS: Final = ("PNG", "JPEG", "WEBP", "GIF")
#: WebP quality of the thumbnails (keeps the alpha channel, far smaller than PNG).
WEBP_QUALITY: Final = 82
THUMBNAIL_MEDIA_TYPE: Final = "image/webp"

AVATAR_TOO_LARGE: Final = "AVATAR_TOO_LARGE"
AVATAR_UNDECODABLE: Final = "AVATAR_UNDECODABLE"


def make_thumbnail(source: bytes, size: int) -> bytes:
    """``source`` scaled to fit ``size`` × ``size`` (aspect kept, never enlarged) as WebP.

    Raises ``ResourceError``: 422 ``AVATAR_TOO_LARGE`` for more than
    :data:`MAX_SOURCE_PIXELS` (or what Pillow deems a decompression bomb), 422
    ``AVATAR_UNDECODABLE`` for bytes that are no image of :data:`SOURCE_FORMATS`.
    """
    if size not in THUMBNAIL_SIZES:
        raise ValueError(f"size must be one of {THUMBNAIL_SIZES}")
    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            with Image.open(io.BytesIO(source), formats=SOURCE_FORMATS) as image:
                width, height = image.size
                if width * height > MAX_SOURCE_PIXELS:
                    raise _too_large(width, height)
                image.seek(0)  # an animated GIF/WebP: its first frame
                frame = ImageOps.exif_transpose(image)
                frame.thumbnail((size, size), Image.Resampling.LANCZOS)
                mode = (
                    "RGBA"
                    if frame.mode in ("RGBA", "LA", "PA") or "transparency" in frame.info
                    else "RGB"
                )
                out = io.BytesIO()
                frame.convert(mode).save(out, "WEBP", quality=WEBP_QUALITY, method=4)
                return out.getvalue()
        except (Image.DecompressionBombError, Image.DecompressionBombWarning):
            raise ResourceError(
                422, AVATAR_TOO_LARGE, "the avatar has too many pixels to decode"
            ) from None
        except (UnidentifiedImageError, OSError, ValueError, SyntaxError, EOFError) as exc:
            raise ResourceError(
                422,
                AVATAR_UNDECODABLE,
                f"the avatar is not a readable image ({type(exc).__name__})",
            ) from None


def _too_large(width: int, height: int) -> ResourceError:
    return ResourceError(
        422,
        AVATAR_TOO_LARGE,
        f"the avatar is {width}×{height} pixels; at most {MAX_SOURCE_PIXELS} are decoded",
    )


#: Formats an uploaded card avatar may be in (`docs/resources.md` "Card avatars").
COVER_FORMATS: Final = ("PNG", "JPEG", "WEBP")
#: A card's picture is 2:3 (width:height), as SillyTavern crops its avatars.
COVER_ASPECT: Final = (2, 3)
#: The largest stored cover: a cropped upload bigger than this is scaled down to it.
MAX_COVER_SIZE: Final = (1024, 1536)


def make_card_cover(source: bytes) -> bytes:
    """An uploaded avatar as a card cover: centre-cropped to 2:3, scaled down to fit
    :data:`MAX_COVER_SIZE` (never enlarged), written as PNG (the card's PNG export carries its
    text chunks in this image).

    Raises ``ResourceError``: 422 ``AVATAR_TOO_LARGE`` as :func:`make_thumbnail`, 422
    ``AVATAR_UNDECODABLE`` for bytes that are no PNG, JPEG or WebP.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            with Image.open(io.BytesIO(source), formats=COVER_FORMATS) as image:
                width, height = image.size
                if width * height > MAX_SOURCE_PIXELS:
                    raise _too_large(width, height)
                image.seek(0)
                frame = ImageOps.exif_transpose(image)
                aw, ah = COVER_ASPECT
                width, height = frame.size
                # The largest 2:3 box inside the image, centred.
                crop_w, crop_h = min(width, height * aw // ah), min(height, width * ah // aw)
                left, top = (width - crop_w) // 2, (height - crop_h) // 2
                frame = frame.crop((left, top, left + max(1, crop_w), top + max(1, crop_h)))
                frame.thumbnail(MAX_COVER_SIZE, Image.Resampling.LANCZOS)
                mode = (
                    "RGBA"
                    if frame.mode in ("RGBA", "LA", "PA") or "transparency" in frame.info
                    else "RGB"
                )
                out = io.BytesIO()
                frame.convert(mode).save(out, "PNG", optimize=False)
                return out.getvalue()
        except (Image.DecompressionBombError, Image.DecompressionBombWarning):
            raise ResourceError(
                422, AVATAR_TOO_LARGE, "the avatar has too many pixels to decode"
            ) from None
        except (UnidentifiedImageError, OSError, ValueError, SyntaxError, EOFError) as exc:
            raise ResourceError(
                422,
                AVATAR_UNDECODABLE,
                f"the avatar is not a readable PNG, JPEG or WebP image ({type(exc).__name__})",
            ) from None
