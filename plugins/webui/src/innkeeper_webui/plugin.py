"""Register the web client's routes: the page at ``/``, its assets, the example cards and the
render route.

Assets are read once at set-up (they ship inside the package) and served with a content hash as
``ETag``, so a reload of the plugin (``innkeeper serve --reload``) serves edited files at once and
a browser revalidates cheaply. Only files listed in the package's ``static`` folder are served;
names are matched by a strict pattern, so no path ever reaches the file system from a request.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from importlib import resources
from typing import Final

import msgspec
from aiohttp import web

from innkeeper_hostapi import PluginContext, hookimpl, json_response, path_params, problem
from innkeeper_hostapi.http import read_struct

from .render import MAX_RENDER_BODY_BYTES, MAX_RENDER_TEXT_CHARS, MAX_RENDER_TEXTS, render_markdown

#: Where the assets are served (the page itself is ``/``).
ASSET_PREFIX: Final = "/webui/"
#: Asset names: lower-case words, one extension the client uses.
ASSET_PATTERN: Final = r"[a-z0-9][a-z0-9-]{0,63}\.(js|css|svg)"

#: Where the example cards are served, and their names.
EXAMPLE_PREFIX: Final = "/webui/examples/"
EXAMPLE_PATTERN: Final = r"[a-z0-9][a-z0-9-]{0,63}\.json"

_MEDIA_TYPES: Final = {
    ".html": "text/html",
    ".js": "text/javascript",
    ".css": "text/css",
    ".svg": "image/svg+xml",
}
# The page may only run its own scripts and talk to its own origin.
_CSP: Final = (
    "default-src 'self'; img-src 'self' data: blob:; style-src 'self'; script-src 'self'; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
)
#: Where the card-script sandbox document is served (docs/webui.md "Card scripts").
SANDBOX_PATH: Final = "/webui/card-sandbox"
#: The inline script of the sandbox document (replaced by card-worker.js + card-sandbox.js).
_SANDBOX_SCRIPT: Final = "<script>/* card-worker.js and card-sandbox.js, inlined by the server */"
# The card-script sandbox: an opaque origin (the CSP ``sandbox`` directive holds even when the
# document is opened on its own), one inline script allowed by its hash, a Worker from a blob
# and nothing else — no request to any origin (connect, images, fonts, forms, frames), inline
# styles for the panel. A blob Worker inherits this policy, so the card code in it cannot reach
# the network either. The scripts are inlined because an opaque origin's requests are
# cross-site, which the host's request guard refuses (docs/http.md "Local-API security").
_SANDBOX_CSP: Final = (
    "sandbox allow-scripts; default-src 'none'; script-src '{digest}'; worker-src blob:; "
    "style-src 'unsafe-inline'; img-src data:; connect-src 'none'; font-src 'none'; "
    "form-action 'none'; base-uri 'none'; frame-ancestors 'self'"
)


@dataclass(frozen=True, slots=True)
class Asset:
    """One static file held in memory."""

    body: bytes
    media_type: str
    etag: str


def load_assets() -> dict[str, Asset]:
    """Read every file of the package's ``static`` folder."""
    assets: dict[str, Asset] = {}
    for entry in resources.files(__package__).joinpath("static").iterdir():
        name = entry.name
        suffix = name[name.rfind(".") :]
        if not entry.is_file() or suffix not in _MEDIA_TYPES:
            continue
        body = entry.read_bytes()
        etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
        assets[name] = Asset(body, _MEDIA_TYPES[suffix], etag)
    return assets


def asset_response(
    request: web.Request, asset: Asset, sandbox_csp: str | None = None
) -> web.Response:
    """The asset, or 304 when the browser's copy is current (an HTML document gets the page's
    Content-Security-Policy, or ``sandbox_csp``)."""
    headers = {
        "ETag": asset.etag,
        "Cache-Control": "no-cache",
        "X-Content-Type-Options": "nosniff",
    }
    if asset.media_type == "text/html":
        headers["Content-Security-Policy"] = sandbox_csp if sandbox_csp else _CSP
        headers["Referrer-Policy"] = "no-referrer" if sandbox_csp else "same-origin"
    if request.headers.get("If-None-Match") == asset.etag:
        return web.Response(status=304, headers=headers)
    response = web.Response(
        body=asset.body, content_type=asset.media_type, charset="utf-8", headers=headers
    )
    response.enable_compression()  # gzip/deflate when the browser accepts it (first-load bytes)
    return response


def build_sandbox(assets: dict[str, Asset]) -> tuple[Asset, str]:
    """The card-script sandbox document with its two scripts inlined, and its policy (the
    script allowed by its SHA-256)."""
    script = assets["card-worker.js"].body + b"\n" + assets["card-sandbox.js"].body
    if b"</script" in script.lower():
        raise ValueError("a sandbox script contains '</script'")  # it would end the element
    template = assets["card-sandbox.html"].body
    if _SANDBOX_SCRIPT.encode() not in template:
        raise ValueError("card-sandbox.html lost its script placeholder")
    body = template.replace(_SANDBOX_SCRIPT.encode(), b"<script>" + script)
    digest = "sha256-" + base64.b64encode(hashlib.sha256(script).digest()).decode()
    etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
    return Asset(body, "text/html", etag), _SANDBOX_CSP.format(digest=digest)


def load_examples() -> dict[str, Asset]:
    """The example cards of the package's ``examples`` folder (JSON cards, CC0; docs/webui.md
    "The example character"): offered from an empty library, imported through the public card
    import route like any file the player picks."""
    examples: dict[str, Asset] = {}
    for entry in resources.files(__package__).joinpath("examples").iterdir():
        if entry.is_file() and entry.name.endswith(".json"):
            body = entry.read_bytes()
            etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
            examples[entry.name] = Asset(body, "application/json", etag)
    return examples


class RenderRequest(msgspec.Struct, forbid_unknown_fields=True):
    """Body of ``POST /webui/api/render``."""

    texts: list[str]


@hookimpl
def innkeeper_plugin_setup(ctx: PluginContext) -> None:
    """Serve the page, the assets and the render route."""
    assets = load_assets()
    examples = load_examples()
    index = assets["index.html"]
    sandbox, sandbox_csp = build_sandbox(assets)

    async def page(request: web.Request) -> web.StreamResponse:
        return asset_response(request, index)

    async def asset(request: web.Request) -> web.StreamResponse:
        found = assets.get(path_params(request)["name"])
        if found is None or found.media_type == "text/html":
            return problem(404, "WEBUI_ASSET_NOT_FOUND", "no such web client asset")
        return asset_response(request, found)

    async def card_sandbox(request: web.Request) -> web.StreamResponse:
        return asset_response(request, sandbox, sandbox_csp)

    async def example(request: web.Request) -> web.StreamResponse:
        found = examples.get(path_params(request)["name"])
        if found is None:
            return problem(404, "WEBUI_EXAMPLE_NOT_FOUND", "no such example card")
        return asset_response(request, found)

    async def render(request: web.Request) -> web.StreamResponse:
        body = await read_struct(request, RenderRequest)
        if len(body.texts) > MAX_RENDER_TEXTS:
            return problem(
                400, "WEBUI_RENDER_TOO_MANY", f"at most {MAX_RENDER_TEXTS} texts per request"
            )
        if any(len(text) > MAX_RENDER_TEXT_CHARS for text in body.texts):
            return problem(
                413, "WEBUI_RENDER_TEXT_TOO_LARGE", f"a text is over {MAX_RENDER_TEXT_CHARS} chars"
            )
        return json_response({"ok": True, "html": [render_markdown(t) for t in body.texts]})

    ctx.add_route("GET", "/", page, name="webui.page")
    ctx.add_route("GET", SANDBOX_PATH, card_sandbox, name="webui.card_sandbox")
    ctx.add_route("GET", ASSET_PREFIX + "{name:" + ASSET_PATTERN + "}", asset, name="webui.asset")
    ctx.add_route(
        "GET", EXAMPLE_PREFIX + "{name:" + EXAMPLE_PATTERN + "}", example, name="webui.example"
    )
    ctx.add_route(
        "POST", "/webui/api/render", render, name="webui.render", max_body=MAX_RENDER_BODY_BYTES
    )
