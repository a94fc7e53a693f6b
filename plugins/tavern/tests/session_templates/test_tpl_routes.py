"""The v1 template routes over real HTTP: CRUD, strict bodies, import/export and limits."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
from tavern_harness import V1

from innkeeper_tavern.state.session_bindings.model import RpState
from innkeeper_tavern.state.session_templates.store import TEMPLATES_FILE

from .conftest import PLUGIN_ID, Tavern

BAD = "INVALID_SESSION_TEMPLATE_REQUEST"
BLANK: dict[str, Any] = {
    "presetId": None,
    "characterCardId": None,
    "userId": None,
    "worldBookIds": [],
    "character": {},
    "rp": {"active": False, "source": None, "followSuppressed": False, "sandboxBefore": None},
}


async def test_blank_create_selects_it_and_lists_with_diagnostics(tavern: Tavern) -> None:
    created = await tavern.v1("POST", "/session-templates", {"name": "Blank"}, 201)
    template = created["template"]
    assert template["name"] == "Blank" and template["selection"] == BLANK
    assert set(template) == {"id", "name", "selection", "createdAt", "updatedAt"}
    assert created["diagnostics"] == []
    assert created["contents"] == {
        "preset": None,
        "characterCard": None,
        "user": None,
        "worldBooks": [],
        "character": {},
    }

    listing = await tavern.v1("GET", "/session-templates")
    assert listing["selectedId"] == template["id"]
    [row] = listing["templates"]
    assert row["id"] == template["id"] and row["diagnostics"] == [] and "contents" in row

    detail = await tavern.v1("GET", f"/session-templates/{template['id']}")
    assert detail["template"] == template


async def test_explicit_selection_then_name_only_and_whole_replacement(tavern: Tavern) -> None:
    preset = await tavern.preset("Preset")
    card = await tavern.character("Lyra", greetings=3)
    book = await tavern.world_book("Lore")
    selection = {
        "presetId": preset,
        "characterCardId": card,
        "worldBookIds": [book],
        "character": {"greetingIndex": 2},
    }
    created = await tavern.v1(
        "POST", "/session-templates", {"name": "Lyra", "selection": selection}, 201
    )
    tid = created["template"]["id"]
    assert created["contents"]["characterCard"] == {"id": card, "name": "Lyra", "missing": False}
    assert created["contents"]["worldBooks"] == [{"id": book, "name": "Lore", "missing": False}]

    renamed = await tavern.v1("PATCH", f"/session-templates/{tid}", {"name": "Lyra 2"})
    assert renamed["template"]["name"] == "Lyra 2"
    assert renamed["template"]["selection"] == created["template"]["selection"]

    # An explicit selection replaces everything: omitted fields become blank, never merged.
    replaced = await tavern.v1(
        "PATCH", f"/session-templates/{tid}", {"selection": {"userId": None}}
    )
    assert replaced["template"]["selection"] == BLANK
    assert replaced["template"]["name"] == "Lyra 2"


async def test_unknown_top_level_fields_are_rejected(tavern: Tavern) -> None:
    created = await tavern.v1("POST", "/session-templates", {"name": "T"}, 201)
    tid = created["template"]["id"]
    # Sending back a whole response (ids, timestamps) is refused, on POST and PATCH.
    echoed = dict(created["template"])
    for method, path in (("POST", "/session-templates"), ("PATCH", f"/session-templates/{tid}")):
        for body in (echoed, {"name": "x", "selectedId": None}, {"name": "x", "rp": {}}):
            error = await tavern.v1(method, path, body, 400)
            assert error["code"] == BAD
    not_objects: tuple[Any, ...] = ([], "x", 1)
    for not_object in not_objects:
        error = await tavern.v1("POST", "/session-templates", not_object, 400)
        assert error["code"] == BAD
    # No body at all is not JSON (the host's INVALID_JSON).
    assert (await tavern.v1("POST", "/session-templates", None, 400))["code"] == "INVALID_JSON"
    assert (await tavern.v1("POST", "/session-templates", {}, 400))["code"] == BAD  # no name
    nested = {"name": "x", "selection": {"presetId": None, "greeting": 1}}
    assert (await tavern.v1("POST", "/session-templates", nested, 400))["code"] == BAD
    assert tavern.templates.find(tid) == tavern.templates.templates()[0]
    assert len(tavern.templates) == 1


async def test_selection_and_source_session_are_mutually_exclusive(tavern: Tavern) -> None:
    session = await tavern.new_session()
    body = {"name": "x", "selection": {}, "sourceSessionId": session}
    assert (await tavern.v1("POST", "/session-templates", body, 400))["code"] == BAD
    tid = (await tavern.v1("POST", "/session-templates", {"name": "x"}, 201))["template"]["id"]
    patch = {"selection": {}, "sourceSessionId": session}
    assert (await tavern.v1("PATCH", f"/session-templates/{tid}", patch, 400))["code"] == BAD
    for bad in ("", 5, None):
        invalid: dict[str, Any] = {"name": "x", "sourceSessionId": bad}
        assert (await tavern.v1("POST", "/session-templates", invalid, 400))["code"] == BAD


async def test_capture_from_a_session_copies_the_projection_with_rp(tavern: Tavern) -> None:
    preset, card, user = (
        await tavern.preset("P"),
        await tavern.character("C"),
        await tavern.user("U"),
    )
    session = await tavern.new_session()
    await tavern.v1("POST", "/select", {"id": preset, "sessionId": session})
    await tavern.v1("POST", "/character-selection", {"sessionId": session, "characterCardId": card})
    await tavern.v1("POST", "/user-selection", {"sessionId": session, "userId": user})
    await tavern.store.update(
        session,
        lambda s: msgspec.structs.replace(s, rp=RpState(active=True, source="character-follow")),
    )
    stored = tavern.store.get(session)

    created = await tavern.v1(
        "POST", "/session-templates", {"name": "Captured", "sourceSessionId": session}, 201
    )
    selection = created["template"]["selection"]
    assert selection == json.loads(msgspec.json.encode(stored))
    assert selection["rp"]["active"] is True and selection["rp"]["source"] == "character-follow"

    # PATCH can capture again; the template is a copy, not a link.
    tid = created["template"]["id"]
    await tavern.v1("POST", "/user-selection", {"sessionId": session, "userId": None})
    assert tavern.templates.get(tid).selection.user_id == user
    recaptured = await tavern.v1("PATCH", f"/session-templates/{tid}", {"sourceSessionId": session})
    assert recaptured["template"]["selection"]["userId"] is None

    # An unbound session captures what it would freeze (the global default preset).
    await tavern.v1("POST", "/select", {"id": preset})
    fresh = await tavern.new_session()
    body = {"name": "Fresh", "sourceSessionId": fresh}
    captured = await tavern.v1("POST", "/session-templates", body, 201)
    assert captured["template"]["selection"] == {**BLANK, "presetId": preset}
    assert not tavern.store.has(fresh)  # capturing never writes the session


async def test_capture_from_unknown_or_malformed_session(tavern: Tavern) -> None:
    missing = {"name": "x", "sourceSessionId": "no-such-session"}
    assert (await tavern.v1("POST", "/session-templates", missing, 404))["code"] == (
        "SESSION_NOT_FOUND"
    )
    malformed = {"name": "x", "sourceSessionId": "__proto__"}
    assert (await tavern.v1("POST", "/session-templates", malformed, 400))["code"] == (
        "SESSION_ID_INVALID"
    )
    assert len(tavern.templates) == 0


async def test_creating_a_template_never_changes_session_bindings(tavern: Tavern) -> None:
    preset = await tavern.preset("P")
    session = await tavern.new_session()
    await tavern.v1("POST", "/select", {"id": preset, "sessionId": session})
    before = tavern.store.get(session)
    tid = (
        await tavern.v1(
            "POST", "/session-templates", {"name": "x", "sourceSessionId": session}, 201
        )
    )["template"]["id"]
    await tavern.v1("PATCH", f"/session-templates/{tid}", {"selection": {}})
    await tavern.v1("DELETE", f"/session-templates/{tid}")
    assert tavern.store.get(session) == before


async def test_select_and_delete(tavern: Tavern) -> None:
    a = (await tavern.v1("POST", "/session-templates", {"name": "A"}, 201))["template"]["id"]
    b = (await tavern.v1("POST", "/session-templates", {"name": "B"}, 201))["template"]["id"]
    assert tavern.templates.selected_id == b  # creation selects the new template
    chosen = await tavern.v1("POST", "/session-templates/select", {"id": a})
    assert chosen["selectedId"] == a and chosen["template"]["name"] == "A"
    cleared = await tavern.v1("POST", "/session-templates/select", {"id": None})
    assert cleared == {"ok": True, "selectedId": None, "template": None}
    assert (await tavern.v1("POST", "/session-templates/select", {"id": "x"}, 404))["code"] == (
        "SESSION_TEMPLATE_NOT_FOUND"
    )
    for body in ({}, {"id": 3}, {"id": a, "extra": 1}):
        assert (await tavern.v1("POST", "/session-templates/select", body, 400))["code"] == BAD

    await tavern.v1("POST", "/session-templates/select", {"id": a})
    assert await tavern.v1("DELETE", f"/session-templates/{a}") == {"ok": True, "id": a}
    assert tavern.templates.selected_id is None
    for method in ("GET", "PATCH", "DELETE"):
        patch_body = {"name": "x"} if method == "PATCH" else None
        error = await tavern.v1(method, f"/session-templates/{a}", patch_body, 404)
        assert error["code"] == "SESSION_TEMPLATE_NOT_FOUND"
    assert (await tavern.v1("GET", f"/session-templates/{a}/export", None, 404))["code"] == (
        "SESSION_TEMPLATE_NOT_FOUND"
    )
    assert [t.id for t in tavern.templates.templates()] == [b]


async def test_export_import_round_trip(tavern: Tavern) -> None:
    preset, book = await tavern.preset("P"), await tavern.world_book("W")
    selection = {
        "presetId": preset,
        "worldBookIds": [book, "world-book-elsewhere"],
        "character": {"preferCharacterPostHistory": False},
        "rp": {"active": True, "source": "command", "sandboxBefore": "read-only"},
    }
    original = await tavern.v1(
        "POST", "/session-templates", {"name": "Trip é", "selection": selection}, 201
    )
    tid = original["template"]["id"]
    resp = await tavern.host.client.get(f"{V1}/session-templates/{tid}/export")
    assert resp.status == 200
    assert resp.headers["Content-Disposition"].startswith("attachment;")
    assert "session-template.json" in resp.headers["Content-Disposition"]
    data = await resp.read()
    document = json.loads(data)
    assert "ok" not in document
    assert document == {
        "format": "pmp-dsh-tavern",
        "version": 1,
        "resourceType": "session-template",
        "data": {"name": "Trip é", "selection": original["template"]["selection"]},
    }

    other = (await tavern.v1("POST", "/session-templates", {"name": "Other"}, 201))["template"]
    status, imported = await tavern.raw("POST", "/session-templates/import", data)
    assert status == 201, imported
    assert imported["template"]["id"] not in (tid, other["id"])  # always a new id
    assert imported["template"]["selection"] == original["template"]["selection"]
    assert imported["template"]["name"] == "Trip é"
    # Importing keeps the selected template; a missing world book is a diagnostic, not an error.
    assert tavern.templates.selected_id == other["id"]
    assert [d["resourceId"] for d in imported["diagnostics"]] == ["world-book-elsewhere"]
    assert imported["contents"]["worldBooks"][1] == {
        "id": "world-book-elsewhere",
        "name": "world-book-elsewhere",
        "missing": True,
    }


async def test_import_rejects_other_documents(tavern: Tavern) -> None:
    def doc(**over: Any) -> bytes:
        base: dict[str, Any] = {
            "format": "pmp-dsh-tavern",
            "version": 1,
            "resourceType": "session-template",
            "data": {"name": "x"},
        }
        return json.dumps({**base, **over}).encode()

    cases = [
        doc(version=2),
        doc(resourceType="user"),
        doc(id="session-template-1"),
        doc(data={"name": "x", "id": "session-template-1"}),
        doc(data={"name": "x", "selection": {"presetId": ""}}),
        b"[]",
    ]
    for body in cases:
        status, error = await tavern.raw("POST", "/session-templates/import", body)
        assert (status, error["code"]) == (400, BAD), body
    status, error = await tavern.raw("POST", "/session-templates/import", b"{nope")
    assert (status, error["code"]) == (400, "INVALID_JSON")
    status, _ = await tavern.raw("POST", "/session-templates/import", doc(), "text/plain")
    assert status == 415
    assert len(tavern.templates) == 0


async def test_body_limits_64_and_256_kib(tavern: Tavern) -> None:
    # Whitespace keeps the JSON valid while growing the body past a limit.
    small = {"name": "x"}
    padded_65k = json.dumps(small).encode() + b" " * (64 << 10)
    status, error = await tavern.raw("POST", "/session-templates", padded_65k)
    assert (status, error["code"]) == (413, "BODY_TOO_LARGE")
    for path in ("/session-configurations/preview", "/session-configurations/apply"):
        status, error = await tavern.raw("POST", path, padded_65k)
        assert status == 413, path

    document = {
        "format": "pmp-dsh-tavern",
        "version": 1,
        "resourceType": "session-template",
        "data": {"name": "big"},
    }
    within = json.dumps(document).encode() + b" " * (200 << 10)
    status, imported = await tavern.raw("POST", "/session-templates/import", within)
    assert status == 201, imported
    over = json.dumps(document).encode() + b" " * (256 << 10)
    status, error = await tavern.raw("POST", "/session-templates/import", over)
    assert (status, error["code"]) == (413, "BODY_TOO_LARGE")
    assert len(tavern.templates) == 1


async def test_count_and_storage_limits_over_http(start_host: Any, tmp_path: Path) -> None:
    _, tavern = await start_host(
        tmp_path / "data", plugins={PLUGIN_ID: {"max_session_templates": 1}}
    )
    await tavern.v1("POST", "/session-templates", {"name": "one"}, 201)
    full = await tavern.v1("POST", "/session-templates", {"name": "two"}, 409)
    assert full["code"] == "SESSION_TEMPLATE_LIMIT_REACHED"
    document = b'{"format":"pmp-dsh-tavern","version":1,"resourceType":"session-template",'
    document += b'"data":{"name":"three"}}'
    status, error = await tavern.raw("POST", "/session-templates/import", document)
    assert (status, error["code"]) == (409, "SESSION_TEMPLATE_LIMIT_REACHED")

    _, tight = await start_host(
        tmp_path / "data2", plugins={PLUGIN_ID: {"max_session_template_bytes": 1024}}
    )
    books = [f"world-book-{i:03d}" for i in range(100)]
    body = {"name": "big", "selection": {"worldBookIds": books}}
    error = await tight.v1("POST", "/session-templates", body, 413)
    assert error["code"] == "SESSION_TEMPLATE_STORAGE_LIMIT_REACHED"
    assert len(tight.templates) == 0
    assert not (tight.root / TEMPLATES_FILE).exists()


async def test_bad_options_fail_the_load(tmp_path: Path) -> None:
    from innkeeper_core.testing import start_test_host

    from .conftest import write_plugin

    for option, value in (("max_session_templates", 201), ("max_session_template_bytes", 0)):
        host = await start_test_host(tmp_path / option, plugins={PLUGIN_ID: {option: value}})
        try:
            status = await host.load(PLUGIN_ID, write_plugin(tmp_path))
            assert status["state"] == "failed"
            assert option in str(status["lastError"])
        finally:
            await host.close()


async def test_templates_survive_a_restart(start_host: Any, tmp_path: Path) -> None:
    host, tavern = await start_host(tmp_path / "data")
    tid = (await tavern.v1("POST", "/session-templates", {"name": "Kept"}, 201))["template"]["id"]
    await host.close()
    _, again = await start_host(tmp_path / "data")
    listing = await again.v1("GET", "/session-templates")
    assert listing["selectedId"] == tid and listing["templates"][0]["name"] == "Kept"
