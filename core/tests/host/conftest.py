"""Helpers for host tests: write small plugins into temporary drop-in folders."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

PluginWriter = Callable[[str, str], Path]


@pytest.fixture
def write_plugin(tmp_path: Path) -> PluginWriter:
    """``write_plugin(plugin_id, source)`` writes a drop-in plugin folder and returns its path."""

    def write(plugin_id: str, source: str) -> Path:
        folder = tmp_path / "plugins" / plugin_id
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "__init__.py").write_text(textwrap.dedent(source))
        return folder

    return write
