"""Timeline ``ext.pmpDshTavern.appearance``: typed, bounded, stored byte for byte."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from play_harness import Play

PATH = "t/timeline.json"


def timeline(appearance: Any) -> str:
    return json.dumps({"nodes": [], "ext": {"pmpDshTavern": {"appearance": appearance}}})


async def test_valid_appearance_round_trips_byte_for_byte(play: Play) -> None:
    await play.bind()
    # Odd spacing and 1.10 (not normalized to 1.1) prove the stored bytes are the sent bytes.
    content = (
        '{"nodes":[],"ext":{"pmpDshTavern":{"appearance":{"schemaVersion":1,'
        '"textScale":1.10,  "actionScale":0.75,"bubbleStyle":{"radius":12,"tail":true,'
        '"accent":"#c0a080"},"interactiveCards":false}}}}\n'
    )
    done = await play.write(PATH, content, expectedRevision=None)
    assert done["revision"] == hashlib.sha256(content.encode()).hexdigest()
    assert (play.root / PATH).read_bytes() == content.encode()
    assert (await play.read(PATH))["content"] == content
    await play.write(PATH, timeline({}), expectedRevision=done["revision"])


INVALID: list[Any] = [
    [],
    "dark",
    None,
    {"theme": "dark"},
    {"schemaVersion": 2},
    {"textScale": 0.7},
    {"textScale": 1.52},
    {"actionScale": 1.03},
    {"actionScale": "1"},
    {"textScale": True},
    {"interactiveCards": "yes"},
    {"bubbleStyle": []},
    {"bubbleStyle": {"1bad": 1}},
    {"bubbleStyle": {"nested": {"a": 1}}},
    {"bubbleStyle": {"s": "x" * 513}},
    {"bubbleStyle": {"s": "a\nb"}},
    {"bubbleStyle": {f"k{i}": i for i in range(65)}},
    {"bubbleStyle": {f"k{i}": "x" * 300 for i in range(60)}},
]


@pytest.mark.parametrize("appearance", INVALID)
async def test_invalid_appearance_is_refused_and_file_unchanged(
    play: Play, appearance: Any
) -> None:
    await play.bind()
    original = timeline({"textScale": 1.0})
    done = await play.write(PATH, original, expectedRevision=None)
    status, body = await play.raw(
        "PUT",
        f"/workspace/files?path={PATH}",
        {"content": timeline(appearance), "expectedRevision": done["revision"]},
    )
    assert (status, body["code"]) == (400, "PLAY_APPEARANCE_INVALID"), body
    assert (play.root / PATH).read_text() == original
