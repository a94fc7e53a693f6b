"""The ``tavernMvu`` files: ``mvu-instances.json``, ``mvu-facts.json`` and legacy
``mvu-state.json``.

docs/contract/mvu.md#legacy-ledger: new state uses ``mvu-instances.json``; the old
``mvu-state.json`` keeps its bytes and is offered only as read-only resources
(``MVU_MIGRATION_REQUIRED``). docs/contract/mvu.md#budgets: the ledger file is at most 32 MiB, and
a save past it is refused, keeping the previous file and revision, never trimming history.
docs/contract/mvu.md#facts: ``mvu-facts.json`` keeps at most 2,048 body-free rows and 1 MiB.

:class:`InstancesFile` wraps the pure :class:`~innkeeper_tavern.pure.mvu.ledger.Ledger` with what
the service adds around it: templates, per-session scan watermarks, applied-reply receipts
(exactly-once application keyed by session id + assistant event seq), pre-turn checkpoints,
version coordinates, frozen seeds awaiting installation and management preferences. The whole
file — not only the ledger — is charged to the 32 MiB cap. Everything here is blocking; the
service calls it through ``asyncio.to_thread``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Final

import msgspec

from innkeeper_tavern.pure.mvu.ledger import MAX_LEDGER_BYTES, Ledger, LedgerError, Seed
from innkeeper_tavern.state.resources.atomic import atomic_write

#: File names (docs/contract/mvu.md#legacy-ledger and docs/contract/mvu.md#budgets).
INSTANCES_FILE: Final = "mvu-instances.json"
FACTS_FILE: Final = "mvu-facts.json"
LEGACY_FILE: Final = "mvu-state.json"
#: Format version of ``mvu-instances.json``.
INSTANCES_VERSION: Final = 1
#: Facts kept, all sessions together (docs/contract/mvu.md#facts).
MAX_FACT_ROWS: Final = 2_048
MAX_FACTS_BYTES: Final = 1024 * 1024
#: Bytes of a legacy ``mvu-state.json`` read for display (it may never be larger than the
#: ledger cap it was written under).
MAX_LEGACY_BYTES: Final = MAX_LEDGER_BYTES

_ENCODER: Final = msgspec.json.Encoder(order="sorted")


class TemplateRecord(msgspec.Struct, kw_only=True, rename="camel"):
    """A discovered template: where it comes from and its stored preference."""

    id: str
    character_id: str | None
    version_key: str
    discovered_at: str
    management_mode: str = "native"


class KeptOpening(msgspec.Struct, kw_only=True, rename="camel", frozen=True):
    """A greeting's opening left by a greeting switch: the ledger revision holding it (the
    player's edits included) and the template version it was generated from."""

    revision: int
    version_key: str


class SessionOpening(msgspec.Struct, kw_only=True, rename="camel", frozen=True):
    """Before a session's first turn: which greeting's opening its instance ``state_id`` holds
    and the other greetings' openings seen so far (before the first send each
    greeting keeps its own variables: docs/contract/mvu-cards.md#opening-snapshot)."""

    state_id: str
    greeting_index: int
    kept: dict[str, KeptOpening] = msgspec.field(default_factory=dict)


class SessionRecord(msgspec.Struct, kw_only=True, rename="camel"):
    """What the service knows of one session: identity, scan watermark and its instances.

    ``scanned_through`` is the last event seq whose completed turns were considered; replies at
    or below it are never applied again. ``blocked`` holds the reason automatic initialization
    is refused (a pending seed for this target, missing fork evidence).
    """

    created_at: str
    scanned_through: int = 0
    seed_length: int = 0
    state_ids: list[str] = msgspec.field(default_factory=list)
    blocked: str | None = None
    #: The greeting openings before the first turn (``None``: started, forked or unknown).
    opening: SessionOpening | None = None


class AppliedRecord(msgspec.Struct, kw_only=True, rename="camel"):
    """The receipt of one assistant reply (applied, unchanged or failed), keyed by its seq."""

    state_id: str
    turn: int
    outcome: str
    at: str
    revision_before: int
    revision: int
    code: str | None = None
    diagnostics: int = 0
    processor: str | None = None


class CheckpointRecord(msgspec.Struct, kw_only=True, rename="camel"):
    """The frozen pre-turn baseline of one turn (never overwritten by later steps)."""

    state_id: str
    revision: int
    content_sha256: str
    at: str
    claim_seq: int | None = None


class PendingSeed(msgspec.Struct, kw_only=True, rename="camel"):
    """A captured seed awaiting :meth:`installSessionSeed`."""

    seed: Seed
    kind: str
    source_session_id: str
    template_id: str
    at_event_id: int
    prefix_end_event_id: int | None = None
    target_session_id: str | None = None
    installed_in: str | None = None


class ModeReceipt(msgspec.Struct, kw_only=True, rename="camel"):
    """An idempotent ``setManagementMode`` receipt."""

    request_sha256: str
    state_id: str
    mode: str
    revision: int
    at: str


class InstancesFile(msgspec.Struct, kw_only=True, rename="camel"):
    """The whole ``mvu-instances.json`` document."""

    version: int = INSTANCES_VERSION
    ledger: Ledger = msgspec.field(default_factory=Ledger)
    templates: dict[str, TemplateRecord] = msgspec.field(default_factory=dict)
    sessions: dict[str, SessionRecord] = msgspec.field(default_factory=dict)
    applied: dict[str, dict[str, AppliedRecord]] = msgspec.field(default_factory=dict)
    checkpoints: dict[str, dict[str, CheckpointRecord]] = msgspec.field(default_factory=dict)
    #: ``state id -> [[revision, event seq], ...]``: the session coordinate of every version,
    #: so a fork at seq N is seeded from the version current at N, never a later one.
    coordinates: dict[str, list[tuple[int, int]]] = msgspec.field(default_factory=dict)
    #: ``state id -> session id`` of manual resources (``copy``), which keep the source's access.
    owners: dict[str, str] = msgspec.field(default_factory=dict)
    pending_seeds: dict[str, PendingSeed] = msgspec.field(default_factory=dict)
    stored_modes: dict[str, str] = msgspec.field(default_factory=dict)
    #: Definitions discovered at run time (``discover({definition:{id, ...}, sessionId})``),
    #: as validated ``mvu.resources[]`` entries whose ``sessionIds`` are the granted sessions.
    discovered: dict[str, dict[str, Any]] = msgspec.field(default_factory=dict)
    mode_receipts: dict[str, dict[str, ModeReceipt]] = msgspec.field(default_factory=dict)


class FactsFile(msgspec.Struct, kw_only=True):
    """``mvu-facts.json``: body-free trigger rows, oldest first."""

    version: int = 1
    rows: list[dict[str, Any]] = msgspec.field(default_factory=list)


def encode_instances(doc: InstancesFile) -> bytes:
    """The document as written (sorted keys, compact JSON)."""
    return _ENCODER.encode(doc)


def check_size(data: bytes) -> None:
    """Refuse a document over the combined ledger cap (``MVU_LEDGER_TOO_LARGE``)."""
    if len(data) > MAX_LEDGER_BYTES:
        raise LedgerError(
            f"the MVU ledger would be {len(data)} bytes; at most {MAX_LEDGER_BYTES} are allowed",
            code="MVU_LEDGER_TOO_LARGE",
        )


def load_instances(root: Path) -> InstancesFile:
    """Read ``mvu-instances.json`` (a new document when absent). A corrupt file raises: the
    service must not start over it and silently lose state."""
    path = root / INSTANCES_FILE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return InstancesFile()
    doc = msgspec.json.decode(data, type=InstancesFile)
    if doc.version != INSTANCES_VERSION:
        raise ValueError(f"{INSTANCES_FILE} has format version {doc.version}; expected 1")
    return doc


def save_instances(root: Path, data: bytes) -> None:
    """Publish already-encoded and size-checked bytes atomically."""
    atomic_write(root / INSTANCES_FILE, data)


def load_facts(root: Path, logger: logging.Logger) -> FactsFile:
    """Read ``mvu-facts.json``; an unreadable file starts empty (facts are optional evidence,
    and a missing one proves nothing: docs/contract/mvu.md#facts)."""
    try:
        return msgspec.json.decode((root / FACTS_FILE).read_bytes(), type=FactsFile)
    except FileNotFoundError:
        return FactsFile()
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        logger.warning("%s is unreadable; facts start empty", FACTS_FILE)
        return FactsFile()


def trim_facts(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], bytes]:
    """Drop the oldest rows until at most :data:`MAX_FACT_ROWS` rows and
    :data:`MAX_FACTS_BYTES` bytes remain; returns the rows and their encoded file."""
    rows = rows[-MAX_FACT_ROWS:]
    sizes = [len(_ENCODER.encode(row)) + 1 for row in rows]
    total = sum(sizes) + 32
    start = 0
    while total > MAX_FACTS_BYTES and start < len(rows):
        total -= sizes[start]
        start += 1
    rows = rows[start:]
    return rows, _ENCODER.encode(FactsFile(rows=rows))


def save_facts(root: Path, data: bytes) -> None:
    """Publish the facts file atomically."""
    atomic_write(root / FACTS_FILE, data)


class LegacyResource(msgspec.Struct, kw_only=True):
    """One read-only resource from ``mvu-state.json``."""

    id: str
    content: dict[str, Any] | None
    revision: int
    source_error: str | None = None


def load_legacy(root: Path) -> list[LegacyResource]:
    """Read ``mvu-state.json`` without ever changing it.

    The old file's layout is not in the contract we have, so it is read leniently: a top-level
    ``resources``/``states`` object or array of ``{id, content|variables|value, revision?}``
    entries, or a map of id to record. Anything else becomes one resource with a
    ``sourceError``.
    """
    path = root / LEGACY_FILE
    try:
        if path.stat().st_size > MAX_LEGACY_BYTES:
            return [LegacyResource(id="mvu:legacy", content=None, revision=0,
                                   source_error="mvu-state.json is too large")]  # fmt: skip
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError:
        return [LegacyResource(id="mvu:legacy", content=None, revision=0,
                               source_error="mvu-state.json is unreadable")]  # fmt: skip
    try:
        raw = msgspec.json.decode(data)
    except msgspec.DecodeError:
        return [LegacyResource(id="mvu:legacy", content=None, revision=0,
                               source_error="mvu-state.json is not JSON")]  # fmt: skip
    container: Any = raw
    if isinstance(raw, dict):
        for key in ("resources", "states", "instances"):
            if key in raw:
                container = raw[key]
                break
    items: list[tuple[str, Any]] = []
    if isinstance(container, dict):
        items = [(str(k), v) for k, v in container.items()]
    elif isinstance(container, list):
        items = [(str(v.get("id", i)) if isinstance(v, dict) else str(i), v)
                 for i, v in enumerate(container)]  # fmt: skip
    out: list[LegacyResource] = []
    for resource_id, value in items:
        content: Any = None
        revision = 0
        if isinstance(value, dict):
            for key in ("content", "variables", "value", "state"):
                if isinstance(value.get(key), dict):
                    content = value[key]
                    break
            else:
                content = value if "stat_data" in value else None
            rev = value.get("revision")
            revision = rev if isinstance(rev, int) and not isinstance(rev, bool) else 0
        error = None if isinstance(content, dict) else "no variables object in this entry"
        out.append(LegacyResource(id=resource_id, content=content, revision=revision,
                                  source_error=error))  # fmt: skip
    return out


__all__ = [
    "FACTS_FILE",
    "INSTANCES_FILE",
    "LEGACY_FILE",
    "MAX_FACTS_BYTES",
    "MAX_FACT_ROWS",
    "AppliedRecord",
    "CheckpointRecord",
    "FactsFile",
    "InstancesFile",
    "LegacyResource",
    "ModeReceipt",
    "PendingSeed",
    "SessionRecord",
    "TemplateRecord",
    "check_size",
    "encode_instances",
    "load_facts",
    "load_instances",
    "load_legacy",
    "save_facts",
    "save_instances",
    "trim_facts",
]
