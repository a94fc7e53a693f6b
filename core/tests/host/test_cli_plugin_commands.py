"""``innkeeper <plugin command>``: its own ``--help``, global options before its name, and a closed
stdout that ends the command quietly with status 141."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from innkeeper_core.cli import EXIT_BROKEN_PIPE, main


def test_plugin_command_prints_its_own_help(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--data-dir", str(tmp_path), "import", "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: innkeeper import") and "--dry-run" in out
    assert main(["export", "--help", "--data-dir", str(tmp_path)]) == 0
    assert "sillytavern" in capsys.readouterr().out
    assert main([f"--data-dir={tmp_path}", "export", "nonsense"]) == 2


def test_closed_stdout_ends_quietly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)
    closed = os.fdopen(write_end, "w", buffering=1)
    monkeypatch.setattr(sys, "stdout", closed)
    try:
        assert main(["--data-dir", str(tmp_path), "import", "--help"]) == EXIT_BROKEN_PIPE
    finally:
        closed.close()
