"""``SessionTemplateStore``: the durable ``session-templates.json`` of the Tavern plugin.

File (`docs/prompt-assembly.md#template-file`, the original's shape, kept so data moves
between implementations)::

    {"schemaVersion": 1, "selectedId": "session-template-…" | null,
     "templates": [{"id", "name", "selection", "createdAt", "updatedAt"}, ...]}

- One file, pretty-printed JSON with a trailing newline, in the plugin's data directory.
- At most ``max_templates`` templates (default 100, hard cap 200): a create past it is 409
  ``SESSION_TEMPLATE_LIMIT_REACHED``; at most ``max_state_bytes`` serialized bytes (default
  512 KiB, hard cap 2 MiB): a write past it is 413 ``SESSION_TEMPLATE_STORAGE_LIMIT_REACHED``
  (`docs/contract/resources.md#portable-json`). A state already over a limit (a lowered option) may
  still shrink.
- Every mutation builds a new state, encodes it, validates a decoded copy of those exact bytes,
  writes them atomically (temp file in the same folder, fsync, rename) and only then publishes
  it in memory. A failed write (500 ``SESSION_TEMPLATE_WRITE_FAILED``) changes nothing
  (`docs/contract/loader.md#templates`).
- Loading: a file over 4 MiB is never parsed and a newer ``schemaVersion`` is never overwritten
  (both stop the plugin with the reason, file untouched); a file that is not a template file at
  all is moved to ``session-templates.json.corrupt`` and the store starts empty; single entries
  with a bad id or name, or a duplicate id, are skipped (the original bytes are first copied to
  ``session-templates.json.corrupt``) and stored selections are read leniently.
- Templates are never rewritten when a resource they name is deleted (same section: "Templates
  are not rewritten silently when a resource is deleted"); diagnostics report the dangling ids.

Reads never touch the disk and never take the lock.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final

import msgspec

from innkeeper_tavern.state.document_file import (
    DocumentCodes,
    DocumentFile,
    DocumentNames,
    DocumentStore,
    Writer,
    check_limit,
    unique_id,
)
from innkeeper_tavern.state.session_bindings.files import atomic_write
from innkeeper_tavern.state.session_bindings.model import (
    Selection,
    check_selection,
    normalize_selection,
)
from innkeeper_tavern.state.session_bindings.store import utc_now

from .errors import (
    SESSION_TEMPLATE_FILE_TOO_LARGE,
    SESSION_TEMPLATE_LIMIT_REACHED,
    SESSION_TEMPLATE_NOT_FOUND,
    SESSION_TEMPLATE_SCHEMA_UNSUPPORTED,
    SESSION_TEMPLATE_STORAGE_LIMIT_REACHED,
    SESSION_TEMPLATE_WRITE_FAILED,
    TemplateError,
)
from .model import Template, TemplateFile, check_template_name, valid_template_id

#: `docs/prompt-assembly.md#template-file`: the file under the plugin data directory.
TEMPLATES_FILE: Final = "session-templates.json"
#: Same section: ``{schemaVersion: 1, selectedId, templates}``.
SCHEMA_VERSION: Final = 1
#: Same section: "default 100 templates (hard 200)".
DEFAULT_MAX_TEMPLATES: Final = 100
HARD_MAX_TEMPLATES: Final = 200
#: Same section: "512 KiB (hard 2 MiB)" of serialized state.
DEFAULT_MAX_STATE_BYTES: Final = 512 << 10
HARD_MAX_STATE_BYTES: Final = 2 << 20
#: Same section: "files over 4 MiB are rejected" (never parsed).
MAX_READ_BYTES: Final = 4 << 20
#: Longest stored timestamp string accepted on read.
_MAX_TIMESTAMP_CHARS: Final = 64

Clock = Callable[[], str]
IdFactory = Callable[[], str]

_CODES: Final = DocumentCodes(
    file_too_large=SESSION_TEMPLATE_FILE_TOO_LARGE,
    storage_limit=SESSION_TEMPLATE_STORAGE_LIMIT_REACHED,
    write_failed=SESSION_TEMPLATE_WRITE_FAILED,
)
_encoder: Final = msgspec.json.Encoder()
_file_decoder: Final = msgspec.json.Decoder(TemplateFile)
_any_decoder: Final = msgspec.json.Decoder()


def new_template_id() -> str:
    """``session-template-<32 hex>`` (the default id factory)."""
    return f"session-template-{uuid.uuid4().hex}"


def encode_state(templates: tuple[Template, ...], selected_id: str | None) -> bytes:
    """The exact bytes of ``session-templates.json`` (pretty, trailing newline)."""
    doc = TemplateFile(
        schema_version=SCHEMA_VERSION, selected_id=selected_id, templates=list(templates)
    )
    return msgspec.json.format(_encoder.encode(doc), indent=2) + b"\n"


@dataclass(frozen=True, slots=True)
class _State:
    templates: tuple[Template, ...]
    selected_id: str | None
    size: int


def _timestamp(value: Any, fallback: str) -> str:
    if not isinstance(value, str) or len(value) > _MAX_TIMESTAMP_CHARS:
        return fallback
    try:
        datetime.fromisoformat(value)
    except ValueError:
        return fallback
    return value


def read_state(raw: Any, now: str) -> tuple[tuple[Template, ...], str | None, int]:
    """Templates and selected id from a decoded file; the count of skipped entries.

    Raises :class:`TemplateError` for a newer schema and ``ValueError`` for a document that is
    not a template file at all.
    """
    if not isinstance(raw, dict):
        raise ValueError("the document is not an object")
    version = raw.get("schemaVersion")
    if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
        raise TemplateError(
            500,
            SESSION_TEMPLATE_SCHEMA_UNSUPPORTED,
            f"{TEMPLATES_FILE} has schemaVersion {version}; this Tavern reads up to "
            f"{SCHEMA_VERSION} and will not overwrite it",
        )
    if isinstance(version, bool) or version != SCHEMA_VERSION:
        raise ValueError(f"unknown schemaVersion {version!r}")
    stored = raw.get("templates")
    if not isinstance(stored, list):
        raise ValueError("templates is not an array")
    templates: list[Template] = []
    seen: set[str] = set()
    skipped = 0
    for value in stored:
        entry = value if isinstance(value, dict) else {}
        template_id = entry.get("id")
        try:
            name = check_template_name(entry.get("name"))
        except TemplateError:
            name = ""
        if not valid_template_id(template_id) or not name or template_id in seen:
            skipped += 1
            continue
        assert isinstance(template_id, str)
        seen.add(template_id)
        created = _timestamp(entry.get("createdAt"), now)
        templates.append(
            Template(
                id=template_id,
                name=name,
                selection=normalize_selection(entry.get("selection")),
                created_at=created,
                updated_at=_timestamp(entry.get("updatedAt"), created),
            )
        )
    selected = raw.get("selectedId")
    selected_id = selected if isinstance(selected, str) and selected in seen else None
    return tuple(templates), selected_id, skipped


class SessionTemplateStore(DocumentStore):
    """Named selection projections in ``<root>/session-templates.json``, plus which one the UI
    has selected (``selectedId``: the template "New chat" starts from)."""

    def __init__(
        self,
        root: Path,
        *,
        max_templates: int = DEFAULT_MAX_TEMPLATES,
        max_state_bytes: int = DEFAULT_MAX_STATE_BYTES,
        clock: Clock = utc_now,
        ids: IdFactory = new_template_id,
        writer: Writer = atomic_write,
        logger: logging.Logger | None = None,
    ) -> None:
        check_limit("max_templates", max_templates, HARD_MAX_TEMPLATES)
        check_limit("max_state_bytes", max_state_bytes, HARD_MAX_STATE_BYTES)
        self.path = root / TEMPLATES_FILE
        self.max_templates = max_templates
        self.max_state_bytes = max_state_bytes
        self.lock = asyncio.Lock()
        self._clock = clock
        self._ids = ids
        self._logger = logger or logging.getLogger("innkeeper.plugin.tavern.templates")
        self._file = DocumentFile(
            self.path,
            names=DocumentNames(noun="session templates", empty="templates"),
            codes=_CODES,
            error=TemplateError,
            max_state_bytes=max_state_bytes,
            writer=writer,
            logger=self._logger,
        )
        self._state = _State((), None, len(encode_state((), None)))
        self._opened = False

    # ------------------------------------------------------------------ loading

    async def open(self) -> None:
        """Load the file off the event loop. Idempotent."""
        async with self.lock:
            if not self._opened:
                self._state = await asyncio.to_thread(self._load)
                self._opened = True

    def _load(self) -> _State:
        empty = _State((), None, len(encode_state((), None)))
        data = self._file.read(MAX_READ_BYTES)
        if data is None:
            return empty
        try:
            templates, selected_id, skipped = read_state(_any_decoder.decode(data), self._clock())
        except (msgspec.DecodeError, ValueError) as exc:
            self._file.set_aside(exc)
            return empty
        if skipped:
            # Keep the original bytes: the next write drops the skipped entries for good.
            self._logger.warning(
                "%s: skipped %d templates with a bad id or name (original kept as %s)",
                TEMPLATES_FILE,
                skipped,
                self._file.aside.name,
            )
            atomic_write(self._file.aside, data)
        return _State(templates, selected_id, len(encode_state(templates, selected_id)))

    # ------------------------------------------------------------------ reads

    def __len__(self) -> int:
        return len(self._state.templates)

    @property
    def selected_id(self) -> str | None:
        """The selected template's id, ``None`` when none is selected."""
        return self._state.selected_id

    @property
    def state_bytes(self) -> int:
        """Size of the serialized state as last written (or loaded)."""
        return self._state.size

    def templates(self) -> list[Template]:
        """Every template, oldest first."""
        return list(self._state.templates)

    def find(self, template_id: str) -> Template | None:
        """The template ``template_id``, ``None`` if there is none."""
        for template in self._state.templates:
            if template.id == template_id:
                return template
        return None

    def get(self, template_id: str) -> Template:
        """The template ``template_id``; 404 ``SESSION_TEMPLATE_NOT_FOUND`` otherwise."""
        template = self.find(template_id) if valid_template_id(template_id) else None
        if template is None:
            raise TemplateError(
                404,
                SESSION_TEMPLATE_NOT_FOUND,
                f"session template {template_id[:100]!r} does not exist",
            )
        return template

    # ------------------------------------------------------------------ writes

    async def _commit(self, templates: tuple[Template, ...], selected_id: str | None) -> None:
        """Bound-check, validate, write and publish a new state (caller holds the lock)."""
        previous = self._state
        if len(templates) > self.max_templates and len(templates) > len(previous.templates):
            raise TemplateError(
                409,
                SESSION_TEMPLATE_LIMIT_REACHED,
                f"at most {self.max_templates} session templates may be stored",
            )
        # Encoding, validating and writing up to 2 MiB stays off the event loop.
        size = await self._file.write(
            lambda: encode_state(templates, selected_id), previous.size, self._validate
        )
        self._state = _State(templates, selected_id, size)

    def _validate(self, data: bytes) -> None:
        """The bytes decode back into a valid state (only a bug can fail this)."""
        try:
            copy = _file_decoder.decode(data)
            ids = [t.id for t in copy.templates]
            if len(set(ids)) != len(ids) or not all(valid_template_id(i) for i in ids):
                raise ValueError("template ids must be valid and unique")
            if copy.selected_id is not None and copy.selected_id not in ids:
                raise ValueError("selectedId names no template")
            for template in copy.templates:
                if check_template_name(template.name) != template.name:
                    raise ValueError("template name is not normalized")
                check_selection(template.selection)
        except (msgspec.DecodeError, msgspec.ValidationError, ValueError, TemplateError) as exc:
            self._logger.error("%s: encoded state failed validation: %s", TEMPLATES_FILE, exc)
            raise TemplateError(
                500,
                SESSION_TEMPLATE_WRITE_FAILED,
                f"the new {TEMPLATES_FILE} state failed validation; nothing changed",
            ) from None

    def _new_id(self) -> str:
        return unique_id(self._ids, valid_template_id, lambda i: self.find(i) is not None)

    async def create(self, name: str, selection: Selection, *, select: bool = True) -> Template:
        """Store a new template under a new id; ``select`` makes it the selected template.

        Ordinary creation selects it; import does not (`docs/contract/resources.md#portable-json`:
        "Template import also preserves the selected default template").
        """
        name = check_template_name(name)
        check_selection(selection)
        async with self.lock:
            now = self._clock()
            template = Template(
                id=self._new_id(),
                name=name,
                selection=selection,
                created_at=now,
                updated_at=now,
            )
            state = self._state
            selected = template.id if select else state.selected_id
            await self._commit((*state.templates, template), selected)
        return template

    async def update(
        self, template_id: str, *, name: str | None = None, selection: Selection | None = None
    ) -> Template:
        """Rename and/or replace the whole selection of a template (``None``: keep it)."""
        if name is not None:
            name = check_template_name(name)
        if selection is not None:
            check_selection(selection)
        async with self.lock:
            current = self.get(template_id)
            if name is None and selection is None:
                return current
            updated = msgspec.structs.replace(
                current,
                name=current.name if name is None else name,
                selection=current.selection if selection is None else selection,
                updated_at=self._clock(),
            )
            state = self._state
            templates = tuple(updated if t.id == template_id else t for t in state.templates)
            await self._commit(templates, state.selected_id)
        return updated

    async def delete(self, template_id: str) -> Template:
        """Remove a template (clearing the selection if it was selected); returns it."""
        async with self.lock:
            doomed = self.get(template_id)
            state = self._state
            templates = tuple(t for t in state.templates if t.id != template_id)
            selected = None if state.selected_id == template_id else state.selected_id
            await self._commit(templates, selected)
        return doomed

    async def select(self, template_id: str | None) -> Template | None:
        """Select a template (``None`` clears the selection); returns it."""
        async with self.lock:
            template = None if template_id is None else self.get(template_id)
            state = self._state
            if state.selected_id != template_id:
                await self._commit(state.templates, template_id)
        return template


__all__ = [
    "DEFAULT_MAX_STATE_BYTES",
    "DEFAULT_MAX_TEMPLATES",
    "HARD_MAX_STATE_BYTES",
    "HARD_MAX_TEMPLATES",
    "MAX_READ_BYTES",
    "SCHEMA_VERSION",
    "TEMPLATES_FILE",
    "SessionTemplateStore",
    "encode_state",
    "new_template_id",
    "read_state",
]
