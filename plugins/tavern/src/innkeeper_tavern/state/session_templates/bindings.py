"""Which session template a session's configuration was applied from (``session-template-
bindings.json``), for the ``template`` adapter of ``tavernMemorySources``
(`docs/contract/catalogs.md#bound-resources`: the template a session's configuration was
applied from).

Applying a template copies only its selection projection (`docs/contract/loader.md#templates`);
nothing in the session or its selection remembers where the projection came from. This store keeps
that provenance: per session, the template id, when it was applied and the selection that apply
wrote. A template counts as bound while the session's current resource projection (everything but RP
state, which RP mode toggles) is still the one that apply wrote, and the template still exists —
:func:`bound_template`. Nothing is inferred from content: only an explicit apply records a binding.

File::

    {"schemaVersion": 1,
     "sessions": {"<session-id>": {"templateId", "appliedAt", "selection": {...}}}}

- At most :data:`MAX_BINDINGS` sessions; a new one past it replaces the oldest applied (this is
  provenance, not user intent: losing it only stops listing that template as bound).
- Writes encode, validate a decoded copy and replace the file atomically; a failed write changes
  nothing (the caller logs it; the applied selection is kept either way).
- A file over :data:`MAX_READ_BYTES` or one that is not a bindings file is moved aside to
  ``session-template-bindings.json.corrupt`` and the store starts empty; a newer
  ``schemaVersion`` is left untouched and the store starts empty and read-only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Final

import msgspec

from innkeeper_tavern.state.session_bindings.files import (
    FileTooLarge,
    atomic_write,
    read_limited,
    remove_stale_temps,
)
from innkeeper_tavern.state.session_bindings.model import Selection
from innkeeper_tavern.state.session_bindings.store import utc_now

from .model import Template

BINDINGS_FILE: Final = "session-template-bindings.json"
SCHEMA_VERSION: Final = 1
#: One binding per session the selection store can hold (its hard cap).
MAX_BINDINGS: Final = 4096
#: Never parsed past this size (4,096 bindings of ordinary selections stay far below it).
MAX_READ_BYTES: Final = 8 << 20


class TemplateBinding(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """``sessions[<id>]``: the template applied, when, and the selection it wrote."""

    template_id: str
    applied_at: str
    selection: Selection


class _File(msgspec.Struct, kw_only=True, rename="camel"):
    schema_version: int
    sessions: dict[str, TemplateBinding] = {}


_encoder: Final = msgspec.json.Encoder()
_decoder: Final = msgspec.json.Decoder(_File)


def same_resources(a: Selection, b: Selection) -> bool:
    """Whether two selections bind the same resources (RP state aside)."""
    return msgspec.structs.replace(a, rp=b.rp) == b


def bound_template(
    binding: TemplateBinding | None,
    selection: Selection,
    find: Callable[[str], Template | None],
) -> Template | None:
    """The template ``binding`` names, if it still exists and ``selection`` (the session's
    current one) still binds what that apply wrote."""
    if binding is None or not same_resources(selection, binding.selection):
        return None
    return find(binding.template_id)


class TemplateBindings:
    """Session → applied template, in ``<root>/session-template-bindings.json``."""

    def __init__(self, root: Path, *, logger: logging.Logger | None = None) -> None:
        self.path = root / BINDINGS_FILE
        self._logger = logger or logging.getLogger("innkeeper.plugin.tavern.templates")
        self._sessions: dict[str, TemplateBinding] = {}
        self._writable = True
        self._lock = asyncio.Lock()

    async def open(self) -> None:
        """Load the file off the event loop."""
        self._sessions = await asyncio.to_thread(self._load)

    def _load(self) -> dict[str, TemplateBinding]:
        remove_stale_temps(self.path)
        aside = self.path.with_name(self.path.name + ".corrupt")
        try:
            data = read_limited(self.path, MAX_READ_BYTES)
            if data is None:
                return {}
            state = _decoder.decode(data)
        except (FileTooLarge, msgspec.DecodeError, msgspec.ValidationError) as exc:
            self._logger.error("%s is unreadable (%s); moved to %s", BINDINGS_FILE, exc, aside)
            self.path.replace(aside)
            return {}
        if state.schema_version != SCHEMA_VERSION:
            self._logger.error(
                "%s has schemaVersion %s; template bindings are not recorded this run",
                BINDINGS_FILE,
                state.schema_version,
            )
            self._writable = False
            return {}
        return dict(state.sessions)

    def get(self, session_id: str) -> TemplateBinding | None:
        """The binding recorded for ``session_id`` (whether or not it still holds)."""
        return self._sessions.get(session_id)

    async def record(self, session_id: str, template_id: str, selection: Selection) -> None:
        """Record that ``template_id`` was applied to ``session_id``, writing ``selection``.

        Raises ``OSError`` when the write fails; nothing changes then."""
        async with self._lock:
            if not self._writable:
                return
            sessions = dict(self._sessions)
            sessions.pop(session_id, None)
            while len(sessions) >= MAX_BINDINGS:
                oldest = min(sessions, key=lambda sid: sessions[sid].applied_at)
                del sessions[oldest]
            sessions[session_id] = TemplateBinding(
                template_id=template_id, applied_at=utc_now(), selection=selection
            )
            await asyncio.to_thread(self._write, sessions)
            self._sessions = sessions

    def _write(self, sessions: dict[str, TemplateBinding]) -> None:
        data = _encoder.encode(_File(schema_version=SCHEMA_VERSION, sessions=sessions))
        if len(_decoder.decode(data).sessions) != len(sessions):  # only a bug can fail this
            raise OSError("the encoded template bindings failed validation")
        atomic_write(self.path, data)


__all__ = [
    "BINDINGS_FILE",
    "MAX_BINDINGS",
    "TemplateBinding",
    "TemplateBindings",
    "bound_template",
    "same_resources",
]
