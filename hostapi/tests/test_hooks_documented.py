"""docs/hooks.md documents exactly the hook specifications, as generated from them."""

from __future__ import annotations

import importlib.util
import inspect
from pathlib import Path

from innkeeper_hostapi import hookspecs

REPO = Path(__file__).resolve().parents[2]


def test_hooks_doc_is_generated_from_hookspecs() -> None:
    spec = importlib.util.spec_from_file_location(
        "gen_hooks_doc", REPO / "tools" / "gen_hooks_doc.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert (REPO / "docs" / "hooks.md").read_text() == module.render()


def test_every_hookspec_is_documented_and_prefixed() -> None:
    doc = (REPO / "docs" / "hooks.md").read_text()
    names = [n for n, f in inspect.getmembers(hookspecs, inspect.isfunction) if f.__doc__]
    specs = [n for n in names if n.startswith("innkeeper_")]
    assert {"innkeeper_plugin_setup", "innkeeper_host_started"} <= set(specs)
    for name in specs:
        assert f"## `{name}`" in doc
