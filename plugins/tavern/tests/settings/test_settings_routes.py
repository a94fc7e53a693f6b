"""``/v1/ui-settings`` and ``/v1/conversation-settings`` over real HTTP: bounds, steps, full
replace, unknown fields, DELETE, and that a rejected write leaves the file unchanged."""

from __future__ import annotations

import json
from typing import Any

import pytest

from innkeeper_core.testing import start_test_host

UI = "/ui-settings"
CONV = "/conversation-settings"
UI_OK = {"locale": "zh-CN", "scale": 1.25, "rpFollowCharacter": False}
CONV_OK = {"textScale": 1.1, "actionScale": 0.8}
OWNER = "card-1"
SHA = "a" * 64


async def test_ui_settings_defaults_save_reset(tavern: Any) -> None:
    got = await tavern.v1("GET", UI)
    assert got == {
        "ok": True,
        "settings": {"schemaVersion": 1, "locale": "en", "scale": 1.0, "rpFollowCharacter": True},
        "custom": False,
    }
    assert not (tavern.root / "ui-settings.json").exists()  # a GET writes nothing
    saved = await tavern.v1("PUT", UI, UI_OK)
    assert saved["settings"] == {"schemaVersion": 1, **UI_OK} and saved["custom"] is True
    assert (await tavern.v1("GET", UI))["settings"]["locale"] == "zh-CN"
    on_disk = json.loads((tavern.root / "ui-settings.json").read_text())
    assert on_disk["scale"] == 1.25
    # Omitted rpFollowCharacter is the default (true), not the previous value: a full replace.
    again = await tavern.v1("PUT", UI, {"locale": "en", "scale": 1})
    assert again["settings"]["rpFollowCharacter"] is True
    reset = await tavern.v1("DELETE", UI)
    assert reset["settings"]["locale"] == "en" and reset["custom"] is False
    assert not (tavern.root / "ui-settings.json").exists()


@pytest.mark.parametrize(
    "body",
    [
        {"locale": "fr", "scale": 1},
        {"locale": "zh", "scale": 1},
        {"locale": "en", "scale": 0.7},
        {"locale": "en", "scale": 0.7499},
        {"locale": "en", "scale": 1.55},
        {"locale": "en", "scale": 1.5001},
        {"locale": "en", "scale": 1.02},
        {"locale": "en", "scale": 0.875},
        {"locale": "en", "scale": True},
        {"locale": "en", "scale": "1"},
        {"locale": "en", "scale": 1, "rpFollowCharacter": "yes"},
        {"locale": "en", "scale": 1, "theme": "dark"},
        {"locale": "en", "scale": 1, "schemaVersion": 2},
        {"locale": "en"},
        {"scale": 1},
        ["en"],
    ],
)
async def test_ui_settings_rejects_and_keeps_file(tavern: Any, body: Any) -> None:
    await tavern.v1("PUT", UI, UI_OK)
    before = (tavern.root / "ui-settings.json").read_bytes()
    refused = await tavern.v1("PUT", UI, body, 400)
    assert refused["code"] == "UI_SETTINGS_INVALID" and refused["ok"] is False
    assert (tavern.root / "ui-settings.json").read_bytes() == before
    assert (await tavern.v1("GET", UI))["settings"]["locale"] == "zh-CN"


async def test_every_grid_step_is_accepted(tavern: Any) -> None:
    for step in range(15, 31):  # 0.75, 0.80, …, 1.50
        value = step * 0.05  # binary float noise (e.g. 0.8500000000000001) is tolerated
        got = await tavern.v1("PUT", UI, {"locale": "en", "scale": value})
        assert got["settings"]["scale"] == round(step / 20, 2)
        conv = await tavern.v1("PUT", CONV, {"textScale": value, "actionScale": 1.5})
        assert conv["settings"]["textScale"] == round(step / 20, 2)


async def test_conversation_settings_full_document(tavern: Any) -> None:
    assert (await tavern.v1("GET", CONV))["settings"] == {
        "schemaVersion": 1,
        "textScale": 1.0,
        "actionScale": 1.0,
    }
    full = {
        **CONV_OK,
        "bubbleStyle": {"shape": "rounded", "opacity": 0.9, "shadow": False},
        "interactiveCards": True,
        "scriptEnablement": {
            "schemaVersion": 1,
            "entries": [
                {"owner": OWNER, "key": "id:status-bar", "enabled": False},
                {"owner": OWNER, "key": f"sha256:{SHA}", "enabled": True},
                {"owner": "b" * 64, "key": f"sha256-name:{SHA}", "enabled": True},
            ],
        },
        "renderingAdapters": {
            "entries": [{"owner": OWNER, "source": "https://cdn.example/mvu.js", "mode": "builtin"}]
        },
    }
    saved = await tavern.v1("PUT", CONV, full)
    assert saved["settings"]["scriptEnablement"]["entries"][0]["key"] == "id:status-bar"
    assert saved["settings"]["renderingAdapters"]["schemaVersion"] == 1
    assert (await tavern.v1("GET", CONV))["settings"] == saved["settings"]
    # Full replace: omitting the optional fields restores their defaults (absent).
    plain = await tavern.v1("PUT", CONV, CONV_OK)
    assert set(plain["settings"]) == {"schemaVersion", "textScale", "actionScale"}
    await tavern.v1("PUT", CONV, full)
    reset = await tavern.v1("DELETE", CONV)
    assert reset["settings"] == {"schemaVersion": 1, "textScale": 1.0, "actionScale": 1.0}
    assert not (tavern.root / "conversation-settings.json").exists()


def _entries(n: int, *, kind: str) -> dict[str, Any]:
    if kind == "script":
        return {"entries": [{"owner": OWNER, "key": f"id:s{i}", "enabled": True} for i in range(n)]}
    return {
        "entries": [
            {"owner": OWNER, "source": f"https://x.example/{i}.js", "mode": "original"}
            for i in range(n)
        ]
    }


async def test_override_entry_caps(tavern: Any) -> None:
    ok = {**CONV_OK, "scriptEnablement": _entries(128, kind="script")}
    ok["renderingAdapters"] = _entries(128, kind="adapter")
    await tavern.v1("PUT", CONV, ok)
    for field, kind in (("scriptEnablement", "script"), ("renderingAdapters", "adapter")):
        body = {**CONV_OK, field: _entries(129, kind=kind)}
        refused = await tavern.v1("PUT", CONV, body, 400)
        assert refused["code"] == "CONVERSATION_SETTINGS_INVALID"
        assert "128" in refused["error"]


def _script(**entry: Any) -> dict[str, Any]:
    base = {"owner": OWNER, "key": "id:a", "enabled": True}
    return {**CONV_OK, "scriptEnablement": {"entries": [{**base, **entry}]}}


def _adapter(**entry: Any) -> dict[str, Any]:
    base = {"owner": OWNER, "source": "https://x.example/a.js", "mode": "builtin"}
    return {**CONV_OK, "renderingAdapters": {"entries": [{**base, **entry}]}}


@pytest.mark.parametrize(
    "body",
    [
        {"textScale": 0.7, "actionScale": 1},
        {"textScale": 1, "actionScale": 1.55},
        {"textScale": 1.01, "actionScale": 1},
        {"textScale": 1, "actionScale": 1.125},
        {"textScale": 1},
        {"actionScale": 1},
        {**CONV_OK, "fontFamily": "serif"},
        {**CONV_OK, "schemaVersion": 2},
        {**CONV_OK, "interactiveCards": "true"},
        {**CONV_OK, "bubbleStyle": "rounded"},
        {**CONV_OK, "bubbleStyle": {"1bad": "x"}},
        {**CONV_OK, "bubbleStyle": {"shape": "x" * 513}},
        {**CONV_OK, "bubbleStyle": {"shape": "a\nb"}},
        {**CONV_OK, "bubbleStyle": {"shape": {"nested": 1}}},
        {**CONV_OK, "bubbleStyle": {f"k{i}": 1 for i in range(65)}},
        {**CONV_OK, "scriptEnablement": {"entries": {}}},
        {**CONV_OK, "scriptEnablement": {"entries": [], "extra": 1}},
        _script(owner="../etc"),
        _script(owner=""),
        _script(key="status-bar"),
        _script(key="sha256:" + "A" * 64),
        _script(key="sha256:abc"),
        _script(enabled=1),
        _script(note="x"),
        {
            **CONV_OK,
            "scriptEnablement": {
                "entries": [
                    {"owner": OWNER, "key": "id:a", "enabled": True},
                    {"owner": OWNER, "key": "id:a", "enabled": False},
                ]
            },
        },
        _adapter(source="http://x.example/a.js"),
        _adapter(source="https://"),
        _adapter(source="https://user:pw@x.example/a.js"),
        _adapter(source="https://x.example/" + "a" * 2100),
        _adapter(mode="auto"),
        {
            **CONV_OK,
            "renderingAdapters": {
                "entries": [
                    {"owner": OWNER, "source": "https://x.example/a.js", "mode": "builtin"},
                    {"owner": OWNER, "source": "https://x.example/a.js", "mode": "original"},
                ]
            },
        },
    ],
)
async def test_conversation_settings_rejects_and_keeps_file(tavern: Any, body: Any) -> None:
    await tavern.v1("PUT", CONV, {**CONV_OK, "interactiveCards": False})
    path = tavern.root / "conversation-settings.json"
    before = path.read_bytes()
    refused = await tavern.v1("PUT", CONV, body, 400)
    assert refused["code"] == "CONVERSATION_SETTINGS_INVALID"
    assert path.read_bytes() == before
    assert (await tavern.v1("GET", CONV))["settings"]["interactiveCards"] is False


async def test_conversation_body_limit(tavern: Any) -> None:
    big = {**CONV_OK, "bubbleStyle": {"a": "x" * 400_000}}
    resp = await tavern.host.client.put(
        "/pmp-dsh-tavern/api/v1/conversation-settings",
        json=big,
        headers={"Origin": tavern.host.origin},
    )
    assert resp.status == 413
    assert not (tavern.root / "conversation-settings.json").exists()


async def test_saved_settings_survive_a_restart(tmp_path: Any) -> None:
    from tavern_harness import TavernApi

    data = tmp_path / "data"
    host = await start_test_host(data)
    try:
        await host.load("tavern", "innkeeper_tavern.plugin")
        api = TavernApi(host)
        await api.v1("PUT", UI, UI_OK)
        await api.v1("PUT", CONV, {**CONV_OK, "interactiveCards": True})
    finally:
        await host.close()
    host = await start_test_host(data)
    try:
        await host.load("tavern", "innkeeper_tavern.plugin")
        api = TavernApi(host)
        assert (await api.v1("GET", UI))["settings"]["locale"] == "zh-CN"
        assert (await api.v1("GET", CONV))["settings"]["interactiveCards"] is True
    finally:
        await host.close()
