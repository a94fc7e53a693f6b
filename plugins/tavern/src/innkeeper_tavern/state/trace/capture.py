"""Turn end → canonical records: the loader's audit joined with the turn's durable evidence.

At ``turn/ended`` every event of the turn is durable. :func:`read_turn` reads the turn back
(newest first, one pinned snapshot, bounded), :func:`segment` splits it into request steps (a
``claim`` splice of the turn starts a step, exactly as the host's turn loop claims; a step after
a reply that called tools starts at its first event when it claimed nothing), and
:func:`build_record` joins one step's evidence with the profile loader's body-free audit of the
same step. The system message text is only read to locate and hash the profile inside it; it is
never stored.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from innkeeper_hostapi.assembly import AppliedStrategy
from innkeeper_hostapi.sessions import (
    AssistantMessage,
    EventBase,
    ExtensionEvent,
    InboxSpliced,
    RequestAssembly,
    RequestError,
    RequestHeader,
    SessionController,
    SessionEvent,
    SystemMessage,
    TurnEnd,
    TurnStart,
    UserMessage,
    text_of,
)

from .limits import (
    MAX_DIAGNOSTICS,
    MAX_REFS_PER_LIST,
    MAX_TURN_SCAN_EVENTS,
    SCAN_FIRST_PAGE,
    SCAN_MAX_PAGE,
)
from .model import (
    AssemblyRecord,
    Authority,
    Counts,
    EventRef,
    Hashes,
    References,
    SectionMeta,
    SourceMeta,
    Span,
    SystemMeta,
)

__all__ = [
    "StepEvidence",
    "TurnEvidence",
    "TurnReads",
    "build_record",
    "event_sha256",
    "locate_profile",
    "place_in_system",
    "read_turn",
    "ref_of",
    "segment",
    "strategy_metadata",
]

#: The Assembler's per-step placement record (`docs/assembler.md` "Evidence").
PLACEMENT_EVENT = "dsh-assembler:placement"
#: How the host joins sections, and how the loader joins parts inside its section.
JOINER = b"\n\n"
_PARAM_KEYS = ("temperature", "maxTokens", "reasoningEffort", "stop")


def event_sha256(data: EventBase) -> str:
    """SHA-256 of an event payload's canonical UTF-8 JSON (what a reference pins)."""
    return hashlib.sha256(msgspec.json.encode(data)).hexdigest()


def ref_of(event: SessionEvent) -> EventRef:
    """A reference to ``event``."""
    data = event.data
    message_id = getattr(data, "message_id", None)
    attempt = data.attempt if isinstance(data, RequestHeader | RequestError) else None
    return EventRef(
        type=event.type,
        seq=event.seq,
        sha256=event_sha256(data),
        message_id=message_id if isinstance(message_id, str) else None,
        attempt=attempt,
    )


@dataclass(slots=True)
class StepEvidence:
    """The durable events of one request step."""

    #: The step's claim splice; ``None`` for a tool step that claimed no steering input.
    claim: SessionEvent | None
    inputs: list[SessionEvent] = field(default_factory=list)
    context: list[SessionEvent] = field(default_factory=list)
    system: SessionEvent | None = None
    placement: SessionEvent | None = None
    assembly: SessionEvent | None = None
    headers: list[SessionEvent] = field(default_factory=list)
    errors: list[SessionEvent] = field(default_factory=list)
    reply: SessionEvent | None = None


@dataclass(slots=True)
class TurnEvidence:
    """A turn's steps, its ``turn/end`` and whether the scan bound cut it."""

    steps: list[StepEvidence]
    turn_end: SessionEvent | None
    truncated: bool


async def read_turn(
    sessions: SessionController,
    session_id: str,
    turn: int,
    *,
    max_events: int = MAX_TURN_SCAN_EVENTS,
) -> tuple[list[SessionEvent], bool]:
    """The events from ``turn/start`` of ``turn`` to the end of the log, oldest first, and
    whether ``max_events`` stopped the read before the turn's start was found."""
    found: list[SessionEvent] = []
    before: int | None = None
    through: int | None = None
    size = SCAN_FIRST_PAGE
    while len(found) < max_events:
        page = await sessions.page(
            session_id,
            before_seq=before,
            limit=min(size, max_events - len(found)),
            through_seq=through,
        )
        size = min(size * 2, SCAN_MAX_PAGE)
        through = page.through_seq
        for event in page.events:
            found.append(event)
            if isinstance(event.data, TurnStart) and event.data.turn == turn:
                found.reverse()
                return found, False
        if not page.has_more or page.next_before_seq is None:
            break
        before = page.next_before_seq
    found.reverse()
    return found, len(found) >= max_events


class TurnReads:
    """The last ended turn's events, read once for the ``turn/ended`` listeners that need them.

    The loader's listener (the turn's request headers) and the recorder's (the turn's evidence)
    both read the turn back right after it ended, one after the other, once its ``turn/end`` is
    in the log (so both see the whole turn): the first :meth:`read` pages the log and keeps the
    result for that session and turn, the next returns it, and :meth:`release` drops it. Only
    the latest read is kept.
    """

    def __init__(self) -> None:
        self._kept: tuple[str, int, list[SessionEvent], bool] | None = None

    async def read(
        self, sessions: SessionController, session_id: str, turn: int
    ) -> tuple[list[SessionEvent], bool]:
        """:func:`read_turn` of ``turn``, or what the previous read of it returned."""
        kept = self._kept
        if kept is not None and kept[0] == session_id and kept[1] == turn:
            return kept[2], kept[3]
        events, truncated = await read_turn(sessions, session_id, turn)
        self._kept = (session_id, turn, events, truncated)
        return events, truncated

    def release(self, session_id: str, turn: int) -> None:
        """Forget the read of ``turn`` (its last listener is done with it)."""
        if self._kept is not None and self._kept[:2] == (session_id, turn):
            self._kept = None


def _starts_tool_step(current: StepEvidence, data: EventBase, turn: int) -> bool:
    """Whether ``data`` opens the step that follows ``current``'s tool-calling reply."""
    reply = current.reply.data if current.reply is not None else None
    if not isinstance(reply, AssistantMessage) or not reply.tool_calls:
        return False
    return _opens_request(data, turn)


def _opens_request(data: EventBase, turn: int) -> bool:
    """Whether ``data`` is the first event a step of ``turn`` writes for its request."""
    if isinstance(data, SystemMessage | RequestHeader | RequestAssembly):
        return data.turn == turn
    return (
        isinstance(data, ExtensionEvent)
        and data.name == PLACEMENT_EVENT
        and data.payload.get("turn") == turn
    )


def segment(events: Sequence[SessionEvent], turn: int, *, truncated: bool = False) -> TurnEvidence:
    """Split a turn's events into steps: each starts at one of the turn's claim splices, or,
    after a reply that called tools, at the next step's first event (its system message, or its
    request when it has none) when that step claimed no steering input. A turn asked for
    without input (a group's "Next speaker", auto mode) claims nothing: its first step starts
    at its first such event."""
    steps: list[StepEvidence] = []
    current: StepEvidence | None = None
    turn_end: SessionEvent | None = None
    taking_input = False
    for event in events:
        data = event.data
        if isinstance(data, InboxSpliced) and data.op == "claim" and data.turn == turn:
            current = StepEvidence(claim=event)
            steps.append(current)
            taking_input = True
            continue
        if (current is not None and _starts_tool_step(current, data, turn)) or (
            current is None and _opens_request(data, turn)
        ):
            current = StepEvidence(claim=None)
            steps.append(current)
        if isinstance(data, TurnEnd) and data.turn == turn:
            turn_end = event
            break
        if current is None:
            continue
        if isinstance(data, UserMessage):
            if data.origin.kind == "context":
                if not current.headers:
                    current.context.append(event)
            elif taking_input and data.turn == turn:
                current.inputs.append(event)
            continue
        taking_input = False
        if isinstance(data, SystemMessage) and data.turn == turn and current.system is None:
            current.system = event
        elif isinstance(data, RequestAssembly) and data.turn == turn:
            current.assembly = event
        elif (
            isinstance(data, ExtensionEvent)
            and data.name == PLACEMENT_EVENT
            and data.payload.get("turn") == turn
            and current.placement is None
        ):
            current.placement = event
        elif isinstance(data, RequestHeader) and data.turn == turn:
            current.headers.append(event)
        elif isinstance(data, RequestError) and data.turn == turn:
            current.errors.append(event)
        elif isinstance(data, AssistantMessage) and data.turn == turn:
            current.reply = event
    return TurnEvidence(steps=steps, turn_end=turn_end, truncated=truncated)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def strategy_metadata(applied: AppliedStrategy) -> dict[str, Any]:
    """The applied Assembler strategy as audit metadata: ids, backend, modules and placements;
    the Author's Note text only as size and SHA-256, module options only as their keys."""
    strategy = applied.strategy
    note = strategy.authors_note
    note_bytes = note.text.encode()
    return {
        "id": strategy.id,
        "name": strategy.name,
        "revision": strategy.revision,
        "backend": strategy.backend,
        "appliedAt": applied.applied_at,
        "sha256": applied.sha256,
        "maxProfileBytes": strategy.max_profile_bytes,
        "modules": [
            {
                "source": module.source,
                "keys": list(module.keys),
                "placement": (
                    msgspec.to_builtins(module.placement) if module.placement is not None else None
                ),
                "enabled": module.enabled,
                "optionKeys": sorted(module.options),
            }
            for module in strategy.modules
        ],
        "authorsNote": {
            "position": note.position,
            "depth": note.depth,
            "role": note.role,
            "bytes": len(note_bytes),
            "sha256": _sha(note_bytes) if note_bytes else None,
        },
    }


def locate_profile(
    system: bytes, parts: Sequence[dict[str, Any]], profile_bytes: int, profile_sha: str | None
) -> tuple[Span, list[Span]] | None:
    """Find the profile section inside the system message by its size and SHA-256.

    Sections are joined by a blank line, so the profile starts at 0 or right after a joiner;
    each candidate is checked by the first part's hash, then the whole profile's. Returns the
    profile span and the span of every part, or ``None`` when the message does not contain it.
    """
    if not profile_sha or profile_bytes <= 0 or profile_bytes > len(system):
        return None
    first = parts[0] if parts else None
    start = 0
    while start >= 0 and start + profile_bytes <= len(system):
        end = start + profile_bytes
        boundary = end == len(system) or system[end : end + len(JOINER)] == JOINER
        first_ok = first is None or (
            isinstance(first.get("bytes"), int)
            and _sha(system[start : start + first["bytes"]]) == first.get("sha256")
        )
        if boundary and first_ok and _sha(system[start:end]) == profile_sha:
            spans: list[Span] = []
            offset = start
            for part in parts:
                size = part.get("bytes")
                if not isinstance(size, int):
                    return Span(start=start, end=end), []
                spans.append(Span(start=offset, end=offset + size))
                offset += size + len(JOINER)
            return Span(start=start, end=end), spans
        found = system.find(JOINER, start)
        start = found + len(JOINER) if found >= 0 else -1
    return None


def _sources(part: dict[str, Any]) -> tuple[SourceMeta, ...]:
    out: list[SourceMeta] = []
    for source in part.get("sources") or ():
        if isinstance(source, str):
            out.append(SourceMeta(id=source, kind=source.split(":", 1)[0]))
    return tuple(out)


def _config_hash(value: Any) -> str | None:
    if value is None:
        return None
    return _sha(msgspec.json.encode(value, order="sorted"))


def _refs(events: Sequence[SessionEvent]) -> tuple[EventRef, ...]:
    return tuple(ref_of(e) for e in events[:MAX_REFS_PER_LIST])


def _books(lore: dict[str, Any] | None) -> list[dict[str, Any]]:
    books = (lore or {}).get("books")
    return [b for b in books if isinstance(b, dict)] if isinstance(books, list) else []


def _step_parameters(
    audit_parameters: dict[str, Any] | None, headers: Sequence[SessionEvent]
) -> dict[str, Any]:
    """The loader's proposed/requested/omitted/fallbacks with this step's own attempts."""
    base = dict(audit_parameters or {})
    out: dict[str, Any] = {
        "proposed": base.get("proposed"),
        "admission": base.get("admission"),
        "requested": base.get("requested"),
        "draft": base.get("draft"),
        "omitted": list(base.get("omitted") or []),
        "fallbacks": list(base.get("fallbacks") or []),
        "effective": None,
        "attempts": [],
    }
    attempts: list[dict[str, Any]] = []
    for event in headers:
        header = event.data
        assert isinstance(header, RequestHeader)
        attempts.append(
            {
                "attempt": header.attempt,
                "seq": event.seq,
                "provider": header.provider,
                "model": header.model,
                "requested": msgspec.to_builtins(header.requested),
                "effective": msgspec.to_builtins(header.effective),
                "omitted": list(header.omitted),
            }
        )
    out["attempts"] = attempts
    if attempts:
        out["effective"] = attempts[-1]["effective"]
        out["attempt"] = attempts[-1]["attempt"]
    return out


def _call_config_applied(parameters: dict[str, Any]) -> bool | None:
    requested = parameters.get("requested")
    attempts = parameters.get("attempts") or []
    if not isinstance(requested, dict) or not attempts:
        return None
    sent = attempts[0].get("requested") or {}
    return all(sent.get(k) == v for k, v in requested.items() if k in _PARAM_KEYS)


def _status(step: StepEvidence, turn_end: SessionEvent | None, last_step: bool) -> str:
    if not step.headers:
        return "not-sent"
    if step.reply is not None:
        reply = step.reply.data
        assert isinstance(reply, AssistantMessage)
        return "interrupted" if reply.interrupted else "sent"
    if last_step and turn_end is not None:
        end = turn_end.data
        assert isinstance(end, TurnEnd)
        return "interrupted" if end.reason.kind == "interrupted" else "failed"
    return "failed"


def build_record(
    audit: dict[str, Any],
    *,
    session_id: str,
    turn: int,
    step: int,
    evidence: StepEvidence | None,
    turn_end: SessionEvent | None,
    last_step: bool,
    scan_truncated: bool,
    session_format_version: int | None,
    captured_at: str,
    strategy: dict[str, Any] | None = None,
) -> AssemblyRecord:
    """One canonical record from the loader's audit dict and the step's durable evidence.

    Only metadata crosses over: the system text is read by the caller, hashed and located
    (:func:`locate_profile`), never passed in here.
    """
    composition = dict(audit.get("composition") or {})
    parts = [p for p in composition.pop("parts", None) or () if isinstance(p, dict)]
    lore = audit.get("lore") if isinstance(audit.get("lore"), dict) else None
    books = _books(lore)
    decisions = [d for b in books for d in b.get("decisions") or () if isinstance(d, dict)]
    diagnostics = [d for d in audit.get("diagnostics") or () if isinstance(d, dict)]
    headers = evidence.headers if evidence else []
    parameters = _step_parameters(audit.get("parameters"), headers)
    sections = tuple(
        SectionMeta(
            name=str(p.get("name", "")),
            identifier=str(p.get("identifier", "")),
            kind=str(p.get("kind", "")),
            role=str(p.get("role", "system")),
            bytes=int(p.get("bytes") or 0),
            sha256=p.get("sha256") if isinstance(p.get("sha256"), str) else None,
            sources=_sources(p),
        )
        for p in parts
    )
    end_info: dict[str, Any] | None = None
    if turn_end is not None and last_step:
        end = turn_end.data
        assert isinstance(end, TurnEnd)
        end_info = {"kind": end.reason.kind, "code": end.reason.code}
    references = References(scan_truncated=scan_truncated)
    if evidence is not None:
        references = References(
            system=ref_of(evidence.system) if evidence.system else None,
            input=_refs(evidence.inputs),
            context=_refs(evidence.context),
            claim=ref_of(evidence.claim) if evidence.claim else None,
            placement=ref_of(evidence.placement) if evidence.placement else None,
            assembly=ref_of(evidence.assembly) if evidence.assembly else None,
            headers=_refs(evidence.headers),
            errors=_refs(evidence.errors),
            reply=ref_of(evidence.reply) if evidence.reply else None,
            turn_end=ref_of(turn_end) if turn_end is not None and last_step else None,
            history_through_seq=headers[0].seq - 1 if headers else None,
            scan_truncated=scan_truncated,
        )
    status = _status(evidence, turn_end, last_step) if evidence else "not-sent"
    rendered = (lore or {}).get("renderedLoreIds") or []
    record = AssemblyRecord(
        record_id=f"t{turn}-s{step}",
        audit_id=audit.get("recordId") if isinstance(audit.get("recordId"), str) else None,
        session_id=session_id,
        session_format_version=session_format_version,
        turn=turn,
        step=step,
        created_at=audit.get("createdAt") if isinstance(audit.get("createdAt"), str) else None,
        captured_at=captured_at,
        status=status,  # type: ignore[arg-type]
        turn_end=end_info,
        selection=audit.get("selection"),
        session_selection=audit.get("sessionSelection"),
        world_book_selection=audit.get("worldBookSelection"),
        resources=audit.get("resources"),
        activation_context=audit.get("activationContext"),
        lore=lore,
        diagnostics=diagnostics[:MAX_DIAGNOSTICS],
        composition=composition or None,
        strategy=strategy,
        system=SystemMeta(
            profile_bytes=int(composition.get("profileBytes") or 0),
            profile_sha256=composition.get("profileSha256"),
        ),
        sections=sections,
        parameters=parameters,
        references=references,
        hashes=Hashes(
            profile=composition.get("profileSha256"),
            requested_config=_config_hash(parameters.get("requested")),
            effective_config=_config_hash(parameters.get("effective")),
            audit=audit.get("fingerprint") if isinstance(audit.get("fingerprint"), str) else None,
        ),
        counts=Counts(
            sections=len(sections),
            sources=sum(len(s.sources) for s in sections),
            books=len(books),
            decisions=len(decisions),
            lore_included=sum(1 for d in decisions if d.get("decision") == "included"),
            lore_rejected=sum(1 for d in decisions if d.get("decision") == "rejected"),
            rendered_lore=len(rendered) if isinstance(rendered, list) else 0,
            diagnostics=len(diagnostics),
            input_messages=len(references.input),
            context_messages=len(references.context),
            attempts=len(headers),
        ),
        authority=Authority(
            system_message_seq=evidence.system.seq if evidence and evidence.system else None,
            request_header_seq=headers[-1].seq if headers else None,
            tavern_call_config_applied=_call_config_applied(parameters),
        ),
    )
    return record


def place_in_system(record: AssemblyRecord, system_event: SessionEvent | None) -> AssemblyRecord:
    """Hash the sent system message and locate the profile and its parts inside it (blocking:
    call it off the event loop for large prompts). The text itself is dropped afterwards."""
    if system_event is None or not isinstance(system_event.data, SystemMessage):
        authority = msgspec.structs.replace(
            record.authority, tavern_profile_present=False if record.system.profile_sha256 else None
        )
        return msgspec.structs.replace(record, authority=authority)
    text = text_of(system_event.data.content).encode()
    system_sha = _sha(text)
    parts = [{"bytes": s.bytes, "sha256": s.sha256} for s in record.sections]
    located = locate_profile(text, parts, record.system.profile_bytes, record.system.profile_sha256)
    sections = record.sections
    profile_span: Span | None = None
    if located is not None:
        profile_span, spans = located
        if len(spans) == len(sections):
            sections = tuple(
                msgspec.structs.replace(s, span=span)
                for s, span in zip(sections, spans, strict=True)
            )
    system = msgspec.structs.replace(
        record.system,
        bytes=len(text),
        sha256=system_sha,
        profile_span=profile_span,
        other_bytes=len(text) - (record.system.profile_bytes if profile_span else 0),
    )
    authority = msgspec.structs.replace(
        record.authority,
        tavern_profile_present=(profile_span is not None) if record.system.profile_sha256 else None,
    )
    hashes = msgspec.structs.replace(record.hashes, system=system_sha)
    return msgspec.structs.replace(
        record, system=system, sections=sections, authority=authority, hashes=hashes
    )
