"""Wire views of the canonical record: v1 ``/traces`` compatibility, v3 index, capabilities.

`docs/contract/audit.md#world-book-audit`: ``records[].worldBooks[]`` keeps ``resource``,
``budget`` and ``decisions[]``, at most 16 books and 128 decisions in total, entry ids over 120
UTF-16 units and resource ids over 200 clipped with an ellipsis. `docs/contract/audit.md#v3`: the
index has no section/context/system-message bodies (the record holds none anyway).
"""

from __future__ import annotations

import copy
from typing import Any, Final

import msgspec

from innkeeper_tavern.pure.api_paths import V1_PREFIX

from .limits import (
    MAX_DIAGNOSTICS,
    SCHEMA_VERSION,
    TRACE_MAX_BOOKS,
    TRACE_MAX_DECISIONS,
    TRACE_MAX_ENTRY_ID_UNITS,
    TRACE_MAX_RESOURCE_ID_UNITS,
)
from .model import AssemblyRecord, EventRef
from .store import TraceLimits

__all__ = [
    "LEGACY_STATUS",
    "capabilities_view",
    "clip_utf16",
    "index_entry",
    "trace_record",
    "trace_world_books",
]

ELLIPSIS: Final = "…"
#: Canonical status → the original recorder's status vocabulary
#: (`docs/prompt-assembly.md#traces-record`). Records are written at turn
#: end, so ``awaiting-header`` never appears.
LEGACY_STATUS: Final[dict[str, str]] = {
    "sent": "header-observed",
    "interrupted": "header-observed",
    "failed": "request-error",
    "not-sent": "request-not-confirmed",
}


def _units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def clip_utf16(text: str, limit: int) -> str:
    """``text`` clipped to ``limit`` UTF-16 units, the last one an ellipsis (no split pairs)."""
    if _units(text) <= limit:
        return text
    out: list[str] = []
    used = 0
    for char in text:
        size = 2 if ord(char) > 0xFFFF else 1
        if used + size > limit - 1:
            break
        out.append(char)
        used += size
    return "".join(out) + ELLIPSIS


def trace_world_books(books: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """The compatibility ``worldBooks[]``: 16 books, 128 decisions in total, ids clipped."""
    out: list[dict[str, Any]] = []
    remaining = TRACE_MAX_DECISIONS
    for book in (books or [])[:TRACE_MAX_BOOKS]:
        resource = dict(book.get("resource") or {})
        if isinstance(resource.get("id"), str):
            resource["id"] = clip_utf16(resource["id"], TRACE_MAX_RESOURCE_ID_UNITS)
        decisions = []
        for decision in (book.get("decisions") or [])[: max(0, remaining)]:
            decision = dict(decision)
            if isinstance(decision.get("entryId"), str):
                decision["entryId"] = clip_utf16(decision["entryId"], TRACE_MAX_ENTRY_ID_UNITS)
            if isinstance(decision.get("resourceId"), str):
                decision["resourceId"] = clip_utf16(
                    decision["resourceId"], TRACE_MAX_RESOURCE_ID_UNITS
                )
            decisions.append(decision)
        remaining -= len(decisions)
        out.append(
            {
                "resource": resource,
                "budget": copy.deepcopy(book.get("budget")),
                "decisions": decisions,
            }
        )
    return out


def _last(refs: tuple[EventRef, ...]) -> EventRef | None:
    return refs[-1] if refs else None


def trace_record(record: AssemblyRecord) -> dict[str, Any]:
    """One ``GET /v1/traces`` record (metadata only, no prompt bodies)."""
    refs = record.references
    header = _last(refs.headers)
    attempt = header.attempt if header is not None and header.attempt is not None else 0
    return {
        "id": f"{record.turn}:{record.step}:{attempt}",
        "recordId": record.record_id,
        "schemaVersion": record.schema_version,
        "sessionId": record.session_id,
        "sessionFormatVersion": record.session_format_version,
        "turn": record.turn,
        "step": record.step,
        "attempt": attempt,
        "status": LEGACY_STATUS.get(record.status, record.status),
        "assemblyStatus": record.status,
        "createdAt": record.created_at,
        "capturedAt": record.captured_at,
        "fingerprints": {
            "systemText": record.hashes.system,
            "profile": record.hashes.profile,
            "config": record.hashes.requested_config,
            "effectiveConfig": record.hashes.effective_config,
            "audit": record.hashes.audit,
        },
        "selection": record.selection,
        "sessionSelection": record.session_selection,
        "worldBookSelection": record.world_book_selection,
        "resources": record.resources,
        "worldBooks": trace_world_books((record.lore or {}).get("books")),
        "activation": {
            "context": record.activation_context,
            "lore": (record.lore or {}).get("activation"),
            "renderedLoreIds": (record.lore or {}).get("renderedLoreIds", []),
        },
        "diagnostics": record.diagnostics[:MAX_DIAGNOSTICS],
        "parameters": record.parameters,
        "authority": {
            "requestHeaderSeq": record.authority.request_header_seq,
            "requestHeaderFingerprint": header.sha256 if header is not None else None,
            "systemMessageSeq": record.authority.system_message_seq,
            "systemMessageFingerprint": refs.system.sha256 if refs.system else None,
            "tavernProfilePresent": record.authority.tavern_profile_present,
            "tavernCallConfigApplied": record.authority.tavern_call_config_applied,
        },
        "compacted": record.compacted,
    }


def _seqs(refs: tuple[EventRef, ...]) -> list[int]:
    return [r.seq for r in refs]


def index_entry(record: AssemblyRecord) -> dict[str, Any]:
    """One v3 index row: identity, status, counts, hashes and reference seqs — no bodies."""
    refs = record.references
    resources = record.resources or {}

    def _summary(key: str) -> Any:
        value = resources.get(key)
        return (
            {"id": value.get("id"), "name": value.get("name")} if isinstance(value, dict) else None
        )

    return {
        "recordId": record.record_id,
        "schemaVersion": record.schema_version,
        "sessionFormatVersion": record.session_format_version,
        "turn": record.turn,
        "step": record.step,
        "status": record.status,
        "createdAt": record.created_at,
        "capturedAt": record.captured_at,
        "preset": _summary("preset"),
        "characterCard": _summary("characterCard"),
        "user": _summary("user"),
        "counts": msgspec.to_builtins(record.counts),
        "hashes": msgspec.to_builtins(record.hashes),
        "authority": msgspec.to_builtins(record.authority),
        "references": {
            "systemSeq": refs.system.seq if refs.system else None,
            "inputSeqs": _seqs(refs.input),
            "contextSeqs": _seqs(refs.context),
            "placementSeq": refs.placement.seq if refs.placement else None,
            "assemblySeq": refs.assembly.seq if refs.assembly else None,
            "headerSeqs": _seqs(refs.headers),
            "errorSeqs": _seqs(refs.errors),
            "replySeq": refs.reply.seq if refs.reply else None,
            "turnEndSeq": refs.turn_end.seq if refs.turn_end else None,
            "historyThroughSeq": refs.history_through_seq,
            "scanTruncated": refs.scan_truncated,
        },
        "compacted": record.compacted,
    }


def capabilities_view(limits: TraceLimits) -> dict[str, Any]:
    """``GET /v3/capabilities``: what the v3 audit offers, how sources map, and its bounds."""
    return {
        "api": "pmp-dsh-tavern",
        "version": 3,
        "schemaVersion": SCHEMA_VERSION,
        "readableSchemaVersions": [SCHEMA_VERSION],
        "capabilities": {
            "assemblyIndex": True,
            "assemblyDetail": True,
            "verifiedBodies": True,
            "sourceText": False,
            "sourcesRoute": False,
            "currentResources": False,
            "parameters": True,
            "failureDetails": True,
            "requestAssembly": True,
            "legacyTraces": True,
        },
        "routes": {
            "assemblies": "/pmp-dsh-tavern/api/v3/sessions/:id/assemblies",
            "assembly": "/pmp-dsh-tavern/api/v3/sessions/:id/assemblies/:recordId",
            "traces": f"{V1_PREFIX}/traces?sessionId=",
        },
        "sourceMapping": {
            "profileSection": {"name": "pmp-dsh-tavern:profile", "order": 10},
            "section": "pmp-dsh-tavern:part:<identifier>",
            "sourceKinds": {
                "preset": "preset:<promptIdentifier> — a preset prompt or marker",
                "character": "character:<field> — a card field (description, greeting, …)",
                "user": "user:description — the bound user's persona",
                "lore": "lore:<loreId> — an activated world-book entry",
            },
            "bodies": {
                "system": "system/message",
                "input": "user/message (origin user | steering)",
                "context": "user/message (origin context)",
                "config": "request/header",
                "array": "request/assembly",
                "placement": "ext dsh-assembler:placement",
                "failure": "turn/end, request/error",
            },
            "sourceText": "never stored; read current resources through v1",
        },
        "limits": {
            **limits.wire(),
            "maxWorldBooks": TRACE_MAX_BOOKS,
            "maxDecisions": TRACE_MAX_DECISIONS,
            "maxEntryIdUnits": TRACE_MAX_ENTRY_ID_UNITS,
            "maxResourceIdUnits": TRACE_MAX_RESOURCE_ID_UNITS,
            "maxDiagnostics": MAX_DIAGNOSTICS,
        },
    }
