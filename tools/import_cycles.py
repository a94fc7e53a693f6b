"""Find import circles among a package's modules, counting only imports that run.

uv run --no-sync python tools/import_cycles.py                      # innkeeper_tavern
uv run --no-sync python tools/import_cycles.py innkeeper_core core/src

An import under ``if TYPE_CHECKING:`` never executes, so it cannot close a circle at run time
and is not counted. The others are counted twice over: the imports a module runs when it is
first imported (module level, including class bodies and ``try``/``if`` blocks) and, separately,
those plus the ones inside functions (deferred imports, which run on the first call). A circle
of the first kind can fail at import time; one of the second kind works only because an import
was deferred, which is how a circle usually hides.

An edge goes to the module named: ``from a.b import c`` points at ``a.b.c`` when that is a
module, else at ``a.b`` (its ``__init__``). The implicit import of parent packages is not an
edge, so a package that re-exports its submodules is not a circle with each of them.
Prints every strongly connected group of two or more modules, one line each, and exits 0.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def modules(package: str, src: Path) -> dict[str, Path]:
    """Every module of ``package`` under ``src``, by dotted name."""
    found: dict[str, Path] = {}
    for path in sorted((src / package).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _imports(
    node: ast.AST, in_function: bool
) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Yield (import node, inside a function) for every import that can run."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            # Only the else branch can run.
            for other in child.orelse:
                yield from _imports_of(other, in_function)
            continue
        yield from _imports_of(child, in_function)


def _imports_of(
    node: ast.AST, in_function: bool
) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    if isinstance(node, ast.Import | ast.ImportFrom):
        yield node, in_function
        return
    nested = in_function or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
    yield from _imports(node, nested)


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base.pop()
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def edges(package: str, src: Path) -> dict[str, dict[str, bool]]:
    """module -> {imported module: only inside functions}."""
    known = modules(package, src)
    graph: dict[str, dict[str, bool]] = {name: {} for name in known}
    for name, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        is_package = path.name == "__init__.py"
        for node, in_function in _imports(tree, False):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = _resolve(name, is_package, node)
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    targets.append(sub if sub in known else base)
            for target in targets:
                while target and target not in known:
                    target = target.rpartition(".")[0]
                if not target or target == name:
                    continue
                # An edge is "function only" when no module-level import makes it.
                graph[name][target] = graph[name].get(target, True) and in_function
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of two or more modules (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                group: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return sorted(groups)


def main(argv: list[str]) -> int:
    package = argv[0] if argv else "innkeeper_tavern"
    src = ROOT / (argv[1] if len(argv) > 1 else "plugins/tavern/src")
    graph = edges(package, src)
    module_level = {name: {t for t, late in out.items() if not late} for name, out in graph.items()}
    run_time = {name: set(out) for name, out in graph.items()}
    for title, view in (("module level", module_level), ("module level + in functions", run_time)):
        found = cycles(view)
        print(f"{title}: {len(found)} circle(s)")
        for group in found:
            print("  " + " <-> ".join(group))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
