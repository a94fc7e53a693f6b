"""Tools and commands the host itself provides, each off unless configured (``[tools]``).

Only the dice roller exists: dangerous tools (shell, file writes) are not part of the default
install. A tool that is always on would change every request's ``tools``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from innkeeper_core.config import ToolsConfig
from innkeeper_core.http.host_routes import HOST_OWNER
from innkeeper_core.plugins.context import HostRegistries
from innkeeper_core.tools.dice import DICE_DESCRIPTION, DICE_SCHEMA, DiceRoller

__all__ = ["install_builtin_tools"]


def install_builtin_tools(
    registries: HostRegistries, config: ToolsConfig, roller: DiceRoller | None = None
) -> Callable[[], Awaitable[None]]:
    """Register the configured built-ins as owner ``host``; returns their remover."""
    removers: list[Callable[[], Awaitable[None] | None]] = []
    if config.dice:
        dice = roller or DiceRoller()
        tool = registries.tools.add(
            HOST_OWNER,
            "roll",
            DICE_DESCRIPTION,
            DICE_SCHEMA,
            dice.tool,
            risk="read-only",
            timeout_s=None,
        )
        command = registries.commands.add(
            HOST_OWNER, "roll", "Roll dice: /roll 2d6+3", dice.command, "[dice]"
        )
        removers += [
            lambda: registries.tools.remove(tool),
            lambda: registries.commands.remove(command),
        ]

    async def remove() -> None:
        for remover in reversed(removers):
            result = remover()
            if result is not None:
                await result

    return remove
