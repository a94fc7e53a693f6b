"""`[initvar]` loading: world-book entries to the initial ``stat_data`` (docs/mvu.md#initvar).

An entry is used when its comment contains ``[initvar]`` (any letter case), enabled or not. Its
content may be wrapped in ``<initvar>…</initvar>`` lines and/or a code fence; it is parsed as
YAML 1.2 or JSON5 (:func:`.textparse.parse_string`). Entries of one book deep-merge in order
(arrays replace); books combine shallowly, and keys already present win.

docs/contract/mvu.md#identity: a parse failure never overwrites stored content and stays visible
as ``sourceError``, executing nothing — so unlike MVU,
which repairs or skips a broken entry, a broken entry here fails the whole initialization with
:class:`~.limits.MvuSyntaxError` naming the book and entry.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from .jsvalue import Json, clone
from .limits import (
    MAX_DOCUMENT_CHARS,
    Budget,
    MvuBudgetError,
    MvuFatalError,
    MvuSyntaxError,
    check_variables,
)
from .native_schema import build_schema, empty_schema, strip_metadata
from .paths import PROTOTYPE_KEYS
from .textparse import ParseError, parse_string

#: The marker an entry's comment must contain (compared case-insensitively).
INITVAR_MARKER: Final = "[initvar]"

_XML_WRAP: Final = re.compile(r"^\s*<initvar>\s*\n(.*)\n\s*</initvar>\s*$", re.DOTALL | re.I)
_FENCE_LINE: Final = re.compile(r"^\s*```.*$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class InitEntry:
    """One world-book entry as the loader sees it (comment/title and content)."""

    comment: str
    content: str
    enabled: bool = True


@dataclass(slots=True)
class InitvarResult:
    """Merged raw ``stat_data`` ($meta and markers still present) and the books now loaded."""

    stat_data: dict[str, Json]
    initialized_lorebooks: dict[str, Json]
    updated: bool
    entries_used: list[tuple[str, int]] = field(default_factory=list)


def is_initvar_entry(entry: InitEntry) -> bool:
    """True when the entry's comment carries the `[initvar]` marker."""
    return INITVAR_MARKER in entry.comment.lower()


def unwrap_entry(content: str) -> str:
    """Remove an ``<initvar>`` line pair, then a code fence (first to last fence line)."""
    match = _XML_WRAP.match(content)
    text = match.group(1) if match else content
    fences = list(_FENCE_LINE.finditer(text))
    if len(fences) >= 2:
        text = text[fences[0].end() : fences[-1].start()]
    elif len(fences) == 1 and text.lstrip().startswith("```"):
        text = text[fences[0].end() :]
    return text


def deep_merge_replace_arrays(base: Json, override: Json) -> Json:
    """Merge ``override`` into a copy of ``base``: objects by key, anything else replaces."""
    if isinstance(base, dict) and isinstance(override, dict):
        out = dict(base)
        for key, value in override.items():
            out[key] = deep_merge_replace_arrays(out[key], value) if key in out else clone(value)
        return out
    return clone(override)


def load_initvar(
    books: Sequence[tuple[str, Sequence[InitEntry]]],
    *,
    existing: Mapping[str, Json] | None = None,
    initialized: Mapping[str, Json] | None = None,
    substitute: Callable[[str], str] | None = None,
    budget: Budget | None = None,
) -> InitvarResult:
    """MVU ``loadInitVarData``: merge the `[initvar]` entries of books not loaded before.

    ``substitute`` performs macro substitution on each entry (the identity when omitted).
    Raises :class:`MvuSyntaxError` for an entry that is not a YAML/JSON5 object and
    :class:`MvuBudgetError` when a budget is exceeded.
    """
    budget = budget if budget is not None else Budget()
    stat: dict[str, Json] = dict(existing or {})
    loaded: dict[str, Json] = dict(initialized or {})
    used: list[tuple[str, int]] = []
    updated = False
    for book_name, entries in books:
        if book_name in loaded:
            continue
        loaded[book_name] = []
        updated = True
        merged: Json = {}
        for position, entry in enumerate(entries):
            if not is_initvar_entry(entry):
                continue
            if len(entry.content) > MAX_DOCUMENT_CHARS:
                raise MvuBudgetError(f"[initvar] entry {position} of {book_name!r} is too large")
            text = unwrap_entry(entry.content)
            if substitute is not None:
                text = substitute(text)
            try:
                parsed = parse_string(text, budget)
            except ParseError as exc:
                raise MvuSyntaxError(
                    f"[initvar] entry {position} of {book_name!r} is not YAML or JSON5: {exc}"
                ) from exc
            if parsed is None:
                continue
            if not isinstance(parsed, dict):
                raise MvuSyntaxError(
                    f"[initvar] entry {position} of {book_name!r} must be an object, "
                    f"not {type(parsed).__name__}"
                )
            merged = deep_merge_replace_arrays(merged, parsed)
            used.append((book_name, position))
        assert isinstance(merged, dict)
        stat = {**merged, **stat}
    return InitvarResult(stat, loaded, updated, used)


def initialize_variables(
    stat_data: Mapping[str, Json],
    *,
    old_schema: Json = None,
    initialized_lorebooks: Mapping[str, Json] | None = None,
    budget: Budget | None = None,
) -> dict[str, Json]:
    """Build a fresh variables object from raw `[initvar]` data (docs/mvu.md#initvar).

    The schema is generated (root ``$meta`` switches copied onto it), then every ``$meta`` key,
    array marker and array-meta element is stripped from ``stat_data``. The result passes the
    per-state budgets (:func:`.limits.check_variables`) or :class:`MvuBudgetError` is raised;
    prototype-style keys (``__proto__``, ``constructor``, ``prototype``) raise
    :class:`MvuFatalError` with code ``MVU_UNSAFE_PATH``.
    """
    budget = budget if budget is not None else Budget()
    stack: list[Json] = [dict(stat_data)]
    while stack:
        node = stack.pop()
        budget.charge()
        if isinstance(node, dict):
            bad = PROTOTYPE_KEYS.intersection(node)
            if bad:
                raise MvuFatalError(
                    f"[initvar] data holds the reserved key {sorted(bad)[0]!r}",
                    code="MVU_UNSAFE_PATH",
                )
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    base = old_schema if isinstance(old_schema, dict) else empty_schema()
    schema = build_schema(dict(stat_data), base, budget)
    variables: dict[str, Json] = {
        "stat_data": strip_metadata(dict(stat_data), budget),
        "schema": schema,
        "delta_data": {},
        "initialized_lorebooks": dict(initialized_lorebooks or {}),
    }
    check_variables(variables)
    return variables
