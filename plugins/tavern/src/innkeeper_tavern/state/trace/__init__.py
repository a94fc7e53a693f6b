"""The canonical assembly audit: schema-4 records, their bounded store and their views.

`docs/contract/audit.md#record`, `docs/contract/audit.md#world-book-audit` and
`docs/contract/audit.md#v3`; `docs/contract/audit.md#audit-boundary`.

- :mod:`.model` — :class:`AssemblyRecord` and the per-session file (msgspec Structs);
- :mod:`.capture` — a turn's durable evidence → records (references, spans, hashes, counts);
- :mod:`.store` — :class:`TraceStore`, one SQLite row per record, bounded;
- :mod:`.chunks`, :mod:`.delta` — records stored as deltas against shared base chunks;
- :mod:`.compaction` — fitting one record into the per-record cap;
- :mod:`.recorder` — the ``turn/ended`` listener that writes records;
- :mod:`.verify` — resolves and verifies references against durable history (v3 detail);
- :mod:`.views` — ``/v1/traces`` compatibility, v3 index and capabilities.

HTTP wiring is ``innkeeper_tavern.face.routes.trace.install_traces``.
"""

from __future__ import annotations

from innkeeper_hostapi import ServiceKey

from .model import AssemblyRecord, EventRef, References, SectionMeta, SessionTraceFile
from .recorder import AssemblyRecorder
from .store import TraceLimits, TraceStore
from .verify import assembly_detail, resolve

__all__ = [
    "ASSEMBLY_TRACE",
    "AssemblyRecord",
    "AssemblyRecorder",
    "EventRef",
    "References",
    "SectionMeta",
    "SessionTraceFile",
    "TraceLimits",
    "TraceStore",
    "assembly_detail",
    "resolve",
]

#: The store of canonical records, for other Tavern parts and plugins (resolve at call time).
ASSEMBLY_TRACE: ServiceKey[TraceStore] = ServiceKey("tavern.assembly_trace", TraceStore)
