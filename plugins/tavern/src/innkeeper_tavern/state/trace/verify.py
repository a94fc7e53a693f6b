"""Resolve a record's references against durable history and verify them.

`docs/contract/audit.md#v3`: the detail route cold-reads official history and
returns section/context bodies only after verification. Each :class:`~.model.EventRef` is read
through the host ``SESSIONS`` controller (one ``page`` of one event, O(1) whatever the session
length) and checked: the event exists at that seq, has the recorded type and the SHA-256 of its
payload matches. Anything else is reported explicitly — ``missing``, ``type-mismatch``,
``hash-mismatch`` or ``unavailable`` — and its body is withheld; nothing is ever filled in from
current configuration.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Literal

import msgspec

from innkeeper_hostapi.sessions import (
    ExtensionEvent,
    RequestAssembly,
    RequestError,
    RequestHeader,
    SessionController,
    SessionError,
    SessionEvent,
    SystemMessage,
    TurnEnd,
    UserMessage,
    text_of,
)

from .capture import event_sha256
from .model import AssemblyRecord, EventRef, SectionMeta

__all__ = ["Resolution", "assembly_detail", "resolve"]

RefStatus = Literal["verified", "missing", "type-mismatch", "hash-mismatch", "unavailable"]


@dataclass(frozen=True, slots=True)
class Resolution:
    """The outcome of resolving one reference (``event`` only when verified)."""

    ref: EventRef
    status: RefStatus
    event: SessionEvent | None = None

    def wire(self, role: str) -> dict[str, Any]:
        """Body-free description of the check."""
        return {"ref": role, "type": self.ref.type, "seq": self.ref.seq, "status": self.status}


async def resolve(sessions: SessionController | None, session_id: str, ref: EventRef) -> Resolution:
    """Read the referenced event and verify its type and hash."""
    if sessions is None:
        return Resolution(ref, "unavailable")
    try:
        page = await sessions.page(session_id, before_seq=ref.seq + 1, limit=1)
    except SessionError:
        return Resolution(ref, "unavailable")
    event = page.events[0] if page.events else None
    if event is None or event.seq != ref.seq:
        return Resolution(ref, "missing")
    if event.type != ref.type:
        return Resolution(ref, "type-mismatch")
    if event_sha256(event.data) != ref.sha256:
        return Resolution(ref, "hash-mismatch")
    return Resolution(ref, "verified", event)


def _slice(text: bytes, section: SectionMeta) -> tuple[str | None, str]:
    span = section.span
    if span is None or section.sha256 is None:
        return None, "not-located"
    chunk = text[span.start : span.end]
    if hashlib.sha256(chunk).hexdigest() != section.sha256:
        return None, "hash-mismatch"
    try:
        return chunk.decode(), "verified"
    except UnicodeDecodeError:
        return None, "hash-mismatch"


def _message_view(role: str, resolution: Resolution) -> dict[str, Any]:
    out: dict[str, Any] = {
        "ref": role,
        "seq": resolution.ref.seq,
        "messageId": resolution.ref.message_id,
        "status": resolution.status,
        "text": None,
        "origin": None,
    }
    event = resolution.event
    if event is not None and isinstance(event.data, UserMessage):
        out["text"] = text_of(event.data.content)
        out["origin"] = msgspec.to_builtins(event.data.origin)
        out["role"] = "user"
    return out


async def assembly_detail(
    record: AssemblyRecord, sessions: SessionController | None
) -> dict[str, Any]:
    """The v3 detail body: the record plus verified bodies from durable history."""
    session_id = record.session_id
    refs = record.references
    checks: list[dict[str, Any]] = []

    async def check(role: str, ref: EventRef | None) -> Resolution | None:
        if ref is None:
            return None
        resolution = await resolve(sessions, session_id, ref)
        checks.append(resolution.wire(role))
        return resolution

    system = await check("system", refs.system)
    system_view: dict[str, Any] | None = None
    sections: list[dict[str, Any]] = []
    system_text: bytes | None = None
    if system is not None:
        host_sections: list[dict[str, Any]] | None = None
        if system.event is not None and isinstance(system.event.data, SystemMessage):
            system_text = text_of(system.event.data.content).encode()
            # The host's own record of the sections the message was assembled from.
            host_sections = [msgspec.to_builtins(x) for x in system.event.data.sections]
        system_view = {
            "seq": system.ref.seq,
            "status": system.status,
            "role": (
                system.event.data.role
                if system.event is not None and isinstance(system.event.data, SystemMessage)
                else None
            ),
            "bytes": record.system.bytes,
            "sha256": record.system.sha256,
            "text": system_text.decode() if system_text is not None else None,
            "sections": host_sections,
        }
    for section in record.sections:
        view = msgspec.to_builtins(section)
        if system_text is None:
            view["status"], view["text"] = "unavailable", None
        else:
            text, status = _slice(system_text, section)
            view["status"], view["text"] = status, text
        sections.append(view)
    context: list[dict[str, Any]] = []
    for role, group in (("input", refs.input), ("context", refs.context)):
        for ref in group:
            resolution = await check(role, ref)
            assert resolution is not None
            context.append(_message_view(role, resolution))
    await check("claim", refs.claim)
    placement = await check("placement", refs.placement)
    placement_view: dict[str, Any] | None = None
    if placement is not None:
        placement_view = {"seq": placement.ref.seq, "status": placement.status, "record": None}
        if placement.event is not None and isinstance(placement.event.data, ExtensionEvent):
            placement_view["record"] = dict(placement.event.data.payload)
    assembly = await check("assembly", refs.assembly)
    assembly_view: dict[str, Any] | None = None
    if assembly is not None:
        assembly_view = {"seq": assembly.ref.seq, "status": assembly.status, "entries": None}
        if assembly.event is not None and isinstance(assembly.event.data, RequestAssembly):
            data = assembly.event.data
            assembly_view.update(
                projector=data.projector,
                sha256=data.sha256,
                entries=msgspec.to_builtins(data.entries),
            )
    headers: list[dict[str, Any]] = []
    for ref in refs.headers:
        resolution = await check("header", ref)
        assert resolution is not None
        view = {"seq": ref.seq, "attempt": ref.attempt, "status": resolution.status}
        if resolution.event is not None and isinstance(resolution.event.data, RequestHeader):
            header = resolution.event.data
            view.update(
                provider=header.provider,
                model=header.model,
                requested=msgspec.to_builtins(header.requested),
                effective=msgspec.to_builtins(header.effective),
                omitted=list(header.omitted),
            )
        headers.append(view)
    errors: list[dict[str, Any]] = []
    for ref in refs.errors:
        resolution = await check("error", ref)
        assert resolution is not None
        view = {"seq": ref.seq, "attempt": ref.attempt, "status": resolution.status}
        if resolution.event is not None and isinstance(resolution.event.data, RequestError):
            error = resolution.event.data
            view.update(
                kind=error.kind,
                code="PROVIDER_" + error.kind.upper().replace("-", "_"),
                message=error.message,
                parameter=error.parameter,
                httpStatus=error.status,
            )
        errors.append(view)
    reply = await check("reply", refs.reply)
    turn_end = await check("turnEnd", refs.turn_end)
    failure: dict[str, Any] | None = None
    if record.status in ("failed", "interrupted") or (
        record.turn_end is not None and record.turn_end.get("kind") == "error"
    ):
        failure = {"status": "unavailable", "code": None, "message": None}
        if turn_end is not None and turn_end.event is not None:
            end = turn_end.event.data
            if isinstance(end, TurnEnd) and end.reason.kind != "completed":
                failure = {
                    "status": "verified",
                    "kind": end.reason.kind,
                    "code": end.reason.code,
                    "message": end.reason.message,
                    "seq": turn_end.ref.seq,
                }
    verified = sum(1 for c in checks if c["status"] == "verified")
    if not checks:
        overall = "unavailable"
    elif verified == len(checks):
        overall = "verified"
    elif verified == 0:
        overall = "unavailable"
    else:
        overall = "partial"
    return {
        "assembly": msgspec.to_builtins(record),
        "verification": {
            "status": overall,
            "checked": len(checks),
            "verified": verified,
            "references": checks,
            "unavailable": [c for c in checks if c["status"] != "verified"],
        },
        "system": system_view,
        "sections": sections,
        "context": context,
        "request": {
            "placement": placement_view,
            "assembly": assembly_view,
            "headers": headers,
            "errors": errors,
        },
        "reply": reply.wire("reply") if reply is not None else None,
        "failure": failure,
        "sourceText": "unavailable",
    }
