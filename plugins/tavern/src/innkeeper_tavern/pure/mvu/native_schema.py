"""MVU's built-in schema: generation from data, lookup, metadata cleanup and templates.

docs/mvu.md#meta. The schema only governs insert/delete permissions, templates and the
root switches (``strictSet``, ``strictTemplate``, ``concatTemplateArray``); inferred types are
never enforced. Metadata written by card authors (``$meta``, the ``"$__META_EXTENSIBLE__$"``
array marker and ``{"$meta": ..., "$arrayMeta": true}`` elements) feeds the schema and is then
removed from ``stat_data``.

All functions here are pure: they return new values and never mutate their arguments.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from .jsvalue import Json, clone, is_number
from .limits import Budget
from .paths import array_index

#: The key holding per-node metadata in `[initvar]` data and inserted values.
META_KEY: Final = "$meta"
#: The array element marking an array extensible.
EXTENSIBLE_MARKER: Final = "$__META_EXTENSIBLE__$"
#: The flag of an array element that carries array metadata.
ARRAY_META_KEY: Final = "$arrayMeta"
#: Root switches copied from the root ``$meta`` onto the schema.
ROOT_FLAGS: Final = ("strictSet", "strictTemplate", "concatTemplateArray")


def empty_schema() -> dict[str, Json]:
    """The schema of a fresh chat (docs/mvu.md#meta: a closed root object)."""
    return {"type": "object", "properties": {}, "extensible": False}


def _is_array_meta(item: Json) -> bool:
    return isinstance(item, dict) and item.get(ARRAY_META_KEY) is True and META_KEY in item


def _reusable(old_node: dict[str, Json], parent_recursive: bool) -> bool:
    # A node regenerated under a recursive parent gains both flags; reuse only if it has them.
    return not parent_recursive or (
        old_node.get("extensible") is True and old_node.get("recursiveExtensible") is True
    )


def generate_schema(
    data: Json,
    old: Json = None,
    parent_recursive: bool = False,
    budget: Budget | None = None,
    unchanged: Callable[[Json], bool] | None = None,
) -> dict[str, Json]:
    """MVU ``generateSchema``: a schema node for ``data`` inheriting flags from ``old``.

    ``unchanged(container)`` may say that a container is exactly the data ``old`` was generated
    from (an untouched part of the previous state); its old node is then returned as it is
    instead of being rebuilt. Regeneration is idempotent for such nodes, so the result is the
    same as a full rebuild at the cost of the touched paths only.
    """
    if budget is not None:
        budget.charge()
    old_node = old if isinstance(old, dict) else {}
    if (
        unchanged is not None
        and isinstance(data, dict | list)
        and old_node
        and unchanged(data)
        and _reusable(old_node, parent_recursive)
    ):
        if isinstance(data, dict) and old_node.get("type") == "object":
            old_props = old_node.get("properties")
            if isinstance(old_props, dict) and list(old_props) == list(data):
                return old_node
        elif (
            isinstance(data, list) and old_node.get("type") == "array" and "elementType" in old_node
        ):
            return old_node
    if isinstance(data, dict):
        meta = data.get(META_KEY)
        meta = meta if isinstance(meta, dict) else {}
        extensible = bool(
            old_node.get("extensible") is True
            or meta.get("extensible") is True
            or meta.get("recursiveExtensible") is True
            or parent_recursive
        )
        recursive = bool(
            old_node.get("recursiveExtensible") is True
            or parent_recursive
            or meta.get("recursiveExtensible") is True
        )
        node: dict[str, Json] = {
            "type": "object",
            "properties": {},
            "extensible": extensible,
            "recursiveExtensible": recursive,
        }
        if "template" in meta:
            node["template"] = clone(meta["template"])
        elif "template" in old_node:
            node["template"] = clone(old_node["template"])
        required_list = meta.get("required")
        required_keys = (
            {k for k in required_list if isinstance(k, str)}
            if isinstance(required_list, list)
            else set()
        )
        old_props = old_node.get("properties")
        old_props = old_props if isinstance(old_props, dict) else {}
        child_recursive = extensible is not False and recursive
        props: dict[str, Json] = {}
        for key, value in data.items():
            if key == META_KEY:
                continue
            old_child = old_props.get(key)
            child = generate_schema(value, old_child, child_recursive, budget, unchanged)
            required = not extensible
            if key in required_keys:
                required = True
            if isinstance(old_child, dict) and isinstance(old_child.get("required"), bool):
                required = bool(old_child["required"])
            if child is old_child:
                if child.get("required") is not required:
                    child = {**child, "required": required}
            else:
                child["required"] = required
            props[key] = child
        node["properties"] = props
        return node
    if isinstance(data, list):
        extensible = old_node.get("extensible") is True or parent_recursive
        template_set = False
        template: Json = None
        items: list[Json] = []
        for item in data:
            if item == EXTENSIBLE_MARKER:
                extensible = True
                continue
            if _is_array_meta(item):
                meta = item.get(META_KEY)
                if isinstance(meta, dict):
                    if meta.get("extensible") is True:
                        extensible = True
                    if "template" in meta:
                        template = meta["template"]
                        template_set = True
                continue
            items.append(item)
        recursive = old_node.get("recursiveExtensible") is True or parent_recursive
        node = {
            "type": "array",
            "extensible": bool(extensible),
            "recursiveExtensible": bool(recursive),
        }
        if items:
            node["elementType"] = generate_schema(
                items[0],
                old_node.get("elementType"),
                bool(recursive and extensible),
                budget,
                unchanged,
            )
        else:
            node["elementType"] = {"type": "any"}
        if template_set:
            node["template"] = clone(template)
        elif "template" in old_node:
            node["template"] = clone(old_node["template"])
        return node
    if isinstance(data, bool):
        return {"type": "boolean"}
    if is_number(data):
        return {"type": "number"}
    if isinstance(data, str):
        return {"type": "string"}
    return {"type": "any"}


def root_flags_from(stat_data: Json, old_schema: Json) -> dict[str, Json]:
    """Root switches: the old schema's, overridden by a root ``$meta`` in the data."""
    flags: dict[str, Json] = {}
    if isinstance(old_schema, dict):
        for flag in ROOT_FLAGS:
            if flag in old_schema:
                flags[flag] = old_schema[flag]
    meta = stat_data.get(META_KEY) if isinstance(stat_data, dict) else None
    if isinstance(meta, dict):
        for flag in ROOT_FLAGS:
            if flag in meta:
                flags[flag] = meta[flag]
    return flags


def build_schema(
    stat_data: Json,
    old_schema: Json,
    budget: Budget | None = None,
    unchanged: Callable[[Json], bool] | None = None,
) -> dict[str, Json]:
    """The root schema for ``stat_data`` (flags inherited from ``old_schema``)."""
    node = dict(generate_schema(stat_data, old_schema, False, budget, unchanged))
    node.update(root_flags_from(stat_data, old_schema))
    return node


def strip_metadata(
    value: Json, budget: Budget | None = None, clean: Callable[[Json], bool] | None = None
) -> Json:
    """A copy of ``value`` without ``$meta`` keys, array markers and array-meta elements.

    Subtrees without metadata are returned as they are (no copy). ``clean(container)`` may
    say that a container is known to hold none (an untouched part of a committed state).
    """
    if budget is not None:
        budget.charge()
    if clean is not None and isinstance(value, dict | list) and clean(value):
        return value
    if isinstance(value, dict):
        out: dict[str, Json] | None = None
        for key, child in value.items():
            if key == META_KEY:
                if out is None:
                    out = {k: v for k, v in value.items() if k != META_KEY}
                continue
            stripped = strip_metadata(child, budget, clean)
            if stripped is not child:
                if out is None:
                    out = {k: v for k, v in value.items() if k != META_KEY}
                out[key] = stripped
        return value if out is None else out
    if isinstance(value, list):
        changed = False
        items: list[Json] = []
        for item in value:
            if item == EXTENSIBLE_MARKER or _is_array_meta(item):
                changed = True
                continue
            stripped = strip_metadata(item, budget, clean)
            changed = changed or stripped is not item
            items.append(stripped)
        return items if changed else value
    return value


def has_metadata(value: Json) -> bool:
    """True when ``value`` holds any metadata :func:`strip_metadata` would remove."""
    return strip_metadata(value) is not value


def schema_for_path(schema: Json, segments: list[str]) -> dict[str, Json] | None:
    """MVU ``getSchemaForPath``: the node for ``segments`` or ``None`` (no rule enforced)."""
    node = schema
    for segment in segments:
        if not isinstance(node, dict):
            return None
        kind = node.get("type")
        if kind == "object":
            props = node.get("properties")
            node = props.get(segment) if isinstance(props, dict) else None
        elif kind == "array" and segment.isascii() and segment.isdigit():
            node = node.get("elementType")
        else:
            return None
    return node if isinstance(node, dict) else None


def lodash_merge(target: Json, source: Json) -> Json:
    """lodash ``merge`` into a copy of ``target``: objects by key, arrays by index."""
    if isinstance(target, dict) and isinstance(source, dict):
        out = dict(target)
        for key, value in source.items():
            current = out.get(key)
            if (
                isinstance(current, dict | list)
                and isinstance(value, dict | list)
                and isinstance(current, dict) == isinstance(value, dict)
            ):
                out[key] = lodash_merge(current, value)
                continue
            if isinstance(value, dict | list):
                out[key] = lodash_merge({} if isinstance(value, dict) else [], value)
            else:
                out[key] = value
        return out
    if isinstance(target, list) and isinstance(source, list):
        out_list = list(target)
        for index, value in enumerate(source):
            if index < len(out_list):
                current = out_list[index]
                if (
                    isinstance(current, dict | list)
                    and isinstance(value, dict | list)
                    and isinstance(current, dict) == isinstance(value, dict)
                ):
                    out_list[index] = lodash_merge(current, value)
                    continue
                out_list[index] = clone(value)
            else:
                out_list.append(clone(value))
        return out_list
    return clone(source)


class TemplateMismatch(ValueError):
    """The value and the template have incompatible shapes (value is kept unchanged)."""


def apply_template(
    value: Json, template: Json, *, strict_array_cast: bool = False, concat: bool = True
) -> Json:
    """MVU ``applyTemplate`` (docs/mvu.md#meta). Raises :class:`TemplateMismatch`."""
    if template is None or not isinstance(template, dict | list):
        return value
    if isinstance(template, dict):
        # A null value is a mismatch too (MVU logs it; the value is kept either way).
        if isinstance(value, dict):
            return lodash_merge(clone(template), value)
        raise TemplateMismatch("object template needs an object value")
    # Array template.
    if isinstance(value, dict):
        raise TemplateMismatch("array template does not take an object value")
    if isinstance(value, list):
        if concat:
            return [*value, *clone(template)]
        return lodash_merge(clone(template), value)
    if strict_array_cast:
        return value
    if concat:
        return [value, *clone(template)]
    return lodash_merge(clone(template), [value])


def element_index(segment: str) -> int | None:
    """Canonical array index of a path segment (re-exported for the engine)."""
    return array_index(segment)
