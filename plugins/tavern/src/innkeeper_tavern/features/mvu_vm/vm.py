"""One QuickJS VM running a card's command-processor declaration.

docs/contract/mvu-vm.md#vm-limits: the declaration runs in a QuickJS VM owned by the state's
source, with no DOM, module import, network, file, host function or variable write API; the
source is at most 64 Ki code units, the VM's memory 32 MiB and each entry into it 250 ms of CPU;
asynchronous listeners are refused.

The limits are the engine's own: ``JS_SetMemoryLimit`` (32 MiB for everything the VM allocates)
and QuickJS's interrupt handler, which stops an entry once it has used 250 ms of CPU time (the
binding measures process CPU time, so a busy host stops a script sooner, never later). Every
entry — the declaration, each pending job of its initialization, each ``COMMAND_PARSED``
dispatch — has its own budget. The binding releases the GIL while JavaScript runs, so a script
spinning to its budget in a worker thread does not stall the event loop.

A :class:`ScriptVm` is blocking and not thread-safe; callers run it in a worker thread and never
enter one VM from two threads at once (:class:`~.pool.VmPool` holds a lock per VM).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from importlib import resources
from typing import Any, Final

import quickjs  # type: ignore[import-untyped]  # the binding ships no stubs

from innkeeper_hostapi.mvu import MvuCommandView
from innkeeper_tavern.pure.mvu.dsl.capabilities import capability_of

#: Source limit in UTF-16 code units (docs/contract/mvu-vm.md#vm-limits).
MAX_SOURCE_UNITS: Final = 64 * 1024
#: Memory of one VM (docs/contract/mvu-vm.md#vm-limits).
MAX_MEMORY_BYTES: Final = 32 * 1024 * 1024
#: CPU budget of one interpreter entry (docs/contract/mvu-vm.md#vm-limits).
ENTRY_BUDGET_SECONDS: Final = 0.25
#: Native stack of one entry (deep recursion is an error, never a crash of the worker thread).
MAX_STACK_BYTES: Final = 512 * 1024
#: Promise jobs run while the declaration initializes (``await waitGlobalInitialized('Mvu')``).
MAX_INIT_JOBS: Final = 64
#: CPU time of the whole initialization (all its entries together), so a declaration cannot
#: hold the service for ``MAX_INIT_JOBS`` full budgets.
INIT_BUDGET_SECONDS: Final = 1.0

#: A static ``import`` statement (module graphs are not available in the VM).
_IMPORT: Final = re.compile(r"^\s*import\s*[\w{*'\"]", re.MULTILINE)
#: A bare ``import '<url>';`` line (the form ``mvu-facade`` aliases are imported with).
_BARE_IMPORT: Final = re.compile(
    r"^[ \t]*import[ \t]*(['\"])([^'\"\n]+)\1[ \t]*;?[ \t]*$", re.MULTILINE
)
_PRELUDE: Final = resources.files(__package__).joinpath("prelude.js").read_text("utf-8")


class VmError(Exception):
    """A VM refused or failed an entry. ``code`` is the receipt code of the reply."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _facade_import(match: re.Match[str]) -> str:
    """Drop an exact ``mvu-facade`` import (local capability contract v1: the VM's own ``Mvu``
    is that facade; nothing is fetched). Any other import stays and is refused."""
    return "" if capability_of(match.group(2)) == "mvu-facade" else match.group(0)


def utf16_units(text: str) -> int:
    """Length of ``text`` in UTF-16 code units (JavaScript's ``length``)."""
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def _failure(exc: Exception) -> VmError:
    text = str(exc)
    if "interrupted" in text:
        return VmError("MVU_PROCESSOR_TIMEOUT", "the command processor overran its 250 ms budget")
    if "out of memory" in text:
        return VmError("MVU_PROCESSOR_MEMORY", "the command processor exceeded its 32 MiB")
    if "stack overflow" in text or isinstance(exc, quickjs.StackOverflow):
        return VmError("MVU_PROCESSOR_FAILED", "the command processor overflowed its stack")
    first = text.splitlines()[0] if text else type(exc).__name__
    return VmError("MVU_PROCESSOR_FAILED", f"the command processor threw {first[:200]}")


@dataclass(frozen=True, slots=True)
class Dispatch:
    """The inputs of one ``COMMAND_PARSED`` dispatch (JSON made by the host)."""

    variables: Any
    commands: tuple[MvuCommandView, ...]
    message_content: str
    gate: Any | None = None


class ScriptVm:
    """A VM with the processor environment and one declaration, initialized.

    Raises :class:`VmError` when the source is too long, uses imports, throws, overruns a budget
    or registers an async listener, and when it registers no ``COMMAND_PARSED`` listener.
    """

    def __init__(self, source: str) -> None:
        if utf16_units(source) > MAX_SOURCE_UNITS:
            raise VmError("MVU_PROCESSOR_INVALID", "the declaration exceeds 64 Ki code units")
        context = quickjs.Context()
        context.set_memory_limit(MAX_MEMORY_BYTES)
        context.set_max_stack_size(MAX_STACK_BYTES)
        context.set_time_limit(ENTRY_BUDGET_SECONDS)
        self._context = context
        self._started = time.thread_time()
        self.broken = False
        source = _BARE_IMPORT.sub(_facade_import, source)
        if _IMPORT.search(source):
            raise VmError("MVU_PROCESSOR_INVALID", "module imports are not available")
        try:
            context.eval(_PRELUDE)
            # The declaration runs as an async function body: ``await`` works at its top
            # level, as in a card script; a syntax error is raised here.
            context.eval(
                "globalThis.__innkeeperInit = (async function () {\n"
                + source
                + "\n})().then(() => null, (e) => String(e));"
            )
            self._drain()
            self._call("initialize")
            self._drain()
            failure = self._settled_init()
        except quickjs.JSException as exc:
            self.broken = True
            raise _failure(exc) from None
        if self.rejected_async():
            raise VmError("MVU_PROCESSOR_ASYNC", "async COMMAND_PARSED listeners are rejected")
        if failure is not None:
            self.broken = True
            raise _failure(Exception(failure))
        self.listener_count = int(self._call("listenerCount"))
        if self.listener_count == 0:
            raise VmError("MVU_PROCESSOR_INVALID", "the declaration registers no COMMAND_PARSED")

    # ------------------------------------------------------------------ internals

    def _call(self, name: str, *args: Any) -> Any:
        function = self._context.eval(f"__innkeeperMvu.{name}")
        return function(*args)

    def _drain(self) -> int:
        jobs = 0
        while self._context.execute_pending_job():
            jobs += 1
            if jobs > MAX_INIT_JOBS:
                raise VmError("MVU_PROCESSOR_FAILED", "the declaration keeps scheduling work")
            if time.thread_time() - self._started > INIT_BUDGET_SECONDS:
                raise VmError(
                    "MVU_PROCESSOR_TIMEOUT", "the declaration's initialization overran 1 s"
                )
        return jobs

    def _settled_init(self) -> str | None:
        self._context.eval(
            "globalThis.__innkeeperInitResult = 'pending';"
            "__innkeeperInit.then((v) => { globalThis.__innkeeperInitResult = v; });"
        )
        self._drain()
        value = self._context.get("__innkeeperInitResult")
        if value == "pending":
            return "its initialization never finished"
        return value if isinstance(value, str) else None

    # ------------------------------------------------------------------ API

    def rejected_async(self) -> bool:
        """Whether the declaration registered (or a listener returned) something async."""
        return bool(self._call("rejectedAsync"))

    def memory_bytes(self) -> int:
        """Bytes the VM's allocator holds."""
        return int(self._context.memory()["malloc_size"])

    def dispatch(self, call: Dispatch) -> list[Any]:
        """Run the ``COMMAND_PARSED`` listeners; the command list they leave, as plain JSON.

        A VM that failed an entry is :attr:`broken` (its state is unknown) and must be replaced.
        """
        try:
            raw = self._call(
                "dispatch",
                json.dumps(call.variables, ensure_ascii=False),
                json.dumps([v.to_json() for v in call.commands], ensure_ascii=False),
                call.message_content,
                None if call.gate is None else json.dumps(call.gate, ensure_ascii=False),
            )
            if self._context.execute_pending_job():
                # One job ran (within its own entry budget); the VM is discarded with the rest.
                raise VmError("MVU_PROCESSOR_ASYNC", "a COMMAND_PARSED listener scheduled work")
        except quickjs.JSException as exc:
            self.broken = True
            if self.rejected_async():
                raise VmError(
                    "MVU_PROCESSOR_ASYNC", "a COMMAND_PARSED listener returned a promise"
                ) from None
            raise _failure(exc) from None
        except VmError:
            self.broken = True
            raise
        if not isinstance(raw, str):
            raise VmError("MVU_PROCESSOR_OUTPUT_REJECTED", "the listeners left no command list")
        out = json.loads(raw)
        assert isinstance(out, list)
        return out


def views_of(output: list[Any]) -> list[MvuCommandView]:
    """The command views a dispatch returned; :class:`VmError` for anything else."""
    views: list[MvuCommandView] = []
    for item in output:
        if not isinstance(item, dict):
            raise VmError("MVU_PROCESSOR_OUTPUT_REJECTED", "a command is not an object")
        kind, args = item.get("type"), item.get("args")
        full, reason = item.get("full_match"), item.get("reason")
        if (
            not isinstance(kind, str)
            or not isinstance(args, list)
            or not all(isinstance(a, str) for a in args)
            or not isinstance(full, str)
            or not isinstance(reason, str)
        ):
            raise VmError(
                "MVU_PROCESSOR_OUTPUT_REJECTED",
                "a command must keep {type, args, full_match, reason} as strings",
            )
        views.append(MvuCommandView(kind, tuple(args), full, reason))
    return views
