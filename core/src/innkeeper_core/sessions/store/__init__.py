"""The durable session event store: one SQLite file (WAL) under the data directory.

Layout and guarantees (docs/contract/sessions.md#durability):

* :mod:`.schema`: ``events(sid, seq, at, message, data)``, per-session append-only rows with
  ``seq`` 1-based and contiguous, and ``sessions``, the header plus the turn state, updated in
  the same transaction as the ``turn/start``/``turn/end`` rows that change it; the migrations
  of older files; the row-level SQL the other parts share.
* :mod:`.writer`: one writer thread owns the only waiting write connection and applies jobs in
  submission order, grouping queued ones into one transaction (group commit), each inside its
  own SAVEPOINT so one failing job never takes the others down; small appends commit inline on
  the event loop when the writer is idle. A crash (even SIGKILL) loses at most uncommitted
  jobs and never leaves a partial event.
* :mod:`.forks`: forks share rows: a child records ``seed_sid``/``seed_length`` and reads its
  inherited prefix from its ancestors, so forking a long session costs O(1) rows. Past
  :data:`MAX_FORK_SHARE_DEPTH` shared ancestors the prefix is copied instead, which keeps every
  read at a bounded number of range scans.
* :mod:`.reads`: a small pool of read connections. WAL gives each statement a snapshot, so
  reads never block the writer and the writer never blocks reads.

:class:`EventStore` (:mod:`.event_store`) is the one object callers use.
"""

from __future__ import annotations

from innkeeper_core.sessions.store.event_store import (
    EventStore,
    event_store_resource,
    system_clock,
    uuid_ids,
)
from innkeeper_core.sessions.store.forks import MAX_FORK_SHARE_DEPTH, IdFactory
from innkeeper_core.sessions.store.reads import READ_THREADS
from innkeeper_core.sessions.store.schema import (
    MAX_CACHED_CHAINS,
    STORE_FILE_NAME,
    STORE_SCHEMA_VERSION,
    iso_ms,
)
from innkeeper_core.sessions.store.writer import (
    MAX_EVENT_DATA_BYTES,
    MAX_EVENTS_PER_APPEND,
    MAX_WRITE_BATCH,
    AppendListener,
    Clock,
    StoreClosed,
)

__all__ = [
    "MAX_CACHED_CHAINS",
    "MAX_EVENTS_PER_APPEND",
    "MAX_EVENT_DATA_BYTES",
    "MAX_FORK_SHARE_DEPTH",
    "MAX_WRITE_BATCH",
    "READ_THREADS",
    "STORE_FILE_NAME",
    "STORE_SCHEMA_VERSION",
    "AppendListener",
    "Clock",
    "EventStore",
    "IdFactory",
    "StoreClosed",
    "event_store_resource",
    "iso_ms",
    "system_clock",
    "uuid_ids",
]
