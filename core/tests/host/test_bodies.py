"""Issue 19: one body path for every route, strict Host, cross-site reads, query ranges.

Every bad body answers a 4xx with a stable code before the handler runs; nothing reaches a
handler as an exception type that would be a 500.
"""

from __future__ import annotations

import io
from typing import Any

import pytest

from innkeeper_core.http.security import parse_host
from innkeeper_hostapi.testing import RunningHost


@pytest.fixture
async def hello(innkeeper_host: RunningHost) -> RunningHost:
    await innkeeper_host.load("hello", "innkeeper_hello")
    return innkeeper_host


async def post_raw(
    host: RunningHost, path: str, data: bytes, content_type: str = "application/json"
) -> tuple[int, Any]:
    resp = await host.client.post(
        path, data=io.BytesIO(data), headers={"Origin": host.origin, "Content-Type": content_type}
    )
    return resp.status, await resp.json()


BAD_JSON: list[tuple[bytes, int, str]] = [
    (b'{"title":"\xff"}', 400, "INVALID_JSON"),
    (b"[" * 10_000 + b"]" * 10_000, 400, "STRUCTURE_TOO_DEEP"),
    (b"[" * 600 + b"]" * 600, 400, "STRUCTURE_TOO_DEEP"),
    (b'{"title": ' + b"[" * 40 + b"]" * 40 + b"}", 400, "STRUCTURE_TOO_DEEP"),
    (b'{"title": 1' + b"0" * 400 + b"}", 400, "NUMBER_OUT_OF_RANGE"),
    (b'{"title": 1e400}', 400, "INVALID_JSON"),
    (b'{"title": "x"', 400, "INVALID_JSON"),
    (b'{"' + b"k" * 2000 + b'": 1}', 400, "STRUCTURE_KEY_TOO_LONG"),
]


#: The hello route takes at most 4 KiB; the session route 64 KiB.
CASES = [("/host/api/sessions", *case) for case in BAD_JSON] + [
    ("/hello/greetings", *case) for case in BAD_JSON if len(case[0]) <= 4096
]


@pytest.mark.parametrize(("path", "data", "status", "code"), CASES)
async def test_bad_json_bodies_are_4xx_with_stable_codes(
    hello: RunningHost, path: str, data: bytes, status: int, code: str
) -> None:
    before = await hello.client.get("/host/api/sessions")
    got_status, body = await post_raw(hello, path, data)
    assert (got_status, body["ok"], body["code"]) == (status, False, code)
    assert isinstance(body["error"], str) and body["error"]
    after = await hello.client.get("/host/api/sessions")
    assert (await after.json())["sessions"] == (await before.json())["sessions"]


async def test_too_many_nodes_or_a_huge_string_is_413(hello: RunningHost) -> None:
    _, created = await post_raw(hello, "/host/api/sessions", b"{}")
    prompt = f"/host/api/sessions/{created['session']['id']}/prompt"
    status, body = await post_raw(hello, prompt, b"[" + b"0," * 100_001 + b"0]")
    assert (status, body["code"]) == (413, "STRUCTURE_TOO_MANY_NODES")
    status, body = await post_raw(hello, prompt, b'{"text": "' + b"x" * (1 << 21) + b'"}')
    assert (status, body["code"]) == (413, "STRUCTURE_STRING_TOO_LARGE")
    history = await hello.client.get(f"{prompt.removesuffix('/prompt')}/history")
    assert (await history.json())["events"] == []  # no prompt was accepted


async def test_a_good_body_still_works_and_bom_is_skipped(hello: RunningHost) -> None:
    status, body = await post_raw(hello, "/hello/greetings", b'\xef\xbb\xbf{"name": "Ada"}')
    assert (status, body["greeting"]) == (200, "Hello, Ada!")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("localhost", ("localhost", None)),
        ("127.0.0.1:8787", ("127.0.0.1", 8787)),
        ("[::1]:8787", ("::1", 8787)),
        ("[::1]", ("::1", None)),
        ("LOCALHOST:1", ("localhost", 1)),
        ("[::1]evil.com", None),
        ("127.0.0.1:8787 evil", None),
        ("127.0.0.1:8787evil", None),
        ("::1", None),
        ("[zz::1]", None),
        ("localhost:99999", None),
        ("", None),
        ("local host", None),
        ("localhost:", None),
    ],
)
def test_host_header_is_parsed_exactly(value: str, expected: tuple[str, int | None] | None) -> None:
    assert parse_host(value) == expected


@pytest.mark.parametrize("host", ["[::1]evil.com", "127.0.0.1:8787 evil", "localhost.evil"])
async def test_host_with_trailing_junk_is_refused(hello: RunningHost, host: str) -> None:
    resp = await hello.client.get("/healthz", headers={"Host": host})
    assert (resp.status, (await resp.json())["code"]) == (403, "HOST_NOT_ALLOWED")
    resp = await hello.client.post(
        "/hello/greetings",
        json={"name": "Ada"},
        headers={"Host": host, "Origin": f"http://{host}"},
    )
    assert (resp.status, (await resp.json())["code"]) == (403, "HOST_NOT_ALLOWED")


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "http://evil.example"},
        {"Origin": "null"},
        {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "cors"},
    ],
)
async def test_cross_site_reads_are_refused(hello: RunningHost, headers: dict[str, str]) -> None:
    resp = await hello.client.get("/host/api/sessions", headers=headers)
    assert (resp.status, (await resp.json())["code"]) == (403, "ORIGIN_FORBIDDEN")


async def test_same_origin_and_navigation_reads_are_served(hello: RunningHost) -> None:
    resp = await hello.client.get("/host/api/sessions", headers={"Origin": hello.origin})
    assert resp.status == 200
    navigation = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}
    resp = await hello.client.get("/healthz", headers=navigation)
    assert resp.status == 200


@pytest.mark.parametrize("cursor", ["99999999999999999999999", "9223372036854775808", "²"])
async def test_session_list_cursor_out_of_range_is_400(hello: RunningHost, cursor: str) -> None:
    resp = await hello.client.get("/host/api/sessions", params={"cursor": cursor})
    assert (resp.status, (await resp.json())["code"]) == (400, "INVALID_ARGUMENT")


async def test_history_query_out_of_range_is_400(hello: RunningHost) -> None:
    _status, body = await post_raw(hello, "/host/api/sessions", b"{}")
    sid = body["session"]["id"]
    resp = await hello.client.get(
        f"/host/api/sessions/{sid}/history", params={"beforeSeq": "9" * 30}
    )
    assert (resp.status, (await resp.json())["code"]) == (400, "INVALID_ARGUMENT")
