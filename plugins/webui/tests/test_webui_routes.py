"""The web client's routes: the page at ``/``, its assets and the Markdown render route."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from innkeeper_hostapi.testing import RunningHost
from innkeeper_webui.render import MAX_RENDER_TEXTS, render_markdown

PLUGIN = "innkeeper_webui.plugin"


@pytest.fixture
async def host(innkeeper_host: RunningHost) -> RunningHost:
    await innkeeper_host.load("webui", PLUGIN)
    return innkeeper_host


async def render(host: RunningHost, body: Any) -> tuple[int, Any]:
    resp = await host.client.post("/webui/api/render", json=body, headers={"Origin": host.origin})
    return resp.status, await resp.json()


async def test_page_is_served_at_root_with_a_strict_policy(host: RunningHost) -> None:
    resp = await host.client.get("/")
    assert resp.status == 200
    assert resp.content_type == "text/html"
    text = await resp.text()
    assert '<script type="module" src="/webui/app.js"></script>' in text
    policy = resp.headers["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "unsafe" not in policy


async def test_every_module_the_page_imports_is_served(host: RunningHost) -> None:
    seen: set[str] = set()
    todo = ["app.js"]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        resp = await host.client.get("/webui/" + name)
        assert resp.status == 200, name
        assert resp.content_type == "text/javascript"
        todo += re.findall(r"from '\./([a-z-]+\.js)'", await resp.text())
    assert {"api.js", "core.js", "chat.js", "library.js", "why.js"} <= seen


async def test_assets_revalidate_with_their_etag(host: RunningHost) -> None:
    first = await host.client.get("/webui/app.css")
    assert first.status == 200 and first.content_type == "text/css"
    again = await host.client.get(
        "/webui/app.css", headers={"If-None-Match": first.headers["ETag"]}
    )
    assert again.status == 304


@pytest.mark.parametrize(
    "path", ["/webui/nope.js", "/webui/index.html", "/webui/..%2Fplugin.py", "/webui/plugin.py"]
)
async def test_unknown_or_unsafe_asset_names_are_404(host: RunningHost, path: str) -> None:
    resp = await host.client.get(path)
    assert resp.status == 404


async def test_render_sanitizes_and_marks_speech(host: RunningHost) -> None:
    status, body = await render(
        host,
        {
            "texts": [
                '*She smiles.* "Hello," she says. <script>alert(1)</script>',
                "<img src=x onerror=alert(1)>",
            ]
        },
    )
    assert status == 200
    first, second = body["html"]
    assert "<em>She smiles.</em>" in first
    assert '<span class="quote">"Hello,"</span>' in first
    assert "<script" not in first and "alert" not in first
    assert "onerror" not in second and '<img src="x">' in second


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"texts": ["x"] * (MAX_RENDER_TEXTS + 1)}, "WEBUI_RENDER_TOO_MANY"),
        ({"texts": "not a list"}, "INVALID_BODY"),
        ({"texts": [], "extra": 1}, "INVALID_BODY"),
    ],
)
async def test_render_refuses_bad_bodies(host: RunningHost, body: Any, code: str) -> None:
    status, answer = await render(host, body)
    assert status == 400
    assert answer["code"] == code and answer["ok"] is False


async def test_render_needs_same_origin(host: RunningHost) -> None:
    resp = await host.client.post("/webui/api/render", json={"texts": []})
    assert resp.status == 403


async def test_unloading_leaves_no_route(
    innkeeper_host: RunningHost, leak_check: Callable[[], Any]
) -> None:
    async with leak_check():
        await innkeeper_host.load("webui", PLUGIN)
        assert (await innkeeper_host.client.get("/")).status == 200
        await innkeeper_host.unload("webui")
    assert (await innkeeper_host.client.get("/")).status == 404


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('`"code"`', '<code>"code"</code>'),  # quotes in code are not speech
        ("「你好」", '<span class="quote">「你好」</span>'),
        ("[x](javascript:alert(1))", "javascript:alert(1))"),  # never a link
        ('<a href="https://example.org">a</a>', 'rel="noopener noreferrer"'),
        ("line one\nline two", "line one<br>"),
    ],
)
def test_render_markdown_cases(text: str, expected: str) -> None:
    assert expected in render_markdown(text)


async def test_the_example_card_is_served_openly_licensed_with_a_small_world_book(
    host: RunningHost,
) -> None:
    resp = await host.client.get("/webui/examples/example-character.json")
    assert resp.status == 200 and resp.content_type == "application/json"
    card = (await resp.json())["data"]
    assert card["name"] and card["first_mes"] and "CC0" in card["creator_notes"]
    entries = card["character_book"]["entries"]
    assert 3 <= len(entries) <= 5 and all(e["keys"] and e["content"] for e in entries)
    again = await host.client.get(
        "/webui/examples/example-character.json", headers={"If-None-Match": resp.headers["ETag"]}
    )
    assert again.status == 304
    missing = await host.client.get("/webui/examples/nothing.json")
    assert (missing.status, (await missing.json())["code"]) == (404, "WEBUI_EXAMPLE_NOT_FOUND")
    assert (await host.client.get("/webui/examples/../plugin.py")).status == 404


async def test_card_sandbox_is_an_opaque_origin_without_network(host: RunningHost) -> None:
    """The card-script sandbox (docs/webui.md "Card scripts"): sandboxed by its own policy, one
    inline script allowed by its hash, a blob Worker, and no request to any origin."""
    import base64
    import hashlib

    resp = await host.client.get("/webui/card-sandbox")
    assert resp.status == 200 and resp.content_type == "text/html"
    text = await resp.text()
    policy = {}
    for part in resp.headers["Content-Security-Policy"].split("; "):
        name, _, value = part.partition(" ")
        policy[name] = value
    assert policy["sandbox"] == "allow-scripts"  # no allow-same-origin: an opaque origin
    assert policy["default-src"] == policy["connect-src"] == "'none'"
    assert policy["worker-src"] == "blob:" and policy["img-src"] == "data:"
    assert policy["frame-ancestors"] == "'self'"
    # The one script the policy allows is the inlined worker API + sandbox host, by its hash.
    script = re.search(r"<script>(.*?)</script>", text, re.S)
    assert script is not None and "function innkeeperCardWorker" in script.group(1)
    digest = base64.b64encode(hashlib.sha256(script.group(1).encode()).digest()).decode()
    assert policy["script-src"] == f"'sha256-{digest}'"
    assert "src=" not in text  # nothing is loaded: the host refuses an opaque origin's requests
    # The sandbox document is not an asset, and the page's own policy is unchanged.
    assert (await host.client.get("/webui/card-sandbox.html")).status == 404
    page = await host.client.get("/")
    assert "sandbox" not in page.headers["Content-Security-Policy"]


@pytest.mark.parametrize("name", ["example-status-bar.json", "example-inventory.json"])
async def test_example_cards_carry_their_card_scripts(host: RunningHost, name: str) -> None:
    resp = await host.client.get("/webui/examples/" + name)
    assert resp.status == 200
    card = await resp.json()
    scripts = card["data"]["extensions"]["tavern_helper"]["scripts"]
    assert len(scripts) == 1 and scripts[0]["enabled"] is True
    assert "Mvu.getMvuData" in scripts[0]["content"]
    assert "[initvar]" in card["data"]["character_book"]["entries"][0]["comment"]
