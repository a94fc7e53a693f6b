"""Where plugins come from: installed entry points and drop-in folders."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Final

ENTRY_POINT_GROUP: Final = "innkeeper.plugins"
DROP_IN_NAMESPACE: Final = "innkeeper_plugins"
#: Ids that would collide with the host's own import names.
RESERVED_IDS: Final = frozenset({"core", "hostapi", "plugins", "host"})


@dataclass(frozen=True, slots=True)
class PluginSource:
    """How to import one plugin.

    ``target`` is ``module`` or ``module:attribute`` for installed plugins; for a drop-in folder
    it is the folder path and the module is ``innkeeper_plugins.<id>``.
    """

    plugin_id: str
    kind: str  # "entry-point" | "drop-in"
    target: str
    dist_name: str | None = None
    version: str = "0"

    @property
    def module_name(self) -> str:
        if self.kind == "drop-in":
            return f"{DROP_IN_NAMESPACE}.{self.plugin_id}"
        return self.target.split(":", 1)[0]

    @property
    def root_module(self) -> str:
        """Every module under this name belongs to the plugin and is purged on reload."""
        if self.kind == "drop-in":
            return self.module_name
        return self.module_name.split(".", 1)[0]


def discover_entry_points() -> list[PluginSource]:
    """Installed plugins, sorted by id for a deterministic load order."""
    found: dict[str, PluginSource] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        dist = ep.dist
        found.setdefault(
            ep.name,
            PluginSource(
                plugin_id=ep.name,
                kind="entry-point",
                target=ep.value,
                dist_name=dist.name if dist else None,
                version=dist.version if dist else "0",
            ),
        )
    return [found[k] for k in sorted(found)]


def discover_drop_ins(folders: list[str]) -> list[PluginSource]:
    """Every sub-folder with an ``__init__.py`` of each folder is a plugin named after it."""
    found: list[PluginSource] = []
    for folder in folders:
        root = Path(folder).expanduser()
        if not root.is_dir():
            continue
        for child in sorted(root.iterdir()):
            if (child / "__init__.py").is_file() and child.name.isidentifier():
                found.append(PluginSource(child.name, "drop-in", str(child.resolve())))
    return found


def import_plugin(source: PluginSource) -> object:
    """Import the plugin object fresh (the caller purged old modules first)."""
    if source.kind == "drop-in":
        return _import_drop_in(source)
    module_name, _, attr = source.target.partition(":")
    obj: object = importlib.import_module(module_name)
    for part in filter(None, attr.split(".")):
        obj = getattr(obj, part)
    return obj


def _import_drop_in(source: PluginSource) -> types.ModuleType:
    if DROP_IN_NAMESPACE not in sys.modules:
        namespace = types.ModuleType(DROP_IN_NAMESPACE)
        namespace.__path__ = []
        sys.modules[DROP_IN_NAMESPACE] = namespace
    folder = Path(source.target)
    spec = importlib.util.spec_from_file_location(
        source.module_name, folder / "__init__.py", submodule_search_locations=[str(folder)]
    )
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import drop-in plugin from {folder}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[source.module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(source.module_name, None)
        raise
    return module


def source_root(source: PluginSource) -> Path | None:
    """The folder holding the plugin's source, if it is editable (not inside site-packages)."""
    if source.kind == "drop-in":
        return Path(source.target)
    module = sys.modules.get(source.root_module)
    file = getattr(module, "__file__", None)
    if file is None:
        # Not imported (it failed to load): find it without running it.
        try:
            spec = importlib.util.find_spec(source.root_module)
        except (ImportError, ValueError):
            return None
        file = spec.origin if spec is not None else None
    if file is None:
        return None
    path = Path(file).resolve()
    folder = path.parent if path.name == "__init__.py" else path
    if any(part in ("site-packages", "dist-packages") for part in folder.parts):
        return None
    return folder


def plugin_modules(root: str) -> dict[str, types.ModuleType]:
    """The loaded modules that belong to ``root`` (the module itself and its submodules)."""
    prefix = root + "."
    return {
        name: module
        for name, module in list(sys.modules.items())
        if name == root or name.startswith(prefix)
    }


def purge_modules(root: str) -> None:
    """Remove ``root`` and its submodules from ``sys.modules`` so the next import is fresh."""
    for name in plugin_modules(root):
        del sys.modules[name]
    importlib.invalidate_caches()


def preflight(folder: Path) -> str | None:
    """Compile every ``.py`` under ``folder`` without running it; the first error, or ``None``."""
    for path in sorted(folder.rglob("*.py")):
        try:
            compile(path.read_bytes(), str(path), "exec", dont_inherit=True)
        except SyntaxError as exc:
            return f"SyntaxError: {exc.msg} ({path.name}, line {exc.lineno})"
        except (OSError, ValueError) as exc:
            return f"{type(exc).__name__}: {exc} ({path.name})"
    return None


class SavedPluginModules:
    """The plugin modules imported now, to put back after a host in this process unloads.

    Unloading or reloading a plugin purges its modules; the process's own imports of them (a
    test's, or the plugin command that started a host in its process) and msgspec/typing
    resolving forward references through ``sys.modules`` must find the same module objects
    afterwards, so whoever starts a full host in-process restores them on close.
    """

    def __init__(self) -> None:
        self.roots = {source.root_module for source in discover_entry_points()}
        self.roots.add(DROP_IN_NAMESPACE)
        self.modules = {
            name: module for root in self.roots for name, module in plugin_modules(root).items()
        }

    def restore(self) -> None:
        """Drop what the host imported fresh and put the saved module objects back."""
        for root in self.roots:
            purge_modules(root)
        sys.modules.update(self.modules)
