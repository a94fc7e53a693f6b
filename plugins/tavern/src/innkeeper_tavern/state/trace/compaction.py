"""Per-record compaction: fit one :class:`AssemblyRecord` into the per-record byte cap.

`docs/prompt-assembly.md` "Storage and limits": a record over the cap is compacted, never
refused — decision details first, then rejected decisions, section sources and whole subtrees;
at worst only identity, status, references, hashes and counts remain. ``compacted`` names what
went.
"""

from __future__ import annotations

from typing import Any

import msgspec

from .model import AssemblyRecord

__all__ = ["compact", "encode_record"]

_encoder = msgspec.json.Encoder()
_record_decoder = msgspec.json.Decoder(AssemblyRecord)


def encode_record(record: AssemblyRecord) -> bytes:
    """The record's stored JSON."""
    return _encoder.encode(record)


def _strip_decision_details(record: AssemblyRecord) -> bool:
    lore = record.lore
    if not lore:
        return False
    changed = False
    for book in lore.get("books") or ():
        for decision in book.get("decisions") or ():
            for key in ("primaryKeys", "secondaryKeys", "detail"):
                if key in decision:
                    del decision[key]
                    changed = True
    return changed


def _drop_decisions(record: AssemblyRecord) -> bool:
    lore = record.lore
    if not lore:
        return False
    changed = False
    for book in lore.get("books") or ():
        decisions = book.get("decisions") or []
        kept = [d for d in decisions if d.get("decision") == "included"]
        if len(kept) != len(decisions):
            book["decisions"] = kept
            book["decisionsOmitted"] = len(decisions) - len(kept)
            changed = True
    return changed


def compact(record: AssemblyRecord, max_bytes: int) -> tuple[AssemblyRecord, bytes]:
    """Fit ``record`` into ``max_bytes`` of JSON: drop decision details, then rejected
    decisions, then section sources, then sections and lore; as a last resort keep only its
    identity, status, references, hashes and counts. ``compacted`` names what went."""
    data = _encoder.encode(record)
    if len(data) <= max_bytes:
        return record, data
    record = _record_decoder.decode(data)  # a private copy we may edit
    steps: list[tuple[str, Any]] = [
        ("lore.decisionDetails", _strip_decision_details),
        ("lore.rejectedDecisions", _drop_decisions),
    ]
    for name, step in steps:
        if step(record):
            record.compacted.append(name)
            data = _encoder.encode(record)
            if len(data) <= max_bytes:
                return record, data
    if any(s.sources for s in record.sections):
        record.sections = tuple(msgspec.structs.replace(s, sources=()) for s in record.sections)
        record.compacted.append("sections.sources")
        data = _encoder.encode(record)
        if len(data) <= max_bytes:
            return record, data
    for name in ("sections", "lore", "resources", "composition", "diagnostics", "parameters"):
        if name == "sections":
            record.sections = ()
        elif name == "diagnostics":
            record.diagnostics = []
        else:
            setattr(record, name, None)
        record.compacted.append(name)
        data = _encoder.encode(record)
        if len(data) <= max_bytes:
            return record, data
    minimal = AssemblyRecord(
        record_id=record.record_id,
        audit_id=record.audit_id,
        session_id=record.session_id,
        session_format_version=record.session_format_version,
        turn=record.turn,
        step=record.step,
        created_at=record.created_at,
        captured_at=record.captured_at,
        status=record.status,
        system=record.system,
        references=record.references,
        hashes=record.hashes,
        counts=record.counts,
        authority=record.authority,
        compacted=[*record.compacted, "all-but-references"],
    )
    return minimal, _encoder.encode(minimal)
