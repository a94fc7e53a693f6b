"""An example MVU command processor: the template for trusted host plugins.

docs/contract/mvu-vm.md#command-processors: a trusted plugin may register one precommit
command processor per MVU state instance (or per template, for all its instances) with
``tavernMvu.registerCommandProcessor({id, source})``. The processor sees the parsed commands of a
reply — ``{type, args, full_match, reason}`` in original order — plus a private copy of the
variables, and may only

* **filter** commands (this one drops the first command that writes ``drop_path``), and
* **recover** a malformed block the host offers (this one accepts the first JSON Patch block
  that only lacked a value separator, at its original place).

Whatever it returns still passes the engine's path, schema and atomic-apply checks. A processor
that raises, returns something else or overruns its 250 ms budget commits nothing for that
reply; the reply gets a diagnostic receipt.

Configuration (``[plugins.mvu_processor]``)::

    ids = ["mvu:character:<card id>"]   # templates or state instances to attach to
    drop_path = "gold"                  # the path whose first write is dropped

Other code (and tests) can attach it at run time through :data:`EXAMPLE_PROCESSOR`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

from innkeeper_hostapi import PluginContext, ServiceKey, hookimpl
from innkeeper_hostapi.agents import AGENT_CREATED, AgentCreated
from innkeeper_hostapi.mvu import (
    TAVERN_MVU,
    CommandProcessorRegistration,
    CommandProcessorSpec,
    MvuCommandBatch,
    MvuCommandView,
)

#: The default path whose first write the example drops.
DEFAULT_DROP_PATH: Final = "gold"
_QUOTES: Final = "'\"`"


def command_path(view: MvuCommandView) -> str:
    """The dot path a command writes (its first argument without quotes)."""
    return view.args[0].strip().strip(_QUOTES) if view.args else ""


def make_processor(drop_path: str) -> Callable[[MvuCommandBatch], list[MvuCommandView]]:
    """A processor that drops the first write of ``drop_path`` and recovers the first
    JSON Patch block that only lacked a value separator."""

    def processor(batch: MvuCommandBatch) -> list[MvuCommandView]:
        recovery = next((r for r in batch.recoverable if r.kind == "json-patch-separator"), None)
        out: list[MvuCommandView] = []
        dropped = False
        for index, view in enumerate(batch.commands):
            if recovery is not None and index == recovery.index:
                out.extend(recovery.commands)
            if not dropped and command_path(view) == drop_path:
                dropped = True
                continue
            out.append(view)
        if recovery is not None and recovery.index >= len(batch.commands):
            out.extend(recovery.commands)
        return out

    return processor


class ExampleProcessor:
    """Attaches the example processor to MVU resources and remembers the registrations."""

    def __init__(self, ctx: PluginContext, drop_path: str, ids: Sequence[str] = ()) -> None:
        self._ctx = ctx
        self.processor = make_processor(drop_path)
        self.ids = list(ids)
        self.registrations: dict[str, CommandProcessorRegistration] = {}
        self._service: object | None = None

    async def attach(self, resource_id: str) -> CommandProcessorRegistration:
        """Register the processor for a template or state id (replacing an older one)."""
        mvu = self._ctx.get(TAVERN_MVU)
        registration = await mvu.register_command_processor(
            CommandProcessorSpec(id=resource_id, source=self.processor)
        )
        self.registrations[resource_id] = registration
        self._service = mvu
        return registration

    async def attach_configured(self) -> None:
        """Attach the configured ids once ``tavernMvu`` is there — again after it reloaded
        (a reloaded service starts without processors)."""
        mvu = self._ctx.get_optional(TAVERN_MVU)
        if mvu is None or not self.ids or mvu is self._service:
            return
        for resource_id in self.ids:
            await self.attach(resource_id)

    async def detach_all(self) -> None:
        """Dispose every registration this plugin made (a newer one by others stays)."""
        registrations, self.registrations = self.registrations, {}
        for registration in registrations.values():
            await registration.dispose()


#: The example's service, so other code and tests can attach it at run time.
EXAMPLE_PROCESSOR: ServiceKey[ExampleProcessor] = ServiceKey(
    "mvu_processor.example", ExampleProcessor
)


@hookimpl
async def innkeeper_plugin_setup(ctx: PluginContext) -> None:
    """Provide the example and attach it to the configured ids.

    Plugins load in any order, so the configured ids are attached now if ``tavernMvu`` is
    already there, else when the first agent is created (before its first reply).
    """
    drop_path = str(ctx.config.get("drop_path", DEFAULT_DROP_PATH))
    ids = ctx.config.get("ids", [])
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise ValueError("[plugins.mvu_processor] ids must be a list of MVU resource ids")
    example = ExampleProcessor(ctx, drop_path, ids)
    ctx.provide(EXAMPLE_PROCESSOR, lambda: example)
    ctx.on_dispose(example.detach_all)

    async def on_agent_created(_: AgentCreated) -> None:
        await example.attach_configured()

    ctx.on(AGENT_CREATED, on_agent_created)
    await example.attach_configured()


__all__ = [
    "DEFAULT_DROP_PATH",
    "EXAMPLE_PROCESSOR",
    "ExampleProcessor",
    "command_path",
    "make_processor",
]
