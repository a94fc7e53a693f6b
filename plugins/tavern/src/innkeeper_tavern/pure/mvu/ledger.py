"""A pure model of the MVU state ledger (no files, no host): the core of ``tavernMvu``.

docs/contract/mvu.md#identity and docs/contract/mvu.md#host-service: one state instance per
session (``mvu:instance-*`` derived from the template and the session's ``id + createdAt``), one
current value per state id, CAS revisions, idempotent ``operationId`` receipts (an identical
replay returns the original receipt, a conflicting reuse is rejected), history with before/after
evidence, fork seeds that copy content and history without receipts, and the combined 32 MiB
ledger limit (docs/contract/mvu.md#budgets: exceeding it refuses the save and keeps the previous
file and revision).

Every operation takes a :class:`Ledger` and returns a new one (the input is never changed); the
clock is an argument. The service persists the result atomically and keeps the old ledger when an
operation raises.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, Final, Literal

import msgspec

from .jsvalue import Json
from .limits import MvuError, check_variables

#: Bytes of the whole ledger file (docs/contract/mvu.md#budgets).
MAX_LEDGER_BYTES: Final = 32 * 1024 * 1024
#: Prefix of state-instance ids (docs/contract/mvu.md#identity).
INSTANCE_PREFIX: Final = "mvu:instance-"
#: Hex digits of the identity digest in an instance id.
INSTANCE_DIGEST_CHARS: Final = 32
#: Characters of an operation id (a client-chosen token; bounded like any key).
MAX_OPERATION_ID_CHARS: Final = 200
#: Ledger file format version.
LEDGER_VERSION: Final = 1

ManagementMode = Literal["native", "managed"]
HistoryKind = Literal["initial", "reply", "edit", "seed"]

_ENCODER: Final = msgspec.json.Encoder(order="sorted")


class LedgerError(MvuError):
    """An operation on the ledger is refused; the previous ledger stays as it was."""

    code = "MVU_LEDGER_ERROR"


def _sha256(value: Any) -> str:
    return hashlib.sha256(_ENCODER.encode(value)).hexdigest()


class InstanceIdentity(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Who a state instance belongs to: the template and the trusted session identity."""

    template_id: str
    session_id: str
    session_created_at: str


#: Interpreter version of new instances' command values (:attr:`StateRecord.interpreter_version`).
CURRENT_VALUE_INTERPRETER: Final = 3


class StateRecord(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The current value of one state id."""

    id: str
    template_id: str
    instance: InstanceIdentity | None
    content: dict[str, Any]
    content_sha256: str
    revision: int
    created_at: str
    updated_at: str
    management_mode: ManagementMode = "native"
    inherited_from: dict[str, Any] | None = None
    #: Interpreter version of its command values in native (``$meta``) mode: 3 adds mathjs
    #: assignment, matrices and one-based indexing (:mod:`.matrix`). Instances stored before
    #: version 3 existed read as 2 and keep their behaviour.
    interpreter_version: int = 2


class HistoryEntry(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One committed version with the evidence linking it to the version before it."""

    revision: int
    at: str
    kind: HistoryKind
    content: dict[str, Any]
    content_sha256: str
    before_revision: int | None
    before_sha256: str | None
    operation_id: str | None = None
    source: dict[str, Any] | None = None
    inherited: bool = False


class Receipt(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The outcome of one operation, returned again for an identical replay."""

    operation_id: str
    state_id: str
    request_sha256: str
    revision_before: int
    revision: int
    changed: bool
    at: str


class Ledger(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """All states, their histories and their receipts (``mvu-instances.json``)."""

    version: int = LEDGER_VERSION
    states: dict[str, StateRecord] = msgspec.field(default_factory=dict)
    history: dict[str, list[HistoryEntry]] = msgspec.field(default_factory=dict)
    receipts: dict[str, dict[str, Receipt]] = msgspec.field(default_factory=dict)
    seeds: dict[str, str] = msgspec.field(default_factory=dict)


class Seed(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A frozen fork/swipe source: content, revision, digest and the read-only history."""

    source_id: str
    revision: int
    content: dict[str, Any]
    content_sha256: str
    history: list[HistoryEntry]
    ticket: str
    #: The source instance's :attr:`StateRecord.interpreter_version` (a fork keeps it).
    interpreter_version: int = 2


# ---------------------------------------------------------------- identity and size


def instance_id(identity: InstanceIdentity) -> str:
    """The stable ``mvu:instance-*`` id of a template instance in one session."""
    digest = _sha256(["mvu-instance", identity.template_id, identity.session_id,
                      identity.session_created_at])  # fmt: skip
    return INSTANCE_PREFIX + digest[:INSTANCE_DIGEST_CHARS]


def encode_ledger(ledger: Ledger) -> bytes:
    """The ledger as the JSON the service writes (keys sorted, compact)."""
    return _ENCODER.encode(ledger)


def decode_ledger(data: bytes) -> Ledger:
    """Read a ledger written by :func:`encode_ledger` (unknown fields are refused)."""
    return msgspec.json.decode(data, type=Ledger)


def ledger_bytes(ledger: Ledger) -> int:
    """Size in bytes of the encoded ledger."""
    return len(encode_ledger(ledger))


def check_ledger_size(ledger: Ledger) -> int:
    """Raise :class:`LedgerError` (``MVU_LEDGER_TOO_LARGE``) above :data:`MAX_LEDGER_BYTES`.

    Nothing is trimmed: the caller keeps the previous ledger, file and revision.
    """
    size = ledger_bytes(ledger)
    if size > MAX_LEDGER_BYTES:
        raise LedgerError(
            f"the ledger would be {size} bytes; at most {MAX_LEDGER_BYTES} are allowed",
            code="MVU_LEDGER_TOO_LARGE",
        )
    return size


# ---------------------------------------------------------------- operations


def _with(ledger: Ledger, **changes: Any) -> Ledger:
    return msgspec.structs.replace(ledger, **changes)


def _commit(ledger: Ledger) -> Ledger:
    check_ledger_size(ledger)
    return ledger


def read(ledger: Ledger, state_id: str) -> StateRecord | None:
    """The current record of ``state_id`` or ``None``."""
    return ledger.states.get(state_id)


def create_instance(
    ledger: Ledger,
    identity: InstanceIdentity,
    content: Mapping[str, Json],
    *,
    now: str,
    management_mode: ManagementMode = "native",
    interpreter_version: int = CURRENT_VALUE_INTERPRETER,
) -> tuple[Ledger, StateRecord]:
    """Allocate the instance of ``identity`` with initial ``content`` (idempotent).

    An existing instance of the same identity is returned unchanged: selecting the card again
    never reinitializes content.
    """
    state_id = instance_id(identity)
    existing = ledger.states.get(state_id)
    if existing is not None:
        if existing.instance != identity:
            raise LedgerError("instance id collision", code="MVU_IDENTITY_CONFLICT")
        return ledger, existing
    body = dict(content)
    check_variables(body)
    digest = _sha256(body)
    record = StateRecord(
        id=state_id,
        template_id=identity.template_id,
        instance=identity,
        content=body,
        content_sha256=digest,
        revision=1,
        created_at=now,
        updated_at=now,
        management_mode=management_mode,
        interpreter_version=interpreter_version,
    )
    entry = HistoryEntry(1, now, "initial", body, digest, None, None)
    new = _with(
        ledger,
        states={**ledger.states, state_id: record},
        history={**ledger.history, state_id: [entry]},
    )
    return _commit(new), record


def update(
    ledger: Ledger,
    state_id: str,
    content: Mapping[str, Json],
    *,
    expected_revision: int,
    operation_id: str,
    now: str,
    kind: HistoryKind = "edit",
    source: Mapping[str, Json] | None = None,
) -> tuple[Ledger, Receipt]:
    """CAS write of the whole content of ``state_id``.

    * the same ``operation_id`` with the same request returns the original receipt and the
      ledger unchanged; with a different request it raises ``MVU_OPERATION_CONFLICT``;
    * ``expected_revision`` other than the current revision raises ``MVU_REVISION_CONFLICT``;
    * content over the per-state budget raises the engine's budget error; a ledger over
      :data:`MAX_LEDGER_BYTES` raises ``MVU_LEDGER_TOO_LARGE``.
    """
    if not operation_id or len(operation_id) > MAX_OPERATION_ID_CHARS:
        raise LedgerError("operationId must be 1-200 characters", code="MVU_INVALID_OPERATION")
    body = dict(content)
    request = _sha256(["update", state_id, body, expected_revision, kind, dict(source or {})])
    previous = ledger.receipts.get(state_id, {}).get(operation_id)
    if previous is not None:
        if previous.request_sha256 == request:
            return ledger, previous
        raise LedgerError(
            f"operationId {operation_id!r} was already used for a different request",
            code="MVU_OPERATION_CONFLICT",
        )
    record = ledger.states.get(state_id)
    if record is None:
        raise LedgerError(f"no state {state_id!r}", code="MVU_NOT_FOUND")
    if expected_revision != record.revision:
        raise LedgerError(
            f"expected revision {expected_revision}, current is {record.revision}",
            code="MVU_REVISION_CONFLICT",
        )
    check_variables(body)
    digest = _sha256(body)
    changed = digest != record.content_sha256
    states = ledger.states
    history = ledger.history
    revision = record.revision
    if changed:
        revision += 1
        new_record = msgspec.structs.replace(
            record, content=body, content_sha256=digest, revision=revision, updated_at=now
        )
        entry = HistoryEntry(
            revision,
            now,
            kind,
            body,
            digest,
            record.revision,
            record.content_sha256,
            operation_id,
            dict(source) if source is not None else None,
        )
        states = {**states, state_id: new_record}
        history = {**history, state_id: [*history.get(state_id, []), entry]}
    receipt = Receipt(operation_id, state_id, request, record.revision, revision, changed, now)
    receipts = {**ledger.receipts, state_id: {**ledger.receipts.get(state_id, {}),
                                              operation_id: receipt}}  # fmt: skip
    new = _with(ledger, states=states, history=history, receipts=receipts)
    return _commit(new), receipt


def history(
    ledger: Ledger, state_id: str, *, include_before: bool = False
) -> list[dict[str, Json]]:
    """History of ``state_id``, oldest first.

    With ``include_before``, each entry gains ``beforeAvailable`` and, when the recorded
    previous version is present and its digest matches the evidence, ``before`` (its
    ``stat_data``). Inherited or missing provenance stays unknown (``beforeAvailable: False``).
    """
    entries = ledger.history.get(state_id, [])
    by_revision = {e.revision: e for e in entries}
    out: list[dict[str, Json]] = []
    for entry in entries:
        item: dict[str, Json] = {
            "revision": entry.revision,
            "at": entry.at,
            "kind": entry.kind,
            "operationId": entry.operation_id,
            "inherited": entry.inherited,
            "stat_data": entry.content.get("stat_data"),
        }
        if include_before:
            prior = by_revision.get(entry.before_revision) if entry.before_revision else None
            verified = (
                prior is not None
                and not entry.inherited
                and prior.content_sha256 == entry.before_sha256
            )
            item["beforeAvailable"] = verified
            if verified and prior is not None:
                item["before"] = prior.content.get("stat_data")
        out.append(item)
    return out


def capture_seed(
    ledger: Ledger, state_id: str, *, ticket: str, revision: int | None = None
) -> Seed | None:
    """Freeze a fork/swipe source: the content at ``revision`` (default: current) and the
    history up to it. ``None`` when there is no such state or version."""
    record = ledger.states.get(state_id)
    if record is None:
        return None
    entries = ledger.history.get(state_id, [])
    target = record.revision if revision is None else revision
    chosen = next((e for e in entries if e.revision == target), None)
    if chosen is None:
        return None
    prefix = [e for e in entries if e.revision <= target]
    return Seed(
        state_id,
        target,
        chosen.content,
        chosen.content_sha256,
        prefix,
        ticket,
        interpreter_version=record.interpreter_version,
    )


def install_seed(
    ledger: Ledger, seed: Seed, child: InstanceIdentity, *, now: str
) -> tuple[Ledger, StateRecord]:
    """Install a child instance from ``seed`` atomically (idempotent per ticket and target).

    The child inherits content and a read-only copy of the history (marked ``inherited``); it
    does not inherit receipts (operation ids). A ticket reused for another target, or a
    target that already holds different state, is refused.
    """
    child_id = instance_id(child)
    if _sha256(seed.content) != seed.content_sha256:
        raise LedgerError("seed content does not match its digest", code="MVU_SEED_INVALID")
    installed = ledger.seeds.get(seed.ticket)
    if installed is not None:
        if installed != child_id:
            raise LedgerError("seed ticket already installed elsewhere", code="MVU_SEED_CONFLICT")
        return ledger, ledger.states[child_id]
    if child_id in ledger.states:
        raise LedgerError("the target session already has state", code="MVU_SEED_CONFLICT")
    check_variables(seed.content)
    inherited = [msgspec.structs.replace(e, inherited=True) for e in seed.history]
    entry = HistoryEntry(
        seed.revision + 1,
        now,
        "seed",
        seed.content,
        seed.content_sha256,
        seed.revision,
        seed.content_sha256,
        source={"ticket": seed.ticket, "from": seed.source_id, "revision": seed.revision},
    )
    parent = ledger.states.get(seed.source_id)
    record = StateRecord(
        id=child_id,
        template_id=child.template_id,
        instance=child,
        content=seed.content,
        content_sha256=seed.content_sha256,
        revision=seed.revision + 1,
        created_at=now,
        updated_at=now,
        management_mode=parent.management_mode if parent is not None else "native",
        inherited_from={"id": seed.source_id, "revision": seed.revision},
        interpreter_version=seed.interpreter_version,
    )
    new = _with(
        ledger,
        states={**ledger.states, child_id: record},
        history={**ledger.history, child_id: [*inherited, entry]},
        seeds={**ledger.seeds, seed.ticket: child_id},
    )
    return _commit(new), record
