"""Singletons conflict loudly; registrations dispose exactly once, by identity."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from innkeeper_core.plugins.context import HostPluginContext, HostRegistries
from innkeeper_hostapi import (
    AdapterSlot,
    PluginDisposedError,
    RegistrationConflict,
    ServiceKey,
    json_response,
)
from innkeeper_hostapi.testing import RunningHost

PluginWriter = Callable[[str, str], Path]

KEY: ServiceKey[str] = ServiceKey("shared.key")
SLOT: AdapterSlot[str] = AdapterSlot("shared.slot")


def make(pid: str, registries: HostRegistries, tmp_path: Path) -> HostPluginContext:
    return HostPluginContext(pid, 1, registries, tmp_path, {})


async def handler(request: object) -> object:
    return json_response({})


@pytest.mark.parametrize("kind", ["service", "route", "slot"])
async def test_duplicate_singletons_name_both_owners(kind: str, tmp_path: Path) -> None:
    reg = HostRegistries()
    first, second = make("first", reg, tmp_path), make("second", reg, tmp_path)
    register: dict[str, Callable[[HostPluginContext], object]] = {
        "service": lambda ctx: ctx.provide(KEY, lambda: "x"),
        "route": lambda ctx: ctx.add_route("GET", "/same/{id}", handler),  # type: ignore[arg-type]
        "slot": lambda ctx: ctx.claim_slot(SLOT, "adapter"),
    }
    register[kind](first)
    with pytest.raises(RegistrationConflict) as info:
        register[kind](second)
    message = str(info.value)
    assert "'first'" in message
    assert "'second'" in message


async def test_route_conflict_ignores_parameter_names(tmp_path: Path) -> None:
    reg = HostRegistries()
    make("a", reg, tmp_path).add_route("GET", "/x/{id}", handler)  # type: ignore[arg-type]
    with pytest.raises(RegistrationConflict):
        make("b", reg, tmp_path).add_route("GET", "/x/{name}", handler)  # type: ignore[arg-type]
    # another method on the same path is fine
    make("b2", reg, tmp_path).add_route("POST", "/x/{name}", handler)  # type: ignore[arg-type]


async def test_dispose_twice_is_harmless_and_frees_only_its_own(tmp_path: Path) -> None:
    reg = HostRegistries()
    first, second = make("first", reg, tmp_path), make("second", reg, tmp_path)
    claim = first.claim_slot(SLOT, "one")
    await claim.dispose()
    other = second.claim_slot(SLOT, "two")
    await claim.dispose()  # a stale disposer must not free the newer claim
    assert second.slot(SLOT) == "two"
    await other.dispose()
    await other.dispose()
    assert second.slot(SLOT) is None
    assert claim.disposed and other.disposed


async def test_service_shutdown_runs_once_with_built_instance(tmp_path: Path) -> None:
    reg = HostRegistries()
    ctx = make("svc", reg, tmp_path)
    closed: list[object] = []
    registration = ctx.provide(KEY, lambda: "built", shutdown=closed.append)
    assert ctx.get(KEY) == "built"
    assert ctx.get(KEY) is ctx.get(KEY)
    await registration.dispose()
    await registration.dispose()
    assert closed == ["built"]
    assert ctx.get_optional(KEY) is None


async def test_closed_context_refuses_calls(tmp_path: Path) -> None:
    reg = HostRegistries()
    ctx = make("gone", reg, tmp_path)
    ctx.provide(KEY, lambda: "x")
    assert await ctx.close() == []
    assert reg.owned_by("gone") == {}
    with pytest.raises(PluginDisposedError):
        ctx.provide(KEY, lambda: "y")

    async def coro() -> None:
        pass

    with pytest.raises(PluginDisposedError):
        ctx.spawn(coro(), name="late")


async def test_conflicting_plugin_fails_to_load_and_first_keeps_route(
    innkeeper_host: RunningHost, write_plugin: PluginWriter
) -> None:
    source = """
        from innkeeper_hostapi import hookimpl, json_response

        @hookimpl
        def innkeeper_plugin_setup(ctx):
            async def handler(request):
                return json_response({"owner": "%s"})

            ctx.add_route("GET", "/contested", handler)
        """
    first = write_plugin("first", source % "first")
    second = write_plugin("second", source % "second")
    await innkeeper_host.load("first", str(first))
    row = await innkeeper_host.load("second", str(second))
    assert row["state"] == "failed"
    assert "'first'" in row["lastError"] and "'second'" in row["lastError"]
    assert await (await innkeeper_host.client.get("/contested")).json() == {"owner": "first"}


async def test_plugins_cannot_take_host_routes(
    innkeeper_host: RunningHost, write_plugin: PluginWriter
) -> None:
    folder = write_plugin(
        "squatter",
        """
        from innkeeper_hostapi import hookimpl, json_response

        @hookimpl
        def innkeeper_plugin_setup(ctx):
            async def handler(request):
                return json_response({})

            ctx.add_route("GET", "/host/api/mine", handler)
        """,
    )
    row = await innkeeper_host.load("squatter", str(folder))
    assert row["state"] == "failed"
    assert "'host'" in row["lastError"]
