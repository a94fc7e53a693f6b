"""Route-table-driven body fuzzing (issue 19): every mutating route, every class of bad body.

The routes come from the running host's route table, so a route added by any plugin is covered
without touching this file. ``test_every_route_refuses_every_class`` sends one example of each
class to every route (coverage is guaranteed); the hypothesis tests then draw routes and bodies
at random (``st.sampled_from`` over the same table).
"""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from innkeeper_core.http.routes import RouteEntry

from .conftest import Harness, fuzz_settings

JSON = "application/json"
MULTIPART = "multipart/form-data"
#: Field names the routes read, so random objects sometimes reach deep validation.
FIELDS = (
    "name",
    "title",
    "text",
    "mode",
    "content",
    "id",
    "sessionId",
    "scope",
    "regexScripts",
    "worldBookIds",
    "characterBook",
    "entries",
    "book",
    "strategy",
    "strategyId",
    "atEventId",
    "rootPath",
    "selection",
    "presetId",
    "characterId",
    "userId",
    "expectedRevision",
    "operationId",
    "path",
    "order",
    "data",
    "spec",
    "spec_version",
    "workspaceId",
)

keys = st.sampled_from(FIELDS) | st.text(max_size=12)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63) + 1, max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=24)
)
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(keys, children, max_size=6),
    max_leaves=24,
)


def _encode(value: Any) -> bytes:
    return msgspec.json.encode(value)


def _deep(depth: int, as_object: bool) -> bytes:
    if as_object:
        return b'{"a":' * depth + b"1" + b"}" * depth
    return b"[" * depth + b"]" * depth


def _multipart(boundary: str, body: bytes) -> tuple[bytes, str]:
    return body, f"{MULTIPART}; boundary={boundary}"


def _bad_bodies(entry: RouteEntry) -> list[tuple[str, bytes, str]]:
    """One example of every class: (class, body, content type)."""
    cases = [
        ("invalid-utf8", b'{"name":"\xff\xfe"}', JSON),
        ("deep-array", _deep(10_000, False), JSON),
        ("deep-object", _deep(600, True), JSON),
        ("depth-40", b'{"name":' + _deep(40, False) + b"}", JSON),
        ("huge-int", b'{"name": 1' + b"0" * 309 + b"}", JSON),
        ("float-overflow", b'{"name": 1e400}', JSON),
        ("nan-literal", b'{"name": NaN}', JSON),
        ("truncated", b'{"name": "x', JSON),
        ("trailing-garbage", b'{"name": "x"} x', JSON),
        ("long-key", b'{"' + b"k" * 2000 + b'": 1}', JSON),
        ("random-bytes", bytes(range(256)), JSON),
        ("wrong-media-type", b'{"name": "x"}', "text/plain"),
        ("bad-boundary", *_multipart("€", "--€\r\n\r\nx\r\n--€--\r\n".encode())),
        (
            "no-closing-delimiter",
            *_multipart(
                "b",
                b'--b\r\nContent-Disposition: form-data; name="file"; filename="c.json"\r\n\r\n{}',
            ),
        ),
    ]
    if entry.max_body < (48 << 20):
        cases.append(("oversize", b" " * (entry.max_body + 1), JSON))
    return cases


def test_every_route_refuses_every_class(harness: Harness) -> None:
    assert len(harness.routes) >= 30, "the route table should hold the whole host"
    for entry in harness.routes:
        for what, body, content_type in _bad_bodies(entry):
            harness.refused_without_change(entry, body, content_type, what=what)


def _everywhere(harness: Harness, body: bytes, what: str, content_type: str = JSON) -> None:
    """Send one drawn bad body to every mutating route (hypothesis's cost is paid once)."""
    for entry in harness.routes:
        if content_type in entry.accepts and content_type != JSON:
            continue  # a file body for an importer: test_fuzz_png covers PNG cards
        harness.refused_without_change(entry, body, content_type, what=what)


@fuzz_settings(30)
@given(value=json_values, junk=st.binary(min_size=1, max_size=8), at=st.integers(0, 10**6))
def test_invalid_utf8_anywhere(harness: Harness, value: Any, junk: bytes, at: int) -> None:
    body = bytearray(_encode({"name": "é", "v": value}))
    # Inside the "é" string (still JSON syntax, not UTF-8) or anywhere; 0xff is never UTF-8.
    place = body.index(b'"\xc3\xa9"') + 1 if at % 2 else at % (len(body) + 1)
    body[place:place] = junk + b"\xff"
    _everywhere(harness, bytes(body), "invalid-utf8")


@fuzz_settings(20)
@given(depth=st.integers(33, 20_000), as_object=st.booleans(), wrap=st.booleans())
def test_deep_nesting(harness: Harness, depth: int, as_object: bool, wrap: bool) -> None:
    body = _deep(depth, as_object)
    if wrap:
        body = b'{"name": "x", "content": ' + body + b"}"
    _everywhere(harness, body, f"depth-{depth}")


@fuzz_settings(20)
@given(digits=st.integers(20, 5000), negative=st.booleans(), field=st.sampled_from(FIELDS))
def test_integers_out_of_range(harness: Harness, digits: int, negative: bool, field: str) -> None:
    number = ("-" if negative else "") + "9" * digits
    body = f'{{"{field}": {number}, "entries": [{{"uid": {number}, "order": {number}}}]}}'
    _everywhere(harness, body.encode(), "huge-int")


@fuzz_settings(40)
@given(
    value=json_values,
    kind=st.sampled_from(["truncate", "garbage", "bytes"]),
    cut=st.integers(1, 10**6),
    garbage=st.sampled_from([b" x", b"}", b",", b"]", b"\x00", b" {}", b"//", b"\xef\xbb\xbf"]),
    noise=st.binary(min_size=1, max_size=512),
)
def test_broken_json(
    harness: Harness, value: Any, kind: str, cut: int, garbage: bytes, noise: bytes
) -> None:
    body = _encode({"name": "x", "v": value})
    if kind == "truncate":
        body = body[: 1 + cut % (len(body) - 1)]
    elif kind == "garbage":
        body += garbage
    else:
        body = noise
    if _is_json(body):
        return
    _everywhere(harness, body, f"broken-json-{kind}")


def _is_json(body: bytes) -> bool:
    try:
        msgspec.json.decode(body)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        return False
    return True


@fuzz_settings(20)
@given(
    media=st.sampled_from(
        [
            "text/plain",
            "application/xml",
            "image/png",
            "application/x-www-form-urlencoded",
            MULTIPART,
        ]
    ),
    boundary=st.text(st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=80),
    payload=st.binary(min_size=1, max_size=256),
)
def test_media_types_and_multipart(
    harness: Harness, media: str, boundary: str, payload: bytes
) -> None:
    content_type = media
    if media == MULTIPART:
        # Boundaries outside RFC 2046 (non-Latin-1, too long, quotes) or a body that never
        # closes: 400 on multipart routes, 415 elsewhere.
        content_type = f"{MULTIPART}; boundary={boundary}" if boundary.strip() else MULTIPART
        payload = b"--" + boundary.encode("utf-8") + b"\r\n\r\n" + payload
        for entry in harness.routes:
            harness.refused_without_change(entry, payload, content_type, what="multipart")
        return
    _everywhere(harness, payload, f"media-{media}", media)


@fuzz_settings(50)
@given(value=json_values)
def test_random_structures_with_real_ids(harness: Harness, value: Any) -> None:
    for entry in harness.routes:
        if entry.method == "DELETE":
            continue  # a valid DELETE would remove the seeded resource; the next test covers it
        harness.unchanged_unless_accepted(entry, _encode(value), what="random-structure")


@fuzz_settings(20)
@given(value=json_values)
def test_random_structures_with_unknown_ids(harness: Harness, value: Any) -> None:
    for entry in harness.routes:
        harness.unchanged_unless_accepted(
            entry, _encode(value), what="random-structure", real_ids=False
        )
