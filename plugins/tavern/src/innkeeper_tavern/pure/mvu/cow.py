"""A copy-on-write view of one JSON tree, used as the private candidate of a reply.

The base tree is never mutated. The first write below a container copies that container (one
shallow copy per container on the path, once per reply); later writes through the same path
reuse the copies. A reply with many commands therefore costs the size of the paths it touches,
not the size of the state per command (issue 7: the benchmark compares this with a deep copy
per command).
"""

from __future__ import annotations

from .jsvalue import UNDEFINED, Json
from .limits import Budget
from .paths import PROTOTYPE_KEYS, array_index


class CowTree:
    """Private candidate over a base JSON tree."""

    __slots__ = ("_owned", "budget", "root")

    def __init__(self, root: Json, budget: Budget) -> None:
        self.root = root
        self.budget = budget
        # id -> object: holding the object keeps its id from being reused while registered.
        self._owned: dict[int, Json] = {}

    # ------------------------------------------------------------------ reads
    def lookup(self, segments: list[str]) -> Json:
        """The value at ``segments`` or :data:`UNDEFINED` (lodash ``get`` on JSON only)."""
        node = self.root
        for segment in segments:
            self.budget.charge()
            if isinstance(node, dict):
                if segment in PROTOTYPE_KEYS:
                    return UNDEFINED
                node = node.get(segment, UNDEFINED)
            elif isinstance(node, list):
                index = array_index(segment)
                if index is None or index >= len(node):
                    return UNDEFINED
                node = node[index]
            else:
                return UNDEFINED
            if node is UNDEFINED:
                return UNDEFINED
        return node

    def exists(self, segments: list[str]) -> bool:
        """lodash ``has``: every segment names an own key or an in-range index."""
        return self.lookup(segments) is not UNDEFINED

    # ------------------------------------------------------------------ writes
    def is_owned(self, value: Json) -> bool:
        """True when ``value`` is a container this candidate created (safe to mutate)."""
        return id(value) in self._owned and self._owned[id(value)] is value

    def adopt(self, value: Json) -> Json:
        """Register the containers of a fresh value as owned and return it."""
        stack = [value]
        while stack:
            node = stack.pop()
            if isinstance(node, dict):
                self.budget.charge()
                self._owned[id(node)] = node
                stack.extend(v for v in node.values() if isinstance(v, dict | list))
            elif isinstance(node, list):
                self.budget.charge()
                self._owned[id(node)] = node
                stack.extend(v for v in node if isinstance(v, dict | list))
        return value

    def _copy(self, container: Json) -> Json:
        self.budget.charge(len(container) // 16 + 1)
        copied: Json = dict(container) if isinstance(container, dict) else list(container)
        self._owned[id(copied)] = copied
        return copied

    def writable(self, segments: list[str]) -> Json:
        """The container at ``segments``, copied along the path if needed (must exist)."""
        if not isinstance(self.root, dict | list):
            raise TypeError("root is not a container")
        if not self.is_owned(self.root):
            self.root = self._copy(self.root)
        node = self.root
        for segment in segments:
            self.budget.charge()
            if isinstance(node, dict):
                child = node[segment]
                if isinstance(child, dict | list) and not self.is_owned(child):
                    child = self._copy(child)
                    node[segment] = child
            elif isinstance(node, list):
                index = array_index(segment)
                assert index is not None
                child = node[index]
                if isinstance(child, dict | list) and not self.is_owned(child):
                    child = self._copy(child)
                    node[index] = child
            else:  # pragma: no cover - callers check the path first
                raise TypeError("path runs through a primitive")
            node = child
        if not isinstance(node, dict | list):
            raise TypeError("target is not a container")
        return node

    def replace_root(self, value: Json) -> None:
        """Replace the whole tree with a fresh value."""
        self.root = self.adopt(value)

    def adopt_shallow(self, value: Json) -> Json:
        """Register only the top container of ``value`` (its children may be shared)."""
        if isinstance(value, dict | list):
            self._owned[id(value)] = value
        return value

    def put(self, segments: list[str], value: Json, *, fresh: bool = True) -> None:
        """Write ``value`` at an existing key/index or a new object key (parent must exist).

        ``fresh`` values (parsed from the reply, cloned) become owned; others (a moved subtree
        of the base) stay shared and are copied on their next write.
        """
        if not segments:
            if not fresh:
                raise ValueError("a shared value cannot become the root")
            self.replace_root(value)
            return
        parent = self.writable(segments[:-1])
        last = segments[-1]
        if fresh:
            self.adopt(value)
        if isinstance(parent, dict):
            parent[last] = value
        else:
            index = array_index(last)
            assert index is not None and index < len(parent)
            parent[index] = value
