"""The tool registry: registration, conflicts, listing, unload, argument validation, bounds."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from innkeeper_core.plugins.context import HostPluginContext, HostRegistries
from innkeeper_core.tools.registry import ArgumentsInvalid, bounded
from innkeeper_hostapi import RegistrationConflict
from innkeeper_hostapi.testing import RunningHost
from innkeeper_hostapi.tools import MAX_TOOL_ARGUMENTS_BYTES, ToolInvocation

from .conftest import Api

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 20}, "days": {"type": "integer"}},
    "required": ["city"],
    "additionalProperties": False,
}

WEATHER = """
from innkeeper_hostapi import hookimpl

@hookimpl
def innkeeper_plugin_setup(ctx):
    async def weather(call):
        return {"city": call.arguments["city"], "sky": "clear"}

    ctx.add_tool("weather", "Today's weather in a city.", {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    }, weather, risk="read-only")
"""


async def noop(call: ToolInvocation) -> str:
    return "ok"


def make(pid: str, registries: HostRegistries, tmp_path: Path) -> HostPluginContext:
    return HostPluginContext(pid, 1, registries, tmp_path, {})


async def test_duplicate_tool_names_both_owners(tmp_path: Path) -> None:
    reg = HostRegistries()
    make("first", reg, tmp_path).add_tool("look", "Look.", SCHEMA, noop, risk="read-only")
    with pytest.raises(RegistrationConflict) as info:
        make("second", reg, tmp_path).add_tool("look", "Look.", SCHEMA, noop)
    assert "'first'" in str(info.value) and "'second'" in str(info.value)


async def test_dispose_removes_only_its_own_tool(tmp_path: Path) -> None:
    reg = HostRegistries()
    ctx = make("a", reg, tmp_path)
    registration = ctx.add_tool("look", "Look.", SCHEMA, noop, risk="read-only")
    ctx.add_tool("touch", "Touch.", SCHEMA, noop, risk="workspace-write")
    await registration.dispose()
    assert [t.name for t in reg.tools.list()] == ["touch"]
    await ctx.close()
    assert reg.tools.list() == ()


@pytest.mark.parametrize(
    ("name", "description", "schema", "risk", "message"),
    [
        ("bad name", "x", SCHEMA, "read-only", "must match"),
        ("x" * 65, "x", SCHEMA, "read-only", "must match"),
        ("ok", "x" * 5000, SCHEMA, "read-only", "description"),
        ("ok", "x", {"type": "string"}, "read-only", "object schema"),
        ("ok", "x", {"type": "object", "properties": {"a": {"type": 7}}}, "read-only", "invalid"),
        ("ok", "x", SCHEMA, "root", "risk"),
    ],
)
async def test_invalid_registrations_fail_at_once(
    tmp_path: Path, name: str, description: str, schema: Any, risk: Any, message: str
) -> None:
    reg = HostRegistries()
    with pytest.raises(ValueError, match=message):
        make("a", reg, tmp_path).add_tool(name, description, schema, noop, risk=risk)
    assert reg.tools.list() == ()


async def test_arguments_are_validated_against_the_schema(tmp_path: Path) -> None:
    reg = HostRegistries()
    make("a", reg, tmp_path).add_tool("look", "Look.", SCHEMA, noop, risk="read-only")
    entry = reg.tools.get("look")
    assert entry is not None
    assert entry.parse('{"city": "Oslo", "days": 2}') == {"city": "Oslo", "days": 2}
    cases = {
        "{": "not valid JSON",
        "[1]": "must be a JSON object",
        '{"days": 1}': "'city' is a required property",
        '{"city": "Oslo", "days": "two"}': "days: 'two' is not of type 'integer'",
        '{"city": "Oslo", "extra": 1}': "Additional properties",
        '{"city": "' + "x" * MAX_TOOL_ARGUMENTS_BYTES + '"}': "larger than",
    }
    for text, message in cases.items():
        with pytest.raises(ArgumentsInvalid, match=message):
            entry.parse(text)
    # The registered schema is a copy: changing the plugin's dict changes nothing.
    SCHEMA["required"] = []
    try:
        with pytest.raises(ArgumentsInvalid):
            entry.parse("{}")
    finally:
        SCHEMA["required"] = ["city"]


def test_bounded_says_what_was_cut() -> None:
    assert bounded("short", 10) == "short"
    cut = bounded("x" * 1000, 100)
    assert len(cut) <= 100 and cut.endswith(
        f"[truncated: {1000 - cut.index(chr(10))} more characters]"
    )


async def test_tools_route_lists_and_unload_removes(
    innkeeper_host: RunningHost,
    api: Api,
    plugin_dir: Callable[[str, str], str],
    leak_check: Any,
) -> None:
    async with leak_check():
        await innkeeper_host.load("weather", plugin_dir("weather", WEATHER))
        data = await api.call("GET", "/host/api/tools")
        assert data == {
            "ok": True,
            "tools": [
                {
                    "name": "weather",
                    "owner": "weather",
                    "description": "Today's weather in a city.",
                    "parameters": {
                        "type": "object",
                        "properties": {"city": {"type": "string"}},
                        "required": ["city"],
                    },
                    "risk": "read-only",
                }
            ],
        }
        await innkeeper_host.unload("weather")
    assert (await api.call("GET", "/host/api/tools"))["tools"] == []


async def test_a_second_plugin_with_the_same_tool_fails_naming_both(
    innkeeper_host: RunningHost, plugin_dir: Callable[[str, str], str]
) -> None:
    await innkeeper_host.load("weather", plugin_dir("weather", WEATHER))
    status = await innkeeper_host.load("weather2", plugin_dir("weather2", WEATHER))
    assert status["state"] == "failed"
    assert "'weather'" in status["lastError"] and "'weather2'" in status["lastError"]
