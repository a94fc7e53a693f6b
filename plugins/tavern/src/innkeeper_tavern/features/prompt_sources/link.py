"""The Tavern plugin's link to the Assembler: a version check at setup, and its sources.

`docs/contract/loader.md#ownership`: the Tavern plugin mounts only beside an installed Assembler
``~1.1.3``, checked against the shared ``dshPromptAssembler.version`` at setup. Here:

- the Assembler is present and its ``version`` is in ``~1.1.3`` (``>=1.1.3 <1.2.0``, no
  prerelease) with source protocol 1 → Tavern mounts and registers its sources
  (:mod:`.sources`) into ``dshPromptSources``;
- the Assembler is present with **any other version or protocol** → Tavern **refuses to mount**
  (:class:`AssemblerIncompatible`, code ``TAVERN_ASSEMBLER_INCOMPATIBLE``, naming both versions);
- the Assembler is **absent** → by default Tavern mounts in compatibility-only mode (no strategy
  can be applied; the compatibility renderer serves every session) and logs
  ``TAVERN_ASSEMBLER_MISSING`` once. ``[plugins.tavern] require_assembler = true`` turns that
  into a refusal, the spec's strict reading. The lenient default exists because the host loads
  plugins one at a time (a test or a tool may load Tavern alone); the default install has the
  Assembler (it is a workspace member, loaded before ``tavern`` by id order).

The Assembler is resolved at setup only to check it; everything else resolves it at call time.
An Assembler loaded (or reloaded) after Tavern emits ``dshPromptSources/ready``: Tavern checks
that generation's version and registers its sources into the new registry, or logs
``TAVERN_ASSEMBLER_INCOMPATIBLE`` and stays compatibility-only (it cannot unmount itself then).
"""

from __future__ import annotations

import re
from typing import Final

from innkeeper_hostapi import PluginContext
from innkeeper_hostapi.assembly import (
    PROMPT_ASSEMBLER,
    PROMPT_SOURCES,
    SOURCE_PROTOCOL,
    SOURCES_READY,
    PromptSourceRegistry,
)

from .mvu_state import TAVERN_MVU_STATE_SOURCE, register_mvu_state_source
from .sources import TAVERN_PROFILE_SOURCE, register_tavern_sources
from .state import strategy_applied

__all__ = [
    "REQUIRED_ASSEMBLER",
    "REQUIRE_ASSEMBLER_OPTION",
    "TAVERN_ASSEMBLER_INCOMPATIBLE",
    "TAVERN_ASSEMBLER_MISSING",
    "AssemblerIncompatible",
    "assembler_compatible",
    "link_assembler",
    "strategy_applied",
]

#: The Assembler versions Tavern mounts beside (`docs/contract/loader.md#ownership`).
REQUIRED_ASSEMBLER: Final = "~1.1.3"
_REQUIRED_BASE: Final = (1, 1, 3)
REQUIRE_ASSEMBLER_OPTION: Final = "require_assembler"
TAVERN_ASSEMBLER_INCOMPATIBLE: Final = "TAVERN_ASSEMBLER_INCOMPATIBLE"
TAVERN_ASSEMBLER_MISSING: Final = "TAVERN_ASSEMBLER_MISSING"
_SEMVER: Final = re.compile(r"^(\d+)\.(\d+)\.(\d+)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$")


class AssemblerIncompatible(RuntimeError):
    """Tavern refuses to mount: the Assembler is missing (when required) or incompatible."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


def assembler_compatible(version: object) -> bool:
    """Whether ``version`` satisfies ``~1.1.3`` (npm semantics, prereleases excluded)."""
    if not isinstance(version, str):
        return False
    match = _SEMVER.match(version)
    if match is None or match.group(4):
        return False
    major, minor, patch = (int(match.group(i)) for i in (1, 2, 3))
    base_major, base_minor, base_patch = _REQUIRED_BASE
    return major == base_major and minor == base_minor and patch >= base_patch


def link_assembler(ctx: PluginContext) -> str | None:
    """Check the Assembler at setup and register Tavern's sources; returns its version, or
    ``None`` in compatibility-only mode. Raises :class:`AssemblerIncompatible` to refuse."""

    async def on_ready(registry: PromptSourceRegistry) -> None:
        found = ctx.get_optional(PROMPT_ASSEMBLER)
        version = getattr(found, "version", None)
        if not assembler_compatible(version) or registry.protocol != SOURCE_PROTOCOL:
            ctx.logger.error(
                "%s: Assembler %r is not %s; Tavern sources not registered",
                TAVERN_ASSEMBLER_INCOMPATIBLE,
                version,
                REQUIRED_ASSEMBLER,
            )
            return
        _register(ctx, registry)

    ctx.on(SOURCES_READY, on_ready)
    assembler = ctx.get_optional(PROMPT_ASSEMBLER)
    if assembler is None:
        if ctx.config.get(REQUIRE_ASSEMBLER_OPTION, False) is True:
            raise AssemblerIncompatible(
                TAVERN_ASSEMBLER_MISSING,
                f"the Tavern plugin requires the Assembler {REQUIRED_ASSEMBLER} "
                "(service dshPromptAssembler); install and enable innkeeper-assembler, or set "
                f"[plugins.tavern] {REQUIRE_ASSEMBLER_OPTION} = false",
            )
        ctx.logger.warning(
            "%s: no Assembler; mounting in compatibility-only mode", TAVERN_ASSEMBLER_MISSING
        )
        return None
    version = getattr(assembler, "version", None)
    protocol = getattr(assembler, "protocol", None)
    if not assembler_compatible(version) or protocol != SOURCE_PROTOCOL:
        raise AssemblerIncompatible(
            TAVERN_ASSEMBLER_INCOMPATIBLE,
            f"the Tavern plugin requires the Assembler {REQUIRED_ASSEMBLER} with source protocol "
            f"{SOURCE_PROTOCOL}; the installed dshPromptAssembler is version {version!r}, "
            f"protocol {protocol!r}",
        )
    _register(ctx, ctx.get(PROMPT_SOURCES))
    return str(version)


def _register(ctx: PluginContext, registry: PromptSourceRegistry) -> None:
    if registry.get(TAVERN_PROFILE_SOURCE) is None:
        register_tavern_sources(ctx, registry)
    if registry.get(TAVERN_MVU_STATE_SOURCE) is None:
        register_mvu_state_source(ctx, registry)
