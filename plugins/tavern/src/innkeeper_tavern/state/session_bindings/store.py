"""``SessionSelectionStore``: the durable ``session-selections.json`` of the Tavern plugin.

Contract: `docs/contract/loader.md#session-bindings`.

- Schema 2 exactly as the spec shows; a schema-1 file (``sessions[id] = selection``) is migrated
  to schema 2 in place when it is read, and a schema-2 file holding values the store would not
  write (bad ids, unknown character options, bad RP fields) is normalized and rewritten.
- A newer schema is never overwritten: opening fails with ``SESSION_SELECTION_SCHEMA_UNSUPPORTED``.
  A file over 8 MiB is never parsed: opening fails with ``SESSION_SELECTION_FILE_TOO_LARGE``.
  Both leave the file untouched, so the plugin reports the problem instead of losing selections.
  A file that is not JSON at all is moved aside to ``session-selections.json.corrupt`` and the
  store starts empty (logged as an error).
- At most ``max_sessions`` sessions (default 2,048, hard cap 4,096) and 4 MiB of serialized
  state. A full store rejects new sessions (``SESSION_SELECTION_LIMIT_REACHED``); nothing is
  ever evicted, because a dropped selection would silently re-activate the global default for an
  old session. ``delete_session`` is the explicit way to reclaim room.
- Every mutation builds a new state, validates a decoded copy of the bytes of each session it
  changed (:mod:`.snapshot`: a bind encodes its own session, not every session), rewrites
  ``session-selections.json`` atomically (temp file, fsync, rename, folder fsync) and only then
  publishes the new state: the file holds the current state after every acknowledged write, and
  is always a complete previous or new state. A failure leaves memory and disk as they were.
- A ``session-selections.log`` left by an earlier version (which appended changes and folded
  them in later, :mod:`.journal`) is replayed over the file at start, folded in and removed.

Reads (:meth:`SessionSelectionStore.get`) never touch the disk and never take the lock.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import msgspec

from . import journal
from .errors import (
    SESSION_SELECTION_FILE_TOO_LARGE,
    SESSION_SELECTION_LIMIT_REACHED,
    SESSION_SELECTION_SCHEMA_UNSUPPORTED,
    SESSION_SELECTION_STORAGE_LIMIT_REACHED,
    SESSION_SELECTION_VALIDATION_FAILED,
    SESSION_SELECTION_WRITE_FAILED,
    SelectionStoreError,
)
from .files import FileTooLarge, atomic_write, read_limited, remove_stale_temps
from .model import (
    RESOURCE_KINDS,
    ResourceKind,
    Selection,
    SessionRecord,
    check_selection,
    check_session_id,
    normalize_selection,
    valid_resource_id,
    valid_session_id,
    without_resource,
)
from .preset_default import USER_DEFAULT_FILE, GlobalPresetSelection
from .snapshot import EMPTY, SCHEMA_VERSION, assemble, assembled_size, encode_entry, encode_state

#: `docs/contract/loader.md#session-bindings`: the file under the plugin data directory.
SELECTIONS_FILE: Final = "session-selections.json"
#: Same section: the legacy schema, migrated in place on read (the current one is
#: :data:`.snapshot.SCHEMA_VERSION`).
LEGACY_SCHEMA_VERSION: Final = 1
#: Same section: "Default cap is 2,048 sessions (implementation hard cap 4,096)".
DEFAULT_MAX_SESSIONS: Final = 2_048
HARD_MAX_SESSIONS: Final = 4_096
#: Same section: "... and 4 MiB of durable state" (serialized, pretty-printed UTF-8 JSON).
MAX_STATE_BYTES: Final = 4 << 20
#: Same section: "Old files over 8 MiB never enter JSON.parse".
MAX_READ_BYTES: Final = 8 << 20

Clock = Callable[[], str]

_encoder: Final = msgspec.json.Encoder()
_any_decoder: Final = msgspec.json.Decoder()


def utc_now() -> str:
    """ISO 8601 UTC with milliseconds and ``Z`` (the shape of ``updatedAt`` in the spec)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _valid_timestamp(value: Any) -> bool:
    if not isinstance(value, str) or len(value) > 64:
        return False
    try:
        datetime.fromisoformat(value)
    except ValueError:
        return False
    return True


def migrate(raw: Any, now: str) -> tuple[dict[str, SessionRecord], bool, int]:
    """Schema-2 sessions from a decoded file of schema 1 or 2.

    Returns ``(sessions, rewrite, dropped)``: ``rewrite`` is true when the file should be
    rewritten (legacy schema, or any value normalized), ``dropped`` counts entries whose key is
    not a valid session id. Raises :class:`SelectionStoreError` for a newer schema and
    ``ValueError`` for a document that is not a selection file at all.
    """
    if not isinstance(raw, dict):
        raise ValueError("the document is not an object")
    version = raw.get("schemaVersion")
    stored = raw.get("sessions")
    if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
        raise SelectionStoreError(
            500,
            SESSION_SELECTION_SCHEMA_UNSUPPORTED,
            f"{SELECTIONS_FILE} has schemaVersion {version}; this Tavern reads up to "
            f"{SCHEMA_VERSION} and will not overwrite it",
        )
    if version not in (LEGACY_SCHEMA_VERSION, SCHEMA_VERSION) or isinstance(version, bool):
        raise ValueError(f"unknown schemaVersion {version!r}")
    if not isinstance(stored, dict):
        raise ValueError("sessions is not an object")
    legacy = version == LEGACY_SCHEMA_VERSION
    rewrite = legacy
    dropped = 0
    sessions: dict[str, SessionRecord] = {}
    for key, value in stored.items():
        if not valid_session_id(key):
            dropped += 1
            continue
        if legacy:
            record = SessionRecord(selection=normalize_selection(value), updated_at=now)
        else:
            entry = value if isinstance(value, dict) else {}
            updated = entry.get("updatedAt")
            record = SessionRecord(
                selection=normalize_selection(entry.get("selection")),
                updated_at=updated
                if isinstance(updated, str) and _valid_timestamp(updated)
                else now,
            )
            if _any_decoder.decode(_encoder.encode(record)) != value:
                rewrite = True
        sessions[key] = record
    return sessions, rewrite or dropped > 0, dropped


class SessionSelectionStore:
    """Per-session selections in ``<root>/session-selections.json``.

    A session used for the first time without a parent freezes :meth:`defaults`: the global
    default preset (:attr:`global_preset`, ``state.json``;
    the default of a session not bound yet, `docs/contract/loader.md#session-bindings`) and
    nothing else.
    """

    def __init__(
        self,
        root: Path,
        *,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
        clock: Clock = utc_now,
        logger: logging.Logger | None = None,
    ) -> None:
        if not 0 < max_sessions <= HARD_MAX_SESSIONS:
            raise ValueError(f"max_sessions must be between 1 and {HARD_MAX_SESSIONS}")
        self.path = root / SELECTIONS_FILE
        self.log_path = root / journal.LOG_FILE
        self.max_sessions = max_sessions
        self.lock = asyncio.Lock()
        self.global_preset = GlobalPresetSelection(root, logger=logger)
        #: The persona a new session without a parent freezes (``default-user.json``).
        self.global_user = GlobalPresetSelection(
            root, logger=logger, file_name=USER_DEFAULT_FILE, what="persona"
        )
        self._clock = clock
        self._logger = logger or logging.getLogger("innkeeper.plugin.tavern.selection")
        self._sessions: dict[str, SessionRecord] = {}
        self._bytes = len(EMPTY)
        #: Each session's checked entry of the file, in order (encoded when its record changes,
        #: so no bind encodes every session).
        self._fragments: dict[str, bytes] = {}
        self._opened = False
        #: ``(session_id, requested card id)`` checks run by ``POST /character-selection``
        #: before it writes (the play workspace refuses a card that would contradict a
        #: playthrough); a check raises to refuse.
        self.character_guards: list[Callable[[str, str | None], Awaitable[None]]] = []
        #: ``(session_id, previous card id, new card id)`` listeners run by
        #: ``POST /character-selection`` after it stored a changed binding (RP mode follows
        #: the character); a failing listener fails the request, the binding stays stored.
        self.character_listeners: list[
            Callable[[str, str | None, str | None], Awaitable[None]]
        ] = []
        #: Process-local selection generations (see :meth:`generation`).
        self._generations: dict[str, int] = {}
        self._generation_counter = itertools.count(1)

    # ------------------------------------------------------------------ loading

    async def open(self) -> None:
        """Load (and if needed migrate) the file, off the event loop. Idempotent."""
        await self.global_preset.open()
        await self.global_user.open()
        async with self.lock:
            if self._opened:
                return
            sessions, data = await asyncio.to_thread(self._load)
            fragments = await asyncio.to_thread(self._encode_all, sessions)
            self._sessions = sessions
            self._fragments = fragments
            self._bytes = len(data)
            self._opened = True

    def _encode_all(self, sessions: Mapping[str, SessionRecord]) -> dict[str, bytes]:
        try:
            return {key: encode_entry(key, record) for key, record in sessions.items()}
        except ValueError as exc:
            # migrate() normalizes every record it keeps, so only a bug can get here.
            raise SelectionStoreError(
                500,
                SESSION_SELECTION_VALIDATION_FAILED,
                f"a loaded {SELECTIONS_FILE} entry failed validation ({exc})",
            ) from None

    def _load(self) -> tuple[dict[str, SessionRecord], bytes]:
        sessions, encoded = self._load_snapshot()
        try:
            changes, _, problem = journal.read_changes(self.log_path)
        except FileTooLarge as exc:
            raise SelectionStoreError(
                500,
                SESSION_SELECTION_FILE_TOO_LARGE,
                f"{journal.LOG_FILE} is {exc.size} bytes; logs over {journal.MAX_LOG_BYTES} bytes "
                "are never read. Move it aside to start from the last snapshot.",
            ) from None
        if not changes and problem is None and not self.log_path.exists():
            return sessions, encoded
        for change in changes:
            sessions.update(change.set)
            for key in change.delete:
                sessions.pop(key, None)
        if problem is not None:
            self._logger.warning("%s: %s; that change is dropped", journal.LOG_FILE, problem)
        encoded = encode_state(sessions)
        if len(encoded) > MAX_READ_BYTES:
            self._logger.error("%s: replayed state is %d bytes", journal.LOG_FILE, len(encoded))
            raise SelectionStoreError(
                500,
                SESSION_SELECTION_FILE_TOO_LARGE,
                f"{SELECTIONS_FILE} and {journal.LOG_FILE} hold more than {MAX_READ_BYTES} bytes",
            )
        # Fold the log in: the snapshot first, then the log goes (a crash between replays the
        # same lines over the new snapshot, which already holds them). Writes never append to
        # it again, so a log that cannot be folded must not outlive this start: it would be
        # replayed over later snapshots. Refuse to start instead; nothing on disk changed.
        try:
            atomic_write(self.path, encoded)
            if problem is not None and problem.startswith("line"):
                self.log_path.replace(self.log_path.with_name(journal.LOG_FILE + ".corrupt"))
            journal.remove(self.log_path)
        except OSError as exc:
            self._logger.error("folding %s in failed: %s", journal.LOG_FILE, exc)
            raise SelectionStoreError(
                500,
                SESSION_SELECTION_WRITE_FAILED,
                f"could not fold {journal.LOG_FILE} into {SELECTIONS_FILE} ({exc.strerror or exc})",
            ) from None
        return sessions, encoded

    def _load_snapshot(self) -> tuple[dict[str, SessionRecord], bytes]:
        remove_stale_temps(self.path)
        try:
            data = read_limited(self.path, MAX_READ_BYTES)
        except FileTooLarge as exc:
            raise SelectionStoreError(
                500,
                SESSION_SELECTION_FILE_TOO_LARGE,
                f"{SELECTIONS_FILE} is {exc.size} bytes; files over {MAX_READ_BYTES} bytes are "
                "never parsed. Move it aside to start with empty selections.",
            ) from None
        if data is None:
            return {}, encode_state({})
        try:
            sessions, rewrite, dropped = migrate(_any_decoder.decode(data), self._clock())
        except (msgspec.DecodeError, ValueError) as exc:
            aside = self.path.with_name(self.path.name + ".corrupt")
            self._logger.error(
                "%s is unreadable (%s); moved to %s, starting with no session selections",
                SELECTIONS_FILE,
                exc,
                aside.name,
            )
            self.path.replace(aside)
            return {}, encode_state({})
        if dropped:
            self._logger.warning(
                "%s: ignored %d entries whose key is not a valid session id",
                SELECTIONS_FILE,
                dropped,
            )
        encoded = encode_state(sessions)
        if rewrite:
            if len(encoded) > MAX_READ_BYTES:
                # Persisting would produce a file the next start refuses to parse.
                self._logger.error(
                    "%s: migrated state is %d bytes; kept in memory only",
                    SELECTIONS_FILE,
                    len(encoded),
                )
            else:
                try:
                    atomic_write(self.path, encoded)
                    self._logger.info("%s migrated to schema %d", SELECTIONS_FILE, SCHEMA_VERSION)
                except OSError as exc:
                    # The migrated state is still served; the next write rewrites the whole file.
                    self._logger.error("%s: writing the migration failed: %s", SELECTIONS_FILE, exc)
        return sessions, encoded

    # ------------------------------------------------------------------ reads

    def __len__(self) -> int:
        return len(self._sessions)

    def session_ids(self) -> list[str]:
        """Every stored session id, oldest entry first."""
        return list(self._sessions)

    def defaults(self) -> Selection:
        """The selection an unbound session without a parent freezes now."""
        return Selection(
            preset_id=self.global_preset.selected_id, user_id=self.global_user.selected_id
        )

    def generation(self, session_id: str) -> int:
        """A process-local token of the session's selection: every stored change (even back to
        the same values) issues a fresh one, except an RP-overlay-only change of a stored
        session (``update(rp_only=True)``); ``0`` until its first change in this process."""
        return self._generations.get(session_id, 0)

    def has(self, session_id: str) -> bool:
        """Whether ``session_id`` has a stored (frozen or explicitly bound) selection."""
        return session_id in self._sessions

    def stored(self, session_id: str) -> Selection | None:
        """The stored selection of ``session_id``, ``None`` if it has none yet."""
        record = self._sessions.get(session_id)
        return record.selection if record is not None else None

    def record(self, session_id: str) -> SessionRecord | None:
        """The stored record (selection and ``updatedAt``)."""
        return self._sessions.get(session_id)

    def get(self, session_id: str) -> Selection:
        """The stored selection, or :meth:`defaults` for a session that has none (not stored)."""
        check_session_id(session_id)
        stored = self.stored(session_id)
        return stored if stored is not None else self.defaults()

    # ------------------------------------------------------------------ writes

    async def _commit(
        self, sessions: dict[str, SessionRecord], *, added: int, quiet: str | None = None
    ) -> None:
        """Validate, write and publish ``sessions`` (a new dict; caller holds the lock). The
        stored session ``quiet`` keeps its generation (an RP-overlay-only change)."""
        if added > 0 and len(sessions) > self.max_sessions:
            raise SelectionStoreError(
                409,
                SESSION_SELECTION_LIMIT_REACHED,
                f"session selections are full ({self.max_sessions} sessions); delete sessions' "
                "selections to make room (nothing is evicted)",
            )
        previous = self._sessions
        changed = [k for k, r in sessions.items() if previous.get(k) is not r]
        deleted = [k for k in previous if k not in sessions]
        # Encoding, validating and writing stays off the event loop.
        try:
            fragments, size = await asyncio.to_thread(self._persist, sessions, changed)
        except OSError as exc:
            self._logger.error("writing %s failed: %s", SELECTIONS_FILE, exc)
            raise SelectionStoreError(
                500,
                SESSION_SELECTION_WRITE_FAILED,
                f"could not write {SELECTIONS_FILE}; nothing changed",
            ) from None
        self._sessions = sessions
        self._fragments = fragments
        self._bytes = size
        for key in [*changed, *deleted]:
            if not (key == quiet and key in previous):
                self._generations[key] = next(self._generation_counter)

    def _persist(
        self, sessions: Mapping[str, SessionRecord], changed: list[str]
    ) -> tuple[dict[str, bytes], int]:
        """Encode and check the changed sessions' entries, bound-check the file they make, and
        rewrite it atomically (blocking). Returns the new entries and the file's size.

        ``OSError`` when the file could not be written (it is then unchanged on disk).
        """
        fresh: dict[str, bytes] = {}
        try:
            for key in changed:
                fresh[key] = encode_entry(key, sessions[key])
        except ValueError as exc:
            # Only a bug can get here (every record was checked on the way in): refuse to write.
            self._logger.error("%s: encoded state failed validation: %s", SELECTIONS_FILE, exc)
            raise SelectionStoreError(
                500,
                SESSION_SELECTION_VALIDATION_FAILED,
                f"the new {SELECTIONS_FILE} state failed validation; nothing changed",
            ) from None
        old = self._fragments
        fragments = {key: fresh[key] if key in fresh else old[key] for key in sessions}
        size = assembled_size({key: len(value) for key, value in fragments.items()})
        # A state that was already over the limit (an older file) may still shrink.
        if size > MAX_STATE_BYTES and not (size < self._bytes and size <= MAX_READ_BYTES):
            raise SelectionStoreError(
                413,
                SESSION_SELECTION_STORAGE_LIMIT_REACHED,
                f"session selections would need {size} bytes; at most {MAX_STATE_BYTES} allowed",
            )
        atomic_write(self.path, assemble(fragments))
        return fragments, size

    def _record(self, selection: Selection) -> SessionRecord:
        return SessionRecord(selection=check_selection(selection), updated_at=self._clock())

    async def set(self, session_id: str, selection: Selection) -> Selection:
        """Replace ``session_id``'s whole selection (template/configuration apply)."""
        return (await self.set_many({session_id: selection}))[session_id]

    async def set_many(self, selections: Mapping[str, Selection]) -> dict[str, Selection]:
        """Replace several sessions' selections in one atomic write (all or nothing)."""
        records = {check_session_id(k): self._record(v) for k, v in selections.items()}
        async with self.lock:
            sessions = {**self._sessions, **records}
            added = sum(1 for k in records if k not in self._sessions)
            await self._commit(sessions, added=added)
        return {k: r.selection for k, r in records.items()}

    async def update(
        self,
        session_id: str,
        edit: Callable[[Selection], Selection],
        *,
        base: Selection | None = None,
        rp_only: bool = False,
    ) -> Selection:
        """Apply ``edit`` to the session's current selection and store the result.

        A session without a stored selection starts from ``base`` (what it would freeze: its
        parent's selection for a fork) or :meth:`defaults`. ``edit`` runs under the lock, so
        concurrent edits of different fields never lose each other.

        ``rp_only=True`` (the RP overlay): ``edit`` may change only ``selection.rp`` (else
        ``ValueError``), and a stored session keeps its :meth:`generation`, since no bound
        resource changed (views and leases taken over the selection stay current).
        """
        check_session_id(session_id)
        async with self.lock:
            current = self.stored(session_id)
            if current is not None:
                start = current
            else:
                start = base if base is not None else self.defaults()
            edited = edit(start)
            if rp_only and msgspec.structs.replace(edited, rp=start.rp) != start:
                raise ValueError("an rp_only edit changed more than selection.rp")
            record = self._record(edited)
            sessions = {**self._sessions, session_id: record}
            await self._commit(
                sessions,
                added=0 if current is not None else 1,
                quiet=session_id if rp_only else None,
            )
        return record.selection

    async def ensure(self, session_id: str, initial: Selection) -> tuple[Selection, bool]:
        """Freeze ``initial`` for ``session_id`` unless it already has a selection.

        Returns ``(selection, frozen_now)``. An existing selection always wins: it is either an
        earlier freeze or an explicit binding made before the agent first ran.
        """
        check_session_id(session_id)
        async with self.lock:
            current = self.stored(session_id)
            if current is not None:
                return current, False
            record = self._record(initial)
            await self._commit({**self._sessions, session_id: record}, added=1)
        return record.selection, True

    async def clear_resource(self, kind: ResourceKind, resource_id: str) -> list[str]:
        """``clearResource(kind, id)``: remove a deleted resource from every session.

        Returns the ids of the sessions that changed (one write for all of them). A deleted
        preset is also cleared as the global default. Running agents are not consulted
        (`docs/contract/loader.md#running-agent`).
        """
        if kind not in RESOURCE_KINDS:
            raise ValueError(f"unknown resource kind {kind!r}")
        if not valid_resource_id(resource_id):
            return []
        async with self.lock:
            now: str | None = None
            changed: dict[str, SessionRecord] = {}
            for key, record in self._sessions.items():
                cleared = without_resource(record.selection, kind, resource_id)
                if cleared is not record.selection:
                    now = now or self._clock()
                    changed[key] = SessionRecord(selection=cleared, updated_at=now)
            if changed:
                await self._commit({**self._sessions, **changed}, added=0)
        if kind == "preset":
            await self.global_preset.clear(resource_id)
        if kind == "user":
            await self.global_user.clear(resource_id)
        return list(changed)

    async def delete_session(self, session_id: str) -> bool:
        """``deleteSession(id)``: drop a session's selection; ``False`` if it had none."""
        if not valid_session_id(session_id):
            return False
        async with self.lock:
            if session_id not in self._sessions:
                return False
            sessions = {k: v for k, v in self._sessions.items() if k != session_id}
            await self._commit(sessions, added=0)
        return True

    async def delete_sessions(self, session_ids: Iterable[str]) -> int:
        """Drop several sessions' selections in one write; returns how many existed."""
        doomed = {s for s in session_ids if s in self._sessions}
        if not doomed:
            return 0
        async with self.lock:
            doomed &= set(self._sessions)
            sessions = {k: v for k, v in self._sessions.items() if k not in doomed}
            await self._commit(sessions, added=0)
        return len(doomed)


__all__ = [
    "DEFAULT_MAX_SESSIONS",
    "HARD_MAX_SESSIONS",
    "LEGACY_SCHEMA_VERSION",
    "MAX_READ_BYTES",
    "MAX_STATE_BYTES",
    "SCHEMA_VERSION",
    "SELECTIONS_FILE",
    "SESSION_SELECTION_FILE_TOO_LARGE",
    "SESSION_SELECTION_LIMIT_REACHED",
    "SESSION_SELECTION_SCHEMA_UNSUPPORTED",
    "SESSION_SELECTION_STORAGE_LIMIT_REACHED",
    "SESSION_SELECTION_VALIDATION_FAILED",
    "SESSION_SELECTION_WRITE_FAILED",
    "SelectionStoreError",
    "SessionSelectionStore",
    "encode_state",
    "migrate",
    "utc_now",
]
