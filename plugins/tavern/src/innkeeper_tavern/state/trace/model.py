"""The canonical schema-4 assembly record and the per-session file that holds them.

`docs/contract/audit.md#record`: one canonical record per assembly
serves both the v1 ``/traces`` compatibility view and the v3 assembly routes. It holds the
selection, resource summaries, lore decisions, section and source *metadata* (names, kinds,
sizes, SHA-256, byte spans), hashes and counts, the requested/effective/omitted parameters and
references to the durable history events that hold what was sent
(`docs/contract/audit.md#audit-boundary`: ``system/message`` and runtime-context
``user/message`` own the bodies, ``request/header`` the final config). It never holds a prompt,
message or source body.

Subtrees produced by the profile loader (selection, resources, lore, diagnostics, composition,
parameters) are kept as JSON builtins in the loader's camelCase shape; what this module adds
(references, sections, hashes, counts, authority) is typed.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from .limits import FILE_FORMAT, RECORD_FORMAT, SCHEMA_VERSION

__all__ = [
    "AssemblyRecord",
    "Authority",
    "Counts",
    "EventRef",
    "Hashes",
    "References",
    "SectionMeta",
    "SessionTraceFile",
    "SourceMeta",
    "Span",
    "SystemMeta",
]

RecordStatus = Literal["sent", "failed", "interrupted", "not-sent"]


class EventRef(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A reference to one durable session event: its seq, type and the SHA-256 of its payload
    (the UTF-8 JSON of the event's ``data`` as the host stores it).

    All record structs are camelCase on disk and on the wire and tolerate unknown fields
    (additive evolution, `docs/contract/http-api.md#additive-fields`)."""

    type: str
    seq: int
    sha256: str
    message_id: str | None = None
    attempt: int | None = None


class Span(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """UTF-8 byte range ``[start, end)`` inside the referenced ``system/message`` text."""

    start: int
    end: int


class SourceMeta(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """One input a section was built from, as metadata: ``preset:<id>``, ``character:<field>``,
    ``user:description``, ``lore:<loreId>``, … (`docs/prompt-assembly.md`). Never its text."""

    id: str
    kind: str


class SectionMeta(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """One ``pmp-dsh-tavern:part:*`` section of the profile (body-free)."""

    name: str
    identifier: str
    kind: str
    role: str
    bytes: int
    sha256: str | None
    sources: tuple[SourceMeta, ...] = ()
    #: Where its body sits in the system message; ``None`` when it could not be located.
    span: Span | None = None


class SystemMeta(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """The system message of the request and where the Tavern profile sits inside it."""

    bytes: int | None = None
    sha256: str | None = None
    profile_section: str = "pmp-dsh-tavern:profile"
    profile_order: int = 10
    profile_bytes: int = 0
    profile_sha256: str | None = None
    profile_span: Span | None = None
    #: Bytes of the system message that belong to other plugins' sections (and the joiners).
    other_bytes: int | None = None


class References(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """The durable events that hold what this assembly's request sent and what came of it."""

    system: EventRef | None = None
    #: ``user/message`` events this step claimed (origin ``user`` / ``steering``).
    input: tuple[EventRef, ...] = ()
    #: Runtime-context ``user/message`` events (origin ``context``) appended before the request.
    context: tuple[EventRef, ...] = ()
    #: The claim splice (``agent/inbox/spliced`` op ``claim``) of this step.
    claim: EventRef | None = None
    #: The Assembler's body-free ``ext`` ``dsh-assembler:placement`` record of this step (its
    #: strategy revision, snapshot hash and per-item placement metadata), when a strategy ran.
    placement: EventRef | None = None
    #: ``request/assembly`` when a request projector changed the array actually sent.
    assembly: EventRef | None = None
    headers: tuple[EventRef, ...] = ()
    errors: tuple[EventRef, ...] = ()
    reply: EventRef | None = None
    turn_end: EventRef | None = None
    #: The history the standard request sent is every derived user/assistant/tool message up to
    #: this seq (the last event before the step's first ``request/header``); read it through
    #: the host's messages/history routes pinned at this seq. ``request/assembly`` (above), when
    #: present, lists the array actually sent instead.
    history_through_seq: int | None = None
    #: True when the turn was longer than the scan bound and some evidence may be missing.
    scan_truncated: bool = False


class Hashes(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Fingerprints: the system message, the profile, the requested/effective call config and
    the loader's fingerprint of the whole audit."""

    system: str | None = None
    profile: str | None = None
    requested_config: str | None = None
    effective_config: str | None = None
    audit: str | None = None


class Counts(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Counts of what the record describes."""

    sections: int = 0
    sources: int = 0
    books: int = 0
    decisions: int = 0
    lore_included: int = 0
    lore_rejected: int = 0
    rendered_lore: int = 0
    diagnostics: int = 0
    input_messages: int = 0
    context_messages: int = 0
    attempts: int = 0


class Authority(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """How the record relates to official history (the original's ``authority``,
    `docs/prompt-assembly.md#traces-record`): whether the sent system message contains the profile
    the loader built, and whether the request carried the preset's parameters."""

    source: str = "host-session-log"
    system_message_seq: int | None = None
    request_header_seq: int | None = None
    tavern_profile_present: bool | None = None
    tavern_call_config_applied: bool | None = None


class AssemblyRecord(msgspec.Struct, kw_only=True, rename="camel"):
    """One canonical schema-4 record per assembly (one request step of a turn)."""

    format: str = RECORD_FORMAT
    schema_version: int = SCHEMA_VERSION
    record_id: str
    audit_id: str | None = None
    session_id: str
    session_format_version: int | None = None
    turn: int
    step: int
    created_at: str | None = None
    captured_at: str
    status: RecordStatus
    turn_end: dict[str, Any] | None = None
    selection: dict[str, Any] | None = None
    session_selection: dict[str, Any] | None = None
    world_book_selection: dict[str, Any] | None = None
    resources: dict[str, Any] | None = None
    activation_context: dict[str, Any] | None = None
    lore: dict[str, Any] | None = None
    diagnostics: list[dict[str, Any]] = msgspec.field(default_factory=list)
    composition: dict[str, Any] | None = None
    #: The Assembler strategy applied when the request was built (body-free; ``None`` on the
    #: no-strategy compatibility path or without an Assembler).
    strategy: dict[str, Any] | None = None
    system: SystemMeta = msgspec.field(default_factory=SystemMeta)
    sections: tuple[SectionMeta, ...] = ()
    parameters: dict[str, Any] | None = None
    references: References = msgspec.field(default_factory=References)
    hashes: Hashes = msgspec.field(default_factory=Hashes)
    counts: Counts = msgspec.field(default_factory=Counts)
    authority: Authority = msgspec.field(default_factory=Authority)
    #: What was left out to respect :data:`~.limits.MAX_RECORD_BYTES` (empty when nothing).
    compacted: list[str] = msgspec.field(default_factory=list)


class SessionTraceFile(msgspec.Struct, kw_only=True, rename="camel"):
    """A pre-SQLite ``assembly-audit/<sha256(sessionId)[:32]>.json``: one session's records,
    oldest first (read once, when :class:`~.store.TraceStore` imports it)."""

    format: str = FILE_FORMAT
    schema_version: int = SCHEMA_VERSION
    session_id: str
    updated_at: str
    records: list[AssemblyRecord] = msgspec.field(default_factory=list)
