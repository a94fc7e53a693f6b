"""The host's reloadable route table.

aiohttp freezes its router at start-up, so plugin routes live here, behind one catch-all route
(the maintainers' advice, aiohttp#3238). The table is copy-on-write: ``add`` and removal build a
new immutable trie and swap one reference, so a request resolves against one consistent snapshot
and a reload never mutates a structure under iteration.

Templates use aiohttp's syntax with whole-segment parameters: ``/a/{id}`` or ``/a/{id:\\d+}``.
Lookup walks the trie one segment at a time (static children before parameters), so its cost
depends on the path's depth, not on the number of registered routes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import quote, unquote

from innkeeper_hostapi import Handler, RegistrationConflict
from innkeeper_hostapi.structure import DEFAULT_LIMITS, StructureLimits

METHODS: Final = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
_PARAM = re.compile(r"^\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::(?P<regex>.+))?\}$")


class TemplateError(ValueError):
    """A route template is malformed."""


@dataclass(frozen=True, slots=True)
class Param:
    """A whole-segment path parameter."""

    name: str
    pattern: re.Pattern[str] | None

    @property
    def shape(self) -> str:
        return "{" + (self.pattern.pattern if self.pattern else "") + "}"


Segment = str | Param


def parse_template(template: str) -> tuple[Segment, ...]:
    """Split ``template`` into static segments and :class:`Param` segments."""
    if not template.startswith("/"):
        raise TemplateError(f"route template must start with '/': {template!r}")
    segments: list[Segment] = []
    names: set[str] = set()
    for raw in template[1:].split("/"):
        m = _PARAM.match(raw)
        if m is None:
            if "{" in raw or "}" in raw:
                raise TemplateError(f"parameters must fill a whole segment: {template!r}")
            segments.append(raw)
            continue
        name = m["name"]
        if name in names:
            raise TemplateError(f"duplicate parameter {name!r} in {template!r}")
        names.add(name)
        regex = m["regex"]
        try:
            pattern = re.compile(regex) if regex else None
        except re.error as exc:
            raise TemplateError(f"bad parameter pattern in {template!r}: {exc}") from None
        segments.append(Param(name, pattern))
    return tuple(segments)


@dataclass(frozen=True, slots=True, eq=False)
class RouteEntry:
    """One registered route. Compared by identity: removal takes back exactly this entry."""

    method: str
    template: str
    handler: Handler
    owner: str
    name: str | None
    max_body: int
    accepts: frozenset[str]
    segments: tuple[Segment, ...]
    #: Guards the host applies to a JSON body before the handler runs.
    json_limits: StructureLimits = DEFAULT_LIMITS

    @property
    def shape(self) -> str:
        """The template with parameter names erased: two routes of one shape would collide."""
        return "/" + "/".join(s if isinstance(s, str) else s.shape for s in self.segments)


@dataclass(slots=True)
class _Node:
    static: dict[str, _Node] = field(default_factory=dict)
    params: list[tuple[Param, _Node]] = field(default_factory=list)
    methods: dict[str, RouteEntry] = field(default_factory=dict)


def _build(entries: Iterable[RouteEntry]) -> _Node:
    root = _Node()
    for entry in entries:
        node = root
        for seg in entry.segments:
            if isinstance(seg, str):
                node = node.static.setdefault(seg, _Node())
                continue
            for param, child in node.params:
                if param.shape == seg.shape:
                    node = child
                    break
            else:
                child = _Node()
                node.params.append((seg, child))
                node = child
        node.methods[entry.method] = entry
    return root


@dataclass(frozen=True, slots=True)
class Match:
    """A resolved route and its decoded path parameters."""

    entry: RouteEntry
    params: dict[str, str]


@dataclass(frozen=True, slots=True)
class MethodNotAllowed:
    """The path exists but not for this method."""

    allowed: tuple[str, ...]


class RouteTable:
    """Copy-on-write table of plugin (and host) routes with reverse routing."""

    def __init__(self) -> None:
        self._entries: tuple[RouteEntry, ...] = ()
        self._root = _Node()
        self._names: dict[str, RouteEntry] = {}
        self._reserved: tuple[tuple[str, str], ...] = ()

    # -- registration ------------------------------------------------------------------------
    def reserve_prefix(self, prefix: str, owner: str) -> None:
        """Only ``owner`` may register routes whose template starts with ``prefix``."""
        self._reserved = (*self._reserved, (prefix, owner))

    def add(
        self,
        method: str,
        template: str,
        handler: Handler,
        *,
        owner: str,
        name: str | None = None,
        max_body: int,
        accepts: Iterable[str],
        json_limits: StructureLimits = DEFAULT_LIMITS,
    ) -> RouteEntry:
        """Register a route; a duplicate method+shape or name raises ``RegistrationConflict``."""
        method = method.upper()
        if method not in METHODS:
            raise TemplateError(f"unsupported HTTP method {method!r}")
        for prefix, reserved_owner in self._reserved:
            if template.startswith(prefix) and owner != reserved_owner:
                raise RegistrationConflict("route prefix", prefix, reserved_owner, owner)
        entry = RouteEntry(
            method=method,
            template=template,
            handler=handler,
            owner=owner,
            name=name,
            max_body=max_body,
            accepts=frozenset(t.lower() for t in accepts),
            segments=parse_template(template),
            json_limits=json_limits,
        )
        shape = entry.shape
        for other in self._entries:
            if other.method == method and other.shape == shape:
                raise RegistrationConflict("route", f"{method} {template}", other.owner, owner)
        if name is not None and name in self._names:
            raise RegistrationConflict("route name", name, self._names[name].owner, owner)
        self._publish((*self._entries, entry))
        return entry

    def remove(self, entry: RouteEntry) -> bool:
        """Remove exactly ``entry`` (by identity); ``False`` if it is no longer present."""
        remaining = tuple(e for e in self._entries if e is not entry)
        if len(remaining) == len(self._entries):
            return False
        self._publish(remaining)
        return True

    def _publish(self, entries: tuple[RouteEntry, ...]) -> None:
        root = _build(entries)
        names = {e.name: e for e in entries if e.name is not None}
        # One assignment each; readers take ``_root`` once per request.
        self._entries, self._root, self._names = entries, root, names

    # -- reading -------------------------------------------------------------------------------
    @property
    def entries(self) -> tuple[RouteEntry, ...]:
        """All registered routes, in registration order."""
        return self._entries

    def owned_by(self, owner: str) -> list[RouteEntry]:
        """The routes ``owner`` still has registered."""
        return [e for e in self._entries if e.owner == owner]

    def resolve(self, method: str, raw_path: str) -> Match | MethodNotAllowed | None:
        """Find the route for ``method`` and the still-encoded ``raw_path``.

        Returns a :class:`Match`, :class:`MethodNotAllowed` (with the ``Allow`` list) or ``None``
        when no route has this path. ``HEAD`` falls back to ``GET``.
        """
        if not raw_path.startswith("/"):
            return None
        parts = [unquote(p) for p in raw_path[1:].split("/")]
        allowed: set[str] = set()
        for node, params in _walk(self._root, parts, 0, {}):
            entry = node.methods.get(method)
            if entry is None and method == "HEAD":
                entry = node.methods.get("GET")
            if entry is not None:
                return Match(entry, params)
            allowed.update(node.methods)
        if not allowed:
            return None
        if "GET" in allowed:
            allowed.add("HEAD")
        return MethodNotAllowed(tuple(sorted(allowed)))

    def url_for(self, name: str, /, **params: str) -> str:
        """Build the path of route ``name``; missing or unknown parameters raise ``KeyError``."""
        entry = self._names.get(name)
        if entry is None:
            raise KeyError(f"no route named {name!r}")
        expected = {s.name for s in entry.segments if isinstance(s, Param)}
        if set(params) != expected:
            raise KeyError(
                f"route {name!r} takes parameters {sorted(expected)}, got {sorted(params)}"
            )
        out: list[str] = []
        for seg in entry.segments:
            if isinstance(seg, str):
                out.append(quote(seg, safe=""))
                continue
            value = params[seg.name]
            if seg.pattern is not None and not seg.pattern.fullmatch(value):
                raise ValueError(f"{value!r} does not match parameter {seg.name!r} of {name!r}")
            out.append(quote(value, safe=""))
        return "/" + "/".join(out)


def _walk(
    node: _Node, parts: list[str], index: int, params: dict[str, str]
) -> Iterator[tuple[_Node, dict[str, str]]]:
    """Yield every leaf matching ``parts[index:]``, static branches first."""
    if index == len(parts):
        if node.methods:
            yield node, params
        return
    part = parts[index]
    child = node.static.get(part)
    if child is not None:
        yield from _walk(child, parts, index + 1, params)
    if not part:
        return  # parameters never match an empty segment
    for param, sub in node.params:
        if param.pattern is None or param.pattern.fullmatch(part):
            yield from _walk(sub, parts, index + 1, {**params, param.name: part})
