"""Schemas of the managed documents ``catalog.json`` and ``timeline.json``
(`docs/contract/play.md#managed-documents` and `docs/contract/play.md#archive`;
`docs/play.md#managed-documents-and-revisions`).

The validators read a decoded document and raise :class:`PlayError` (400 ``PLAY_CATALOG_INVALID``
/ ``PLAY_TIMELINE_INVALID``, ``PLAY_APPEARANCE_INVALID`` for appearance metadata, 409
``PLAY_COORDINATES_MIGRATION_REQUIRED`` for references saved in another session format). They
never rewrite a document: the bytes a client sent are the bytes stored. Unknown third-party
``ext`` keys are kept; the known ``ext.pmpDshTavern`` fields are checked wherever they appear.
``focusSessionId`` is forbidden everywhere (focus is derived, never stored).
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Final

import msgspec

from innkeeper_hostapi.sessions import SESSION_FORMAT_VERSION
from innkeeper_tavern.state.session_bindings.model import valid_session_id
from innkeeper_tavern.state.settings.conversation import validate_appearance
from innkeeper_tavern.state.settings.store import SettingsInvalid

from .errors import (
    PLAY_APPEARANCE_INVALID,
    PLAY_CATALOG_INVALID,
    PLAY_COORDINATES_MIGRATION_REQUIRED,
    PLAY_TIMELINE_INVALID,
    PlayError,
)

SAFE_SEGMENT: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
_HEX64: Final = re.compile(r"^[0-9a-f]{64}$")
_ARCHIVED_AT: Final = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
#: Longest node/variant id and character name (characters), `docs/play.md#catalogjson`.
MAX_ID_CHARS: Final = 200
MAX_NAME_CHARS: Final = 200
#: Largest encoded ``appearance`` object (bytes).
MAX_APPEARANCE_BYTES: Final = 16 << 10
#: Deepest ``ext`` nesting searched for a forbidden ``focusSessionId``.
MAX_EXT_DEPTH: Final = 32
MAX_SAFE_INTEGER: Final = 2**53 - 1
FORBIDDEN_KEY: Final = "focusSessionId"
TAVERN_EXT: Final = "pmpDshTavern"

_TIMELINE_KEYS: Final = frozenset({"nodes", "head", "ext"})
_NODE_KEYS: Final = frozenset(
    {"id", "kind", "displayOverride", "parentVariantId", "adoptedVariantId", "variants", "ext"}
)
_VARIANT_KEYS: Final = frozenset({"id", "sessionId", "startEventId", "endEventId", "ext"})
_HEAD_KEYS: Final = frozenset({"sessionId", "nodeId", "variantId"})
_CATALOG_KEYS: Final = frozenset({"playthroughs", "ext"})
_ROW_KEYS: Final = frozenset({"id", "path", "lastOpenedAt", "title", "ext"})
_BRANCH_HEAD_KEYS: Final = frozenset({"branchVariantId", "sessionId", "nodeId", "variantId"})


def decode(data: bytes, code: str) -> Any:
    """Decode JSON bytes (UTF-8); anything else fails with ``code``."""
    try:
        return msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise PlayError(400, code, f"not valid JSON: {exc}") from None


def safe_segment(value: object) -> bool:
    """The client-same-origin safe segment rule of ids (``^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$``)."""
    return isinstance(value, str) and SAFE_SEGMENT.fullmatch(value) is not None


def safe_posix_path(value: object, *, suffix: str) -> bool:
    """A safe POSIX relative path of ≥2 safe segments whose last segment is ``suffix``."""
    if not isinstance(value, str) or "\\" in value or "\x00" in value or value.startswith("/"):
        return False
    parts = value.split("/")
    return len(parts) >= 2 and parts[-1] == suffix and all(safe_segment(p) for p in parts)


def valid_archived_at(value: object) -> bool:
    """``YYYY-MM-DDTHH:mm:ss.sssZ``, a real UTC instant (`docs/contract/play.md#archive`)."""
    if not isinstance(value, str) or _ARCHIVED_AT.fullmatch(value) is None:
        return False
    try:
        datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ")
    except ValueError:
        return False
    return True


def _fail(code: str, where: str, message: str) -> PlayError:
    return PlayError(400, code, f"{where}: {message}")


def _obj(value: object, code: str, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _fail(code, where, "must be an object")
    return value


def _keys(value: dict[str, Any], allowed: frozenset[str], code: str, where: str) -> None:
    if FORBIDDEN_KEY in value:
        raise _fail(code, where, f"{FORBIDDEN_KEY} is not allowed (focus is derived)")
    extra = sorted(set(value) - allowed)
    if extra:
        raise _fail(code, where, f"unknown field {extra[0]!r}")


def _id(value: object, code: str, where: str) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_ID_CHARS:
        raise _fail(code, where, f"must be a non-blank string of at most {MAX_ID_CHARS} chars")
    return value


def _safe_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_SAFE_INTEGER


def _no_forbidden(value: object, code: str, where: str, depth: int = 0) -> None:
    if depth > MAX_EXT_DEPTH:
        raise _fail(code, where, "ext is nested too deeply")
    if isinstance(value, dict):
        if FORBIDDEN_KEY in value:
            raise _fail(code, where, f"{FORBIDDEN_KEY} is not allowed (focus is derived)")
        for item in value.values():
            _no_forbidden(item, code, where, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _no_forbidden(item, code, where, depth + 1)


def check_ext(value: object, code: str, where: str) -> dict[str, Any]:
    """Validate an ``ext`` object: known ``pmpDshTavern`` fields checked, the rest kept."""
    ext = _obj(value, code, where)
    _no_forbidden(ext, code, where)
    tavern = ext.get(TAVERN_EXT)
    if tavern is None:
        return ext
    tavern = _obj(tavern, code, f"{where}.{TAVERN_EXT}")
    w = f"{where}.{TAVERN_EXT}"
    checks: dict[str, tuple[Any, str]] = {
        "characterId": (safe_segment, "must be a safe id"),
        "characterName": (
            lambda v: isinstance(v, str) and len(v) <= MAX_NAME_CHARS,
            f"must be a string of at most {MAX_NAME_CHARS} chars",
        ),
        "characterSha256": (
            lambda v: isinstance(v, str) and _HEX64.fullmatch(v) is not None,
            "must be 64 lowercase hex",
        ),
        "rootSessionId": (valid_session_id, "must be a session id"),
        "playthroughNumber": (
            lambda v: isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= MAX_SAFE_INTEGER,
            "must be a positive integer",
        ),
        "importContextPath": (
            lambda v: safe_posix_path(v, suffix="import-context.json"),
            "must be a safe relative path ending in /import-context.json",
        ),
        "archivedAt": (valid_archived_at, "must be a UTC timestamp YYYY-MM-DDTHH:mm:ss.sssZ"),
        "sessionFormatVersion": (_safe_int, "must be a non-negative integer"),
    }
    for key, (ok, message) in checks.items():
        if key in tavern and not ok(tavern[key]):
            raise _fail(code, f"{w}.{key}", message)
    version = tavern.get("sessionFormatVersion")
    if version is not None and version != SESSION_FORMAT_VERSION:
        raise PlayError(
            409,
            PLAY_COORDINATES_MIGRATION_REQUIRED,
            f"{w}.sessionFormatVersion: saved references use session format {version}; this "
            f"host's sessions use format {SESSION_FORMAT_VERSION}",
        )
    if "appearance" in tavern:
        _appearance(tavern["appearance"], f"{w}.appearance")
    if "branchHeads" in tavern:
        heads = tavern["branchHeads"]
        if not isinstance(heads, list):
            raise _fail(code, f"{w}.branchHeads", "must be an array")
        for i, head in enumerate(heads):
            item = _obj(head, code, f"{w}.branchHeads[{i}]")
            _keys(item, _BRANCH_HEAD_KEYS, code, f"{w}.branchHeads[{i}]")
            for key in _BRANCH_HEAD_KEYS:
                _id(item.get(key), code, f"{w}.branchHeads[{i}].{key}")
    return ext


def _appearance(value: object, where: str) -> None:
    """The presentation metadata of docs/play.md: at most 16 KiB encoded, typed fields only."""
    if not isinstance(value, dict) or len(msgspec.json.encode(value)) > MAX_APPEARANCE_BYTES:
        raise PlayError(
            400,
            PLAY_APPEARANCE_INVALID,
            f"{where} must be an object of at most {MAX_APPEARANCE_BYTES} bytes",
        )
    try:
        validate_appearance(value)
    except SettingsInvalid as exc:
        raise PlayError(400, PLAY_APPEARANCE_INVALID, f"{where}: {exc.message}") from exc


# --------------------------------------------------------------------------------- timeline


def validate_timeline(doc: object) -> dict[str, Any]:
    """Check a decoded ``timeline.json``; returns it unchanged."""
    code = PLAY_TIMELINE_INVALID
    top = _obj(doc, code, "timeline")
    _keys(top, _TIMELINE_KEYS, code, "timeline")
    nodes = top.get("nodes")
    if not isinstance(nodes, list):
        raise _fail(code, "timeline.nodes", "must be an array")
    if "ext" in top:
        check_ext(top["ext"], code, "timeline.ext")
    tree = "head" in top or any(isinstance(n, dict) and "parentVariantId" in n for n in nodes)
    node_ids: set[str] = set()
    # variant id -> index of its node (global uniqueness is checked only for trees).
    variant_node: dict[str, int] = {}
    node_variants: dict[str, set[str]] = {}
    for index, raw in enumerate(nodes):
        where = f"timeline.nodes[{index}]"
        node = _obj(raw, code, where)
        _keys(node, _NODE_KEYS, code, where)
        node_id = _id(node.get("id"), code, f"{where}.id")
        if node_id in node_ids:
            raise _fail(code, f"{where}.id", f"duplicate node id {node_id!r}")
        node_ids.add(node_id)
        if node.get("kind") != "qa":
            raise _fail(code, f"{where}.kind", "must be 'qa' (greetings are not timeline nodes)")
        override = node.get("displayOverride")
        if override is not None and not isinstance(override, str):
            raise _fail(code, f"{where}.displayOverride", "must be a string or null")
        if "ext" in node:
            check_ext(node["ext"], code, f"{where}.ext")
        variants = node.get("variants")
        if not isinstance(variants, list) or not variants:
            raise _fail(code, f"{where}.variants", "must be a non-empty array")
        local: set[str] = set()
        for vi, rawv in enumerate(variants):
            vw = f"{where}.variants[{vi}]"
            variant = _obj(rawv, code, vw)
            _keys(variant, _VARIANT_KEYS, code, vw)
            vid = _id(variant.get("id"), code, f"{vw}.id")
            if vid in local:
                raise _fail(code, f"{vw}.id", f"duplicate variant id {vid!r} in the node")
            local.add(vid)
            if not valid_session_id(variant.get("sessionId")):
                raise _fail(code, f"{vw}.sessionId", "must be a session id")
            start, end = variant.get("startEventId"), variant.get("endEventId")
            if not _safe_int(start) or not _safe_int(end):
                raise _fail(code, vw, "startEventId/endEventId must be safe integers >= 0")
            assert isinstance(start, int) and isinstance(end, int)
            if start > end:
                raise _fail(code, vw, "startEventId must not exceed endEventId")
            if "ext" in variant:
                check_ext(variant["ext"], code, f"{vw}.ext")
            if tree and vid in variant_node:
                raise _fail(code, f"{vw}.id", f"variant id {vid!r} is not unique in the tree")
            variant_node.setdefault(vid, index)
        node_variants[node_id] = local
        adopted = node.get("adoptedVariantId")
        if not isinstance(adopted, str) or adopted not in local:
            raise _fail(code, f"{where}.adoptedVariantId", "must name one of the node's variants")
        parent = node.get("parentVariantId")
        if parent is not None and (
            not isinstance(parent, str) or variant_node.get(parent, index) >= index
        ):
            raise _fail(
                code,
                f"{where}.parentVariantId",
                "must be null or a variant of an earlier node",
            )
    if "head" in top:
        head = _obj(top["head"], code, "timeline.head")
        _keys(head, _HEAD_KEYS, code, "timeline.head")
        if not valid_session_id(head.get("sessionId")):
            raise _fail(code, "timeline.head.sessionId", "must be a session id")
        head_node = head.get("nodeId")
        if not isinstance(head_node, str) or head_node not in node_variants:
            raise _fail(code, "timeline.head.nodeId", "must name a node")
        if head.get("variantId") not in node_variants[head_node]:
            raise _fail(code, "timeline.head.variantId", "must name a variant of head.nodeId")
    return top


# --------------------------------------------------------------------------------- catalog


def validate_catalog(doc: object) -> dict[str, Any]:
    """Check a decoded ``catalog.json``; returns it unchanged.

    Ids are unique; paths are unique ignoring case (two spellings of one file on a
    case-insensitive disk are one playthrough directory).
    """
    code = PLAY_CATALOG_INVALID
    top = _obj(doc, code, "catalog")
    _keys(top, _CATALOG_KEYS, code, "catalog")
    rows = top.get("playthroughs")
    if not isinstance(rows, list):
        raise _fail(code, "catalog.playthroughs", "must be an array")
    if "ext" in top:
        check_ext(top["ext"], code, "catalog.ext")
    ids: set[str] = set()
    paths: set[str] = set()
    for index, raw in enumerate(rows):
        where = f"catalog.playthroughs[{index}]"
        row = _obj(raw, code, where)
        _keys(row, _ROW_KEYS, code, where)
        pid = row.get("id")
        if not safe_segment(pid):
            raise _fail(code, f"{where}.id", "must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
        assert isinstance(pid, str)
        if pid in ids:
            raise _fail(code, f"{where}.id", f"duplicate playthrough id {pid!r}")
        ids.add(pid)
        path = row.get("path")
        if not safe_posix_path(path, suffix="timeline.json"):
            raise _fail(
                code, f"{where}.path", "must be a safe relative POSIX path ending in /timeline.json"
            )
        assert isinstance(path, str)
        if path.casefold() in paths:
            raise _fail(code, f"{where}.path", f"duplicate path {path!r}")
        paths.add(path.casefold())
        if "ext" in row:
            check_ext(row["ext"], code, f"{where}.ext")
    return top


def tavern_ext(item: dict[str, Any]) -> dict[str, Any]:
    """``item.ext.pmpDshTavern`` of a validated document, or ``{}``."""
    ext = item.get("ext")
    if isinstance(ext, dict):
        tavern = ext.get(TAVERN_EXT)
        if isinstance(tavern, dict):
            return tavern
    return {}


def text_field(row: dict[str, Any], key: str) -> str | None:
    """A string field of a catalog row; non-strings are treated as absent."""
    value = row.get(key)
    return value if isinstance(value, str) else None


def validate_managed(name: str, data: bytes) -> dict[str, Any]:
    """Decode and validate managed document bytes by file name."""
    if name == "catalog.json":
        return validate_catalog(decode(data, PLAY_CATALOG_INVALID))
    return validate_timeline(decode(data, PLAY_TIMELINE_INVALID))
