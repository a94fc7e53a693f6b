"""Command-line extension point: plugins add ``innkeeper <command>`` subcommands.

Declare an entry point in the group ``innkeeper.commands``; its name is the command and its
value a function ``main(argv, env) -> int``::

    [project.entry-points."innkeeper.commands"]
    import = "innkeeper_tavern.cli:import_main"

``argv`` holds the arguments after the command name (the host has already consumed
``--config FILE`` and ``--data-dir DIR`` wherever they appear). ``env`` says where the host keeps
its data and where a running server would listen, so a command can work offline on the data
directory or talk to the server.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .models import Model

#: The entry-point group the host reads commands from.
COMMAND_GROUP = "innkeeper.commands"


class CommandEnvironment(Model, frozen=True):
    """What a plugin command knows about the host it belongs to."""

    data_dir: str
    base_url: str
    plugin_config: Mapping[str, Mapping[str, Any]] = {}

    def plugin_data_dir(self, plugin_id: str) -> Path:
        """The same folder ``ctx.data_dir`` gives plugin ``plugin_id`` inside the server."""
        return Path(self.data_dir) / "plugins" / plugin_id


CommandMain = Callable[[list[str], CommandEnvironment], int]
