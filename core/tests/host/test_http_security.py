"""The local-API rules (docs/contract/security.md#local-api): peer, Host, Origin/token, media
type, body size."""

from __future__ import annotations

from typing import Any

import pytest

from innkeeper_hostapi.testing import RunningHost

TOKEN_PATH = "/pmp-dsh-tavern/api/request-token"


@pytest.fixture
async def hello(innkeeper_host: RunningHost) -> RunningHost:
    await innkeeper_host.load("hello", "innkeeper_hello")
    return innkeeper_host


async def post(host: RunningHost, headers: dict[str, str], **kwargs: Any) -> tuple[int, Any]:
    resp = await host.client.post("/hello/greetings", headers=headers, **kwargs)
    return resp.status, await resp.json()


async def test_same_origin_mutation_is_accepted(hello: RunningHost) -> None:
    status, body = await post(hello, {"Origin": hello.origin}, json={"name": "Ada"})
    assert (status, body["greeting"]) == (200, "Hello, Ada!")


@pytest.mark.parametrize("origin", ["http://evil.example", "null", "http://127.0.0.1:1"])
async def test_foreign_origin_mutation_is_forbidden(hello: RunningHost, origin: str) -> None:
    status, body = await post(hello, {"Origin": origin}, json={"name": "Ada"})
    assert (status, body["ok"], body["code"]) == (403, False, "ORIGIN_FORBIDDEN")


async def test_cross_site_fetch_is_forbidden(hello: RunningHost) -> None:
    status, body = await post(
        hello, {"Origin": hello.origin, "Sec-Fetch-Site": "cross-site"}, json={"name": "A"}
    )
    assert (status, body["code"]) == (403, "ORIGIN_FORBIDDEN")


async def test_mutation_without_origin_or_token_is_forbidden(hello: RunningHost) -> None:
    status, body = await post(hello, {}, json={"name": "Ada"})
    assert (status, body["code"]) == (403, "ORIGIN_REQUIRED")


async def test_wrong_host_header_is_rejected(hello: RunningHost) -> None:
    resp = await hello.client.get("/hello/Ada", headers={"Host": "attacker.example:8787"})
    assert resp.status == 403
    assert (await resp.json())["code"] == "HOST_NOT_ALLOWED"
    resp = await hello.client.get("/hello/Ada", headers={"Host": "localhost:9"})
    assert resp.status == 200


async def test_json_route_given_text_plain_is_415(hello: RunningHost) -> None:
    status, body = await post(
        hello,
        {"Origin": hello.origin, "Content-Type": "text/plain"},
        data=b'{"name": "Ada"}',
    )
    assert (status, body["code"]) == (415, "UNSUPPORTED_MEDIA_TYPE")


async def test_oversized_body_is_413(hello: RunningHost) -> None:
    status, body = await post(hello, {"Origin": hello.origin}, json={"name": "x" * 5000})
    assert (status, body["code"]) == (413, "BODY_TOO_LARGE")


async def test_oversized_chunked_body_is_413(hello: RunningHost) -> None:
    async def chunks() -> Any:
        yield b'{"name": "'
        for _ in range(10):
            yield b"x" * 1000
        yield b'"}'

    status, body = await post(
        hello,
        {"Origin": hello.origin, "Content-Type": "application/json"},
        data=chunks(),
    )
    assert (status, body["code"]) == (413, "BODY_TOO_LARGE")


async def test_invalid_body_is_400_with_code(hello: RunningHost) -> None:
    status, body = await post(hello, {"Origin": hello.origin}, json={"nom": "Ada"})
    assert (status, body["code"]) == (400, "INVALID_BODY")
    status, body = await post(
        hello, {"Origin": hello.origin, "Content-Type": "application/json"}, data=b"{nope"
    )
    assert (status, body["code"]) == (400, "INVALID_JSON")


async def test_request_token_flow(hello: RunningHost) -> None:
    resp = await hello.client.get(TOKEN_PATH)
    assert resp.status == 403
    assert (await resp.json())["code"] == "REQUEST_TOKEN_CLIENT_REQUIRED"

    resp = await hello.client.get(
        TOKEN_PATH, headers={"X-Tavern-Client": "embedded", "Origin": "null"}
    )
    assert resp.status == 403

    resp = await hello.client.get(TOKEN_PATH, headers={"X-Tavern-Client": "embedded"})
    assert resp.status == 200
    assert resp.headers["Cache-Control"] == "no-store"
    assert "Access-Control-Allow-Origin" not in resp.headers
    token = (await resp.json())["token"]
    assert len(token) == 64 and int(token, 16) >= 0

    status, body = await post(hello, {"X-Tavern-Request-Token": token}, json={"name": "Ada"})
    assert status == 200
    status, body = await post(hello, {"X-Tavern-Request-Token": "0" * 64}, json={"name": "A"})
    assert (status, body["code"]) == (403, "REQUEST_TOKEN_INVALID")
    # The token never excuses a foreign Origin.
    status, body = await post(
        hello, {"X-Tavern-Request-Token": token, "Origin": "http://evil.example"}, json={}
    )
    assert (status, body["code"]) == (403, "ORIGIN_FORBIDDEN")


async def test_unknown_path_and_wrong_method(hello: RunningHost) -> None:
    resp = await hello.client.get("/nope")
    assert resp.status == 404
    assert await resp.json() == {"ok": False, "error": "no route for /nope", "code": "NOT_FOUND"}
    resp = await hello.client.delete("/hello/greetings", headers={"Origin": hello.origin})
    assert resp.status == 405
    assert resp.headers["Allow"] == "GET, HEAD, POST"  # GET is /hello/{name}
    resp = await hello.client.put("/hello/Ada", headers={"Origin": hello.origin})
    assert resp.headers["Allow"] == "GET, HEAD"


async def test_healthz_and_plugin_listing(hello: RunningHost) -> None:
    health = await (await hello.client.get("/healthz")).json()
    assert health["ok"] is True and isinstance(health["pid"], int)
    listing = await (await hello.client.get("/host/api/plugins")).json()
    (row,) = listing["plugins"]
    assert row["name"] == "hello"
    assert row["state"] == "active"
    assert row["version"] == "0.1.0"
    assert row["registered"] == {
        "routes": ["GET /hello/{name}", "POST /hello/greetings"],
        "services": ["hello.greeter"],
        "listeners": ["hello/greeted"],
    }
