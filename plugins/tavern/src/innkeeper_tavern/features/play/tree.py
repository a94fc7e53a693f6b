"""Timeline tree helpers over a validated ``timeline.json`` (`docs/contract/play.md#timeline-tree`;
`docs/play.md#timelinejson`). Pure functions: no I/O.

A node's parent is its ``parentVariantId`` when the key is present (``null`` is a root) and
otherwise the adopted variant of the previous node (the implicit parent of flat documents).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from .schema import TAVERN_EXT, tavern_ext


@dataclass(frozen=True, slots=True)
class Focus:
    """Where a timeline stands: ``head``, else the last node's adopted variant, else nothing."""

    session_id: str | None
    node_id: str | None
    variant_id: str | None


def _adopted(node: dict[str, Any]) -> dict[str, Any]:
    adopted = node["adoptedVariantId"]
    return next(v for v in node["variants"] if v["id"] == adopted)


def effective_parents(doc: dict[str, Any]) -> dict[str, str | None]:
    """``{variantId: parent variant id | None}`` for every variant."""
    parents: dict[str, str | None] = {}
    previous: dict[str, Any] | None = None
    for node in doc["nodes"]:
        if "parentVariantId" in node:
            parent = node["parentVariantId"]
        else:
            parent = _adopted(previous)["id"] if previous is not None else None
        for variant in node["variants"]:
            parents.setdefault(variant["id"], parent)
        previous = node
    return parents


def derive_focus(doc: dict[str, Any]) -> Focus:
    """Stable focus: the head, else the adopted variant of the last node."""
    head = doc.get("head")
    if isinstance(head, dict):
        return Focus(head["sessionId"], head["nodeId"], head["variantId"])
    nodes = doc["nodes"]
    if not nodes:
        return Focus(None, None, None)
    variant = _adopted(nodes[-1])
    return Focus(variant["sessionId"], nodes[-1]["id"], variant["id"])


def session_ids(doc: dict[str, Any]) -> list[str]:
    """Every session the timeline references (variants, head, saved branch heads), in order."""
    seen: dict[str, None] = {}
    for node in doc["nodes"]:
        for variant in node["variants"]:
            seen.setdefault(variant["sessionId"], None)
    head = doc.get("head")
    if isinstance(head, dict):
        seen.setdefault(head["sessionId"], None)
    for branch in tavern_ext(doc).get("branchHeads", []) or []:
        seen.setdefault(branch["sessionId"], None)
    return list(seen)


@dataclass(frozen=True, slots=True)
class Detached:
    """The result of removing a session from a timeline."""

    document: dict[str, Any]
    removed_variant_ids: tuple[str, ...]
    descendant_session_ids: tuple[str, ...]


def detach_session(doc: dict[str, Any], session_id: str) -> Detached:
    """Remove every variant of ``session_id`` and every descendant variant (by effective
    parent). Nodes left empty are dropped, survivors are not rehung, a removed adoption falls
    back to the first remaining variant, a removed head to the last node's adopted variant, and
    saved branch heads that name removed variants are pruned. DSH sessions are never touched."""
    parents = effective_parents(doc)
    removed: set[str] = set()
    for node in doc["nodes"]:
        for variant in node["variants"]:
            if variant["sessionId"] == session_id:
                removed.add(variant["id"])
    changed = True
    while changed:  # descendants, to a fixpoint (parents point only at earlier nodes)
        changed = False
        for vid, parent in parents.items():
            if parent in removed and vid not in removed:
                removed.add(vid)
                changed = True
    out = copy.deepcopy(doc)
    descendants: dict[str, None] = {}
    nodes: list[dict[str, Any]] = []
    for node in out["nodes"]:
        kept = [v for v in node["variants"] if v["id"] not in removed]
        for variant in node["variants"]:
            if variant["id"] in removed and variant["sessionId"] != session_id:
                descendants.setdefault(variant["sessionId"], None)
        if not kept:
            continue
        node["variants"] = kept
        if node["adoptedVariantId"] in removed:
            node["adoptedVariantId"] = kept[0]["id"]
        nodes.append(node)
    out["nodes"] = nodes
    head = out.get("head")
    if isinstance(head, dict) and (head["variantId"] in removed or head["sessionId"] == session_id):
        if nodes:
            last = _adopted(nodes[-1])
            out["head"] = {
                "sessionId": last["sessionId"],
                "nodeId": nodes[-1]["id"],
                "variantId": last["id"],
            }
        else:
            del out["head"]
    tavern = tavern_ext(out)
    if isinstance(tavern.get("branchHeads"), list):
        tavern["branchHeads"] = [
            b
            for b in tavern["branchHeads"]
            if b["branchVariantId"] not in removed
            and b["variantId"] not in removed
            and b["sessionId"] != session_id
        ]
    return Detached(out, tuple(sorted(removed)), tuple(descendants))


def clear_import_context(doc: dict[str, Any]) -> None:
    """Drop ``ext.pmpDshTavern.importContextPath`` of a document in place."""
    ext = doc.get("ext")
    if isinstance(ext, dict) and isinstance(ext.get(TAVERN_EXT), dict):
        ext[TAVERN_EXT].pop("importContextPath", None)
