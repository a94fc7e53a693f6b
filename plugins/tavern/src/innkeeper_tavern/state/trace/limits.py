"""Bounds of the assembly audit (the ``/traces`` and v3 assembly store).

The original recorder kept 128 sessions × 128 records, 64 KiB per record and 8 MiB in total
(`docs/resources.md#original-data`);
`docs/contract/audit.md#world-book-audit` fixes the 16-book / 128-decision summary and the id
clipping. Innkeeper keeps one database row per record; the per-record cap is higher (a 250-prompt
preset's part metadata alone is ~50 KiB) and the whole store is bounded by a per-session and a total
byte budget instead.
"""

from __future__ import annotations

from typing import Final

#: The canonical record's schema (`docs/contract/audit.md#record`:
#: "one canonical schema 4 record").
SCHEMA_VERSION: Final = 4
#: ``format`` of a record and of a session file.
RECORD_FORMAT: Final = "pmp-dsh-tavern-assembly"
FILE_FORMAT: Final = "pmp-dsh-tavern-assembly-audit"
#: Folder under the plugin's data directory (the database; legacy per-session files).
TRACE_DIR: Final = "assembly-audit"

#: Records kept per session, oldest evicted first (original: 128).
MAX_RECORDS_PER_SESSION: Final = 128
#: Sessions with records, least recently written evicted first (original: 128).
MAX_SESSIONS: Final = 256
#: One encoded record; a larger one is compacted (decision details, then parts) or reduced to
#: its identity, references and hashes (original: 64 KiB).
MAX_RECORD_BYTES: Final = 256 * 1024
#: One session's records; oldest records are evicted to fit.
MAX_SESSION_BYTES: Final = 4 * 1024 * 1024
#: All sessions together; least recently written sessions are evicted to fit
#: (original: 8 MiB for everything).
MAX_TOTAL_BYTES: Final = 64 * 1024 * 1024
#: A legacy session file larger than this is never parsed (no version wrote one that large).
MAX_FILE_READ_BYTES: Final = 2 * MAX_SESSION_BYTES
#: Sessions whose base record (the one their newer records are stored as deltas against) stays
#: decoded in memory, most recently written kept: at most this × ``MAX_RECORD_BYTES``.
MAX_CACHED_BASES: Final = 16

#: `docs/contract/audit.md#world-book-audit`: at most 16 books and 128 decisions in total;
#: entry ids over 120 UTF-16 units and resource ids over 200 are clipped with an ellipsis.
TRACE_MAX_BOOKS: Final = 16
TRACE_MAX_DECISIONS: Final = 128
TRACE_MAX_ENTRY_ID_UNITS: Final = 120
TRACE_MAX_RESOURCE_ID_UNITS: Final = 200
#: Diagnostics kept per record (original: 64).
MAX_DIAGNOSTICS: Final = 64
#: References kept per list (claimed input, context messages, attempts, errors).
MAX_REFS_PER_LIST: Final = 64
#: Events read back (newest first) at turn end to find the turn's evidence; a longer turn keeps
#: the references it found and marks the record ``scanTruncated``.
MAX_TURN_SCAN_EVENTS: Final = 4096
#: Page sizes of those reads: a turn is usually a dozen events, so start small and double up to
#: the host's maximum of 1,000.
SCAN_FIRST_PAGE: Final = 32
SCAN_MAX_PAGE: Final = 1000
