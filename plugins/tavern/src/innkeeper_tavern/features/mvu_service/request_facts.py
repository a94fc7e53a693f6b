"""Retrieve facts: ``triggered`` when a model request takes the state, and ``applied`` with
``detail: 'dsh-request-observed'`` once the recorded request proves it was sent
(docs/contract/mvu.md#facts: the recorded request must have carried the placed state; it does not
claim the provider received it).

A request source that placed the state notes what it placed (:meth:`note_request_injection`):
the state, the revision read and the text (kept in memory until the turn ends, never written
to the facts or logged). When the turn ends,
:meth:`observe_requests` reads the turn's durable events and emits ``dsh-request-observed``
only when a provider attempt of that turn was recorded (``request/header``) and the noted text
is in what that request carried: the turn's system message, or an inline message of its
``request/assembly``. Anything else (no attempt, a different text) leaves the ``triggered``
fact alone.
"""

from __future__ import annotations

from typing import Final

from innkeeper_hostapi.sessions import RequestAssembly, RequestHeader, SystemMessage, text_of

from .common import RETRIEVE_TRIGGER, RequestNote
from .core import ServiceCore

#: Turns whose notes wait for their end (oldest dropped first; facts are observations only).
MAX_PENDING_REQUEST_TURNS: Final = 256
REQUEST_OBSERVED: Final = "dsh-request-observed"


class MvuRequestFacts(ServiceCore):
    """Retrieve facts of :class:`~.service.MvuService`."""

    async def note_request_injection(
        self, session_id: str, turn: int, state_id: str, revision: int, text: str
    ) -> None:
        """Record that ``text`` (the state at ``revision``) was placed into the request of
        ``turn``; emits the ``triggered`` fact."""
        session = self._doc.sessions.get(session_id)
        note = RequestNote(
            state_id=state_id,
            revision=revision,
            text=text,
            since=session.scanned_through if session is not None else 0,
        )
        notes = self._request_notes.setdefault((session_id, turn), [])
        if note in notes:
            return  # a retried step places the same text again
        notes.append(note)
        while len(self._request_notes) > MAX_PENDING_REQUEST_TURNS:
            del self._request_notes[next(iter(self._request_notes))]
        await self._record_fact(
            {
                "id": state_id,
                "sessionId": session_id,
                "turn": turn,
                "turnKind": "model-request",
                "phase": "triggered",
                "revision": revision,
                "detail": RETRIEVE_TRIGGER,
            }
        )

    async def observe_requests(self, session_id: str, turn: int) -> None:
        """After ``turn`` ended: the ``dsh-request-observed`` facts its recorded request
        proves (see the module docstring)."""
        notes = self._request_notes.pop((session_id, turn), [])
        if not notes:
            return
        events = await self._events_after(session_id, min(n.since for n in notes))
        attempted = False
        carried: set[str] = set()
        for event in events:
            data = event.data
            if isinstance(data, RequestHeader) and data.turn == turn:
                attempted = True
            elif isinstance(data, SystemMessage) and data.turn == turn:
                carried.add(text_of(data.content))
            elif isinstance(data, RequestAssembly) and data.turn == turn:
                carried.update(e.content for e in data.entries if e.content is not None)
        if not attempted:
            return
        facts = [
            {
                "id": note.state_id,
                "sessionId": session_id,
                "turn": turn,
                "turnKind": "model-request",
                "phase": "applied",
                "revision": note.revision,
                "detail": REQUEST_OBSERVED,
            }
            for note in notes
            if any(note.text in message for message in carried)
        ]
        if facts:
            await self._record_fact(*facts)
