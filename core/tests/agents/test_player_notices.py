"""Small things a player notices (issue 10, item 12): the session list previews the last
message, a fork is titled as a branch, a refused Origin names the expected one, and the
start-up line says which provider and model are in use."""

from __future__ import annotations

from typing import Any

from innkeeper_core.cli import startup_line
from innkeeper_core.config import HostConfig, ProviderConfig
from innkeeper_hostapi.sessions import MESSAGE_PREVIEW_MAX_CHARS


async def test_the_session_list_previews_the_last_message_and_forks_are_branches(api: Any) -> None:
    session = await api.new_session("Forest glade")
    api.provider.enqueue("The glade is quiet. " * 20)
    await api.prompt(session, "I limp into the glade.")
    await api.idle(session)
    quiet = await api.new_session("Not started")

    rows = {r["header"]["id"]: r for r in (await api.call("GET", "/host/api/sessions"))["sessions"]}
    preview = rows[session]["lastMessage"]
    assert preview["role"] == "assistant" and preview["text"].startswith("The glade is quiet.")
    assert len(preview["text"]) == MESSAGE_PREVIEW_MAX_CHARS and preview["truncated"] is True
    assert rows[quiet]["lastMessage"] is None

    events = await api.events(session)
    user_seq = next(e["seq"] for e in events if e["data"]["type"] == "user/message")
    fork = await api.call(
        "POST", f"/host/api/sessions/{session}/fork", {"atEventId": user_seq}, status=201
    )
    assert fork["session"]["title"] == "Forest glade (branch)"
    child = fork["session"]["id"]
    rows = {r["header"]["id"]: r for r in (await api.call("GET", "/host/api/sessions"))["sessions"]}
    assert rows[child]["lastMessage"]["role"] == "user"  # inherited from the parent's prefix
    assert rows[child]["lastMessage"]["text"] == "I limp into the glade."
    again = await api.call("POST", f"/host/api/sessions/{child}/fork", {"atEventId": 1}, status=201)
    assert again["session"]["title"] == "Forest glade (branch)"


async def test_a_foreign_origin_is_told_the_expected_one(innkeeper_host: Any) -> None:
    resp = await innkeeper_host.client.post(
        "/host/api/sessions", json={}, headers={"Origin": "http://127.0.0.1:9999"}
    )
    body = await resp.json()
    assert resp.status == 403 and body["code"] == "ORIGIN_FORBIDDEN"
    assert f"expected {innkeeper_host.origin}" in body["error"]


def test_the_start_up_line_names_provider_and_model() -> None:
    synthetic = startup_line(HostConfig(data_dir="/tmp/d"))
    assert "provider synthetic" in synthetic and "/tmp/d" in synthetic
    real = startup_line(
        HostConfig(
            data_dir="/tmp/d",
            provider=ProviderConfig(
                kind="openai", base_url="http://127.0.0.1:8080/v1", model="qwen", api_key="sk-x"
            ),
        )
    )
    assert "provider openai at http://127.0.0.1:8080/v1, model qwen" in real
    assert "sk-x" not in real
