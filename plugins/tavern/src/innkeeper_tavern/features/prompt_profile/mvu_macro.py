"""``{{format_message_variable::stat_data}}`` in activated world-book entries.

`docs/contract/mvu.md#world-book-macro`: an activated entry
containing the macro expands at the entry's position; after the MVU prompt-use checks it renders
YAML with every object key starting with ``$`` removed (recursively). Macro characters in the
values stay literal, multiline values inherit the indentation of the line the macro stands on,
inactive entries and entries without the macro never read MVU, and a denied or unavailable
dependency stops assembly (no raw-read fallback).

The macro engine expands the macro to a private marker while the world-book engine activates
entries (so the marker takes part in matching-free positions only and nothing reads MVU yet);
after activation, :func:`expand_mvu_markers` reads the state once — only if an activated entry
holds a marker — and replaces each marker with the indented YAML. Values are inserted after macro
expansion, so ``{{...}}`` inside them is never expanded.
"""

from __future__ import annotations

import io
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any, Final

from ruamel.yaml import YAML

from innkeeper_hostapi import PluginContext
from innkeeper_hostapi.mvu import TAVERN_MVU
from innkeeper_tavern.features.prompt_render import LoreEntry

#: The macro name, as the macro engine sees it (lower case).
MACRO_NAME: Final = "format_message_variable"
# Supplementary private-use code points: the macro engine uses some BMP ones for itself.
_OPEN: Final = "\U000f0100mvu:"
_CLOSE: Final = "\U000f0101"
_MARKER: Final = re.compile("\U000f0100mvu:([^\U000f0101]*)\U000f0101")
#: docs/contract/mvu.md#world-book-macro: the usage and consumer adapter of the lore macro's reads.
WORLD_BOOK_USAGE: Final = "world-book-variable"
WORLD_BOOK_CONSUMER: Final = "tavern.world-books"
#: Longest variable path a marker may name (characters).
MAX_PATH_CHARS: Final = 256


class MvuDependencyUnavailable(Exception):
    """The MVU state an activated entry needs is denied, missing or changed while assembling."""


async def resolve_prompt_state(
    ctx: PluginContext,
    session_id: str | None,
    turn: int | None,
    consumer: Mapping[str, str] | None,
    leases: list[Callable[[], bool]],
) -> Mapping[str, Any] | None:
    """The session's MVU state for prompt use: the turn's durable checkpoint when sending, the
    current state for a preview — the whole answer (``id``, ``revision``, ``configRevision``,
    ``content`` a mapping). ``consumer`` is the ``resolvePromptDependency`` caller
    (:func:`world_book_consumer`); ``None`` is the Tavern's own ``tavern.mvu/state`` request
    source, whose consumer the service fixes. The read's ``checkCurrent`` lease is appended to
    ``leases`` (recheck it after the last await). ``None`` when there is no service, no
    session, or the read is denied/unavailable."""
    service = ctx.get_optional(TAVERN_MVU)
    if service is None or not session_id:
        return None
    event: dict[str, Any] = {}
    if turn is not None:
        event["turn"] = turn
    scope = {"sessionId": session_id}
    if consumer is not None:
        event["usage"] = WORLD_BOOK_USAGE
        event["consumer"] = dict(consumer)
        result = await service.resolve_prompt_dependency(scope=scope, event=event)
    else:
        own = getattr(service, "resolve_request_source_state", None)
        if own is None:
            return None  # another tavernMvu: the request source is the Tavern's own
        result = await own(scope=scope, event=event)
    if result is None:
        return None
    leases.append(result["checkCurrent"])
    return result if isinstance(result.get("content"), Mapping) else None


def world_book_consumer(book_id: str) -> dict[str, str]:
    """The ``resolvePromptDependency`` consumer of the lore macro in book ``book_id``."""
    return {"adapterId": WORLD_BOOK_CONSUMER, "id": book_id}


def marker(args: list[str]) -> str:
    """The macro function: ``{{format_message_variable::stat_data}}`` → a private marker."""
    path = "::".join(args).strip()[:MAX_PATH_CHARS]
    return f"{_OPEN}{path}{_CLOSE}"


def has_marker(text: str) -> bool:
    return _OPEN in text


def strip_dollar_keys(value: Any) -> Any:
    """A copy of ``value`` without object keys starting with ``$`` (at any depth)."""
    if isinstance(value, Mapping):
        return {
            k: strip_dollar_keys(v)
            for k, v in value.items()
            if not (isinstance(k, str) and k.startswith("$"))
        }
    if isinstance(value, list):
        return [strip_dollar_keys(v) for v in value]
    return value


def to_yaml(value: Any) -> str:
    """Block-style YAML of a JSON-like value, keys in their order, Unicode kept."""
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.allow_unicode = True
    yaml.width = 4096
    yaml.sort_base_mapping_type_on_output = False  # type: ignore[assignment]
    out = io.StringIO()
    yaml.dump(value, out)
    text = out.getvalue()
    if text.endswith("\n...\n"):  # a bare scalar document
        text = text[: -len("...\n")]
    return text.rstrip("\n")


def _lookup(variables: Mapping[str, Any], path: str) -> Any:
    node: Any = variables
    for part in filter(None, path.split(".")):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def _expand(text: str, variables: Mapping[str, Any]) -> str:
    out: list[str] = []
    last = 0
    for match in _MARKER.finditer(text):
        out.append(text[last : match.start()])
        line_start = text.rfind("\n", 0, match.start()) + 1
        line = text[line_start : match.start()]
        indent = line[: len(line) - len(line.lstrip(" \t"))]
        value = _lookup(variables, match.group(1))
        rendered = "" if value is None else to_yaml(strip_dollar_keys(value))
        out.append(rendered.replace("\n", "\n" + indent))
        last = match.end()
    out.append(text[last:])
    return "".join(out)


async def expand_mvu_markers(
    lore: tuple[LoreEntry, ...],
    read: Callable[[str], Awaitable[Mapping[str, Any] | None]],
) -> tuple[LoreEntry, ...]:
    """Replace the markers of activated entries with the session's variables as YAML.

    ``read(book_id)`` is called at most once, and only when an entry holds a marker, with the
    world book of the first such entry (the read's consumer); ``None`` (denied, no state)
    raises :class:`MvuDependencyUnavailable`.
    """
    first = next((entry for entry in lore if has_marker(entry.content)), None)
    if first is None:
        return lore
    variables = await read(first.resource_id)
    if variables is None:
        raise MvuDependencyUnavailable(
            "an activated world-book entry needs MVU variables that are denied or unavailable"
        )
    return tuple(
        replace(entry, content=_expand(entry.content, variables))
        if has_marker(entry.content)
        else entry
        for entry in lore
    )
