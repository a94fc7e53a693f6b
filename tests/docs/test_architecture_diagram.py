"""docs/architecture.md draws the Tavern plugin's tiers as tools/gen_architecture.py reads them."""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def gen() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gen_architecture", REPO / "tools" / "gen_architecture.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_tier_diagram_is_generated_from_the_package(gen: ModuleType) -> None:
    doc = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert doc.count(gen.BEGIN) == 1 and doc.count(gen.END) == 1
    block = doc[doc.index(gen.BEGIN) : doc.index(gen.END) + len(gen.END)]
    assert block == gen.render(), "stale: run uv run --no-sync python tools/gen_architecture.py"


def _write(path: Path, text: str = "") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_tiers_members_and_arrows_come_from_the_tree(gen: ModuleType, tmp_path: Path) -> None:
    source = tmp_path / "innkeeper_tavern"
    _write(source / "__init__.py", '"""The bundle."""\n')
    _write(source / "plugin.py", "from innkeeper_tavern.face.routes import install\n")
    _write(source / "face" / "__init__.py", '"""Every route and CLI. More text."""\n')
    _write(source / "face" / "routes" / "__init__.py", "from ...features.play import x\n")
    _write(source / "face" / "cli.py", "import innkeeper_tavern.pure.formats\n")
    _write(source / "features" / "__init__.py", '"""Capabilities."""\n')
    _write(
        source / "features" / "play" / "__init__.py",
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from innkeeper_tavern.face import cli\n"
        "from ...pure.formats import card\n",
    )
    _write(source / "pure" / "__init__.py", '"""No I/O."""\n')
    _write(source / "pure" / "formats" / "__init__.py")
    _write(source / "pure" / "formats" / "card.py")
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        "[[tool.importlinter.contracts]]\n"
        'name = "tiers"\ntype = "layers"\ncontainers = ["innkeeper_tavern"]\n'
        'layers = ["face", "features", "(state)", "pure"]\n',
        encoding="utf-8",
    )
    text = gen.render(source, pyproject)
    assert gen.layers(pyproject) == ["face", "features", "state", "pure"]
    lines = [line.strip() for line in text.splitlines()]
    # Tiers in contract order (the absent optional one left out), top-level modules first.
    subgraphs = [line.split("[", 1)[0] for line in lines if line.startswith("subgraph ")]
    assert subgraphs == ["subgraph top", "subgraph face", "subgraph features", "subgraph pure"]
    assert 'subgraph face["face: Every route and CLI"]' in lines
    assert 'face_routes_["routes/"]' in lines and 'face_cli_py["cli.py"]' in lines
    assert 'top_plugin_py["plugin.py"]' in lines
    # Run-time imports only: features → face is under TYPE_CHECKING.
    arrows = [line for line in lines if "-->" in line and not line.startswith("<!--")]
    assert arrows == ["top --> face", "face --> features", "face --> pure", "features --> pure"]


def test_without_a_layers_contract_the_package_is_one_group(
    gen: ModuleType, tmp_path: Path
) -> None:
    source = tmp_path / "innkeeper_tavern"
    _write(source / "__init__.py", '"""The bundle."""\n')
    _write(source / "worldbook" / "__init__.py")
    _write(source / "cli.py")
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text("[tool.ruff]\n", encoding="utf-8")
    lines = [line.strip() for line in gen.render(source, pyproject).splitlines()]
    assert 'subgraph innkeeper_tavern["innkeeper_tavern: The bundle"]' in lines
    assert 'innkeeper_tavern_worldbook_["worldbook/"]' in lines
    assert not [line for line in lines if "-->" in line and not line.startswith("<!--")]


def test_a_stale_diagram_is_reported(gen: ModuleType) -> None:
    page = f"# A\n\n{gen.BEGIN}\nold\n{gen.END}\n\nafter\n"
    assert gen.rewrite(page, "NEW") == "# A\n\nNEW\n\nafter\n"
    with pytest.raises(SystemExit):
        gen.rewrite("# no markers\n", "NEW")


_CLASS_CALL = re.compile(r"\b(?P<cls>[A-Z]\w*)\.(?P<attr>\w+)\(")
_FUNCTION_CALL = re.compile(r"(?<![\w.])(?P<name>[a-z_]\w*)\(")
SOURCES = ("core/src", "hostapi/src", "plugins")


def _code_index() -> tuple[dict[str, tuple[set[str], list[str]]], set[str]]:
    """Every class (its own defs and base names) and every function name of the sources."""
    classes: dict[str, tuple[set[str], list[str]]] = {}
    functions: set[str] = set()
    for root in SOURCES:
        for path in (REPO / root).rglob("*.py"):
            if ".venv" in path.parts or "tests" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ClassDef):
                    own, bases = classes.setdefault(node.name, (set(), []))
                    own.update(
                        n.name
                        for n in node.body
                        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
                    )
                    bases.extend(b.id for b in node.bases if isinstance(b, ast.Name))
                elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    functions.add(node.name)
    return classes, functions


def _has_method(classes: dict[str, tuple[set[str], list[str]]], cls: str, attr: str) -> bool:
    seen: set[str] = set()
    todo = [cls]
    while todo:
        name = todo.pop()
        if name in seen or name not in classes:
            continue
        seen.add(name)
        own, bases = classes[name]
        if attr in own:
            return True
        todo.extend(bases)
    return False


def test_the_turn_sequence_names_real_code() -> None:
    doc = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    start = doc.index("```mermaid\nsequenceDiagram")
    diagram = doc[start : doc.index("```", start + 3)]
    classes, functions = _code_index()
    named = [(m["cls"], m["attr"]) for m in _CLASS_CALL.finditer(diagram)]
    called = [m["name"] for m in _FUNCTION_CALL.finditer(diagram)]
    assert len(named) >= 15 and len(called) >= 4
    missing = [f"{c}.{a}()" for c, a in named if not _has_method(classes, c, a)]
    missing += [f"{n}()" for n in called if n not in functions]
    assert not missing, f"the turn sequence names code that does not exist: {missing}"
