"""Model settings from the page (issue 26): saved in the data directory (0600, atomic), applied
to the next turn without a restart, overridden by configured fields, the key never sent back;
``Test connection`` lists a server's models or passes on its own reason."""

from __future__ import annotations

import json
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio
from aiohttp import web
from aiohttp.test_utils import TestServer

from innkeeper_core.config import ProviderConfig, load_config
from innkeeper_core.testing import start_test_host
from innkeeper_hostapi.agents import PROVIDER

from .conftest import Api

KEY = "sk-test-marker-0123456789wxyz"
BASE = "/host/api/model-settings"


class Fake:
    """A loopback OpenAI-compatible server that records what it was asked."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.models_body: bytes = json.dumps({"data": [{"id": "m-1"}, {"id": "m-2"}]}).encode()
        #: A 401 that echoes the key it refused (some servers do).
        self.echo = False

    def refused(self, request: web.Request) -> web.Response | None:
        key = request.headers.get("Authorization", "").removeprefix("Bearer ")
        if key == KEY:
            return None
        message = f"bad key {key}" if self.echo else "Invalid API key (fake)"
        return web.json_response({"error": {"message": message}}, status=401)

    async def models(self, request: web.Request) -> web.StreamResponse:
        self.calls.append({"path": "models", "auth": request.headers.get("Authorization")})
        return self.refused(request) or web.Response(
            body=self.models_body, content_type="application/json"
        )

    async def completions(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.calls.append({"path": "chat", "model": body["model"]})
        refusal = self.refused(request)
        if refusal is not None:
            return refusal
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for piece in ("Hello", " from", " the server"):
            chunk = {"choices": [{"index": 0, "delta": {"content": piece}}]}
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        return response


@pytest_asyncio.fixture
async def fake() -> AsyncIterator[tuple[Fake, str]]:
    state = Fake()
    app = web.Application()
    app.router.add_get("/v1/models", state.models)
    app.router.add_post("/v1/chat/completions", state.completions)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield state, str(server.make_url("/v1"))
    finally:
        await server.close()


async def reply(api: Api, text: str) -> dict[str, Any]:
    session = await api.new_session()
    await api.prompt(session, text)
    await api.idle(session)
    page = await api.call("GET", f"/host/api/sessions/{session}/messages")
    return dict(page)


async def test_saved_settings_apply_to_the_next_turn_and_never_show_the_key(
    tmp_path: Path, fake: tuple[Fake, str]
) -> None:
    server, url = fake
    host = await start_test_host(tmp_path / "data")
    try:
        api = Api(host)
        view = await api.call("GET", BASE)
        assert (view["provider"], view["practice"], view["apiKey"]) == (
            "synthetic",
            True,
            {"set": False, "last4": None},
        )
        practice = await reply(api, "hi")
        assert practice["messages"][-1]["text"].startswith("Synthetic reply")

        body = {"provider": "vllm", "baseUrl": url, "model": "m-2", "apiKey": KEY}
        saved = await api.call("PUT", BASE, body)
        assert saved["apiKey"] == {"set": True, "last4": "wxyz"} and saved["practice"] is False
        assert KEY not in json.dumps(saved) and KEY not in json.dumps(await api.call("GET", BASE))
        file = tmp_path / "data" / "model-settings.json"
        assert stat.S_IMODE(file.stat().st_mode) == 0o600
        assert json.loads(file.read_bytes())["apiKey"] == KEY
        assert not list(file.parent.glob(".model-settings-*"))  # no temp file left behind

        # No restart: the next turn goes to the saved server, model and key.
        answered = await reply(api, "hello")
        assert answered["messages"][-1]["text"] == "Hello from the server"
        assert server.calls[-1] == {"path": "chat", "model": "m-2"}
        assert host.get(PROVIDER).name == "openai"

        # Omitting the key keeps it; null removes it (and the server then refuses).
        await api.call("PUT", BASE, {"provider": "vllm", "baseUrl": url, "model": "m-2"})
        assert json.loads(file.read_bytes())["apiKey"] == KEY
        removed = await api.call("PUT", BASE, {**body, "apiKey": None})
        assert removed["apiKey"] == {"set": False, "last4": None}
        failed = await reply(api, "again")
        assert failed["failedTurn"]["code"] == "PROVIDER_AUTH"
        assert failed["failedTurn"]["message"] == "Invalid API key (fake)"
    finally:
        await host.close()

    # A restarted host reads the saved file.
    again = await start_test_host(tmp_path / "data")
    try:
        view = await Api(again).call("GET", BASE)
        assert (view["provider"], view["baseUrl"], view["model"]) == ("vllm", url, "m-2")
    finally:
        await again.close()


async def test_bad_settings_are_refused_and_change_nothing(tmp_path: Path) -> None:
    host = await start_test_host(tmp_path / "data")
    try:
        api = Api(host)
        for body, field in (
            ({"provider": "gpt"}, "provider"),
            ({"provider": "openai", "baseUrl": "ftp://x", "model": "m"}, "baseUrl"),
            ({"provider": "openai", "baseUrl": "http://127.0.0.1:1/v1", "model": ""}, "model"),
            ({"provider": "openai", "model": "m", "apiKey": "two words"}, "apiKey"),
            ({"provider": "openai", "model": "m", "extra": 1}, "extra"),
        ):
            answer = await api.call("PUT", BASE, body, status=400)
            assert (answer["code"], answer["field"]) == ("MODEL_SETTINGS_INVALID", field)
        assert not (tmp_path / "data" / "model-settings.json").exists()
        assert (await api.call("GET", BASE))["practice"] is True
    finally:
        await host.close()


async def test_configured_fields_win_and_are_named(tmp_path: Path, fake: tuple[Fake, str]) -> None:
    _, url = fake
    env = {
        "INNKEEPER_PROVIDER": "openai",
        "INNKEEPER_MODEL": "flag-model",
        "INNKEEPER_BASE_URL": url,
    }
    config = load_config(env=env, overrides={"data_dir": str(tmp_path / "data")})
    assert config.provider.fixed == ["base_url", "kind", "model"]
    host = await start_test_host(tmp_path / "data", provider=config.provider)
    try:
        api = Api(host)
        view = await api.call("GET", BASE)
        assert sorted(view["overridden"]) == ["baseUrl", "model", "provider"]
        saved = await api.call(
            "PUT", BASE, {"provider": "deepseek", "baseUrl": "http://127.0.0.1:9/v1",
                          "model": "page-model", "apiKey": KEY}
        )  # fmt: skip
        # The key was not configured, so the page's applies; the rest stays as configured.
        assert (saved["provider"], saved["baseUrl"], saved["model"]) == (
            "openai",
            url,
            "flag-model",
        )
        assert saved["apiKey"]["set"] is True
    finally:
        await host.close()


async def test_test_connection_lists_models_or_passes_on_the_reason(
    tmp_path: Path, fake: tuple[Fake, str]
) -> None:
    server, url = fake
    host = await start_test_host(tmp_path / "data")
    try:
        api = Api(host)
        test = BASE + "/test"
        listed = await api.call("POST", test, {"provider": "openai", "baseUrl": url, "apiKey": KEY})
        assert listed["models"] == ["m-1", "m-2"]
        refused = await api.call("POST", test, {"baseUrl": url, "apiKey": "sk-wrong"}, status=424)
        assert refused["code"] == "MODEL_SERVER_REFUSED" and refused["serverStatus"] == 401
        assert "Invalid API key (fake)" in refused["error"]
        # A server echoing the key never gets it into our answer.
        server.echo = True
        echoed = await api.call("POST", test, {"baseUrl": url, "apiKey": KEY + "x"}, status=424)
        assert KEY not in echoed["error"] and echoed["error"].endswith("bad key …xyzx")
        # No key given: the saved one is used (and not returned).
        server.echo = False
        await api.call("PUT", BASE, {"provider": "openai", "baseUrl": url, "model": "m-1",
                                     "apiKey": KEY})  # fmt: skip
        assert (await api.call("POST", test, {"baseUrl": url}))["models"] == ["m-1", "m-2"]
        assert server.calls[-1]["auth"] == f"Bearer {KEY}"
        server.models_body = b"<html>not json</html>"
        bad = await api.call("POST", test, {"baseUrl": url}, status=424)
        assert bad["code"] == "MODEL_SERVER_NOT_JSON"
        server.models_body = b'{"object": "list"}'
        shapeless = await api.call("POST", test, {"baseUrl": url}, status=424)
        assert shapeless["code"] == "MODEL_SERVER_BAD_ANSWER"
        gone = await api.call("POST", test, {"baseUrl": "http://127.0.0.1:9/v1"}, status=424)
        assert gone["code"] == "MODEL_SERVER_UNREACHABLE"
        missing = await api.call("POST", test, {"baseUrl": url.replace("/v1", "/nope")}, 424)
        assert (missing["code"], missing["serverStatus"]) == ("MODEL_SERVER_ERROR", 404)
        practice = await api.call("POST", test, {"provider": "synthetic"}, status=400)
        assert practice["code"] == "MODEL_SETTINGS_INVALID"
    finally:
        await host.close()


def test_provider_fixed_is_not_a_setting(tmp_path: Path) -> None:
    import pytest

    from innkeeper_core.config import ConfigError

    toml = tmp_path / "c.toml"
    toml.write_text('[provider]\nfixed = ["kind"]\n')
    with pytest.raises(ConfigError, match=r"provider\.fixed is not a setting"):
        load_config(file=toml, env={})
    assert ProviderConfig().fixed == []
