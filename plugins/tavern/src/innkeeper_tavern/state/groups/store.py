"""``GroupStore``: the durable ``groups.json`` of the Tavern plugin.

File::

    {"schemaVersion": 1, "groups": [{"id", "name", "members", ..., "revision"}, ...]}

- At most ``max_groups`` groups (default 256): a create past it is 409 ``GROUP_LIMIT_REACHED``;
  at most ``max_state_bytes`` serialized bytes (default 32 MiB): a write past it is 413
  ``GROUP_STORAGE_LIMIT_REACHED``. A state already over a limit may still shrink.
- Every group has a ``revision``; an update or delete names the revision it was made from and a
  different current one is 409 ``GROUP_REVISION_CONFLICT`` (with ``currentRevision``), so two
  editors never overwrite each other silently.
- Every mutation encodes the new state, decodes those bytes back, writes them atomically and
  only then publishes the state in memory; a failed write (500 ``GROUP_WRITE_FAILED``) changes
  nothing.
- Loading: a newer ``schemaVersion`` or an oversized file stops the plugin with the reason (file
  untouched); a file that is not a group file is moved to ``groups.json.corrupt`` and the store
  starts empty.

Reads never touch the disk and never take the lock.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import msgspec

from innkeeper_tavern.pure.groups.model import (
    GROUP_INVALID,
    GROUP_LIMIT_REACHED,
    GROUP_MEMBER_UNKNOWN,
    GROUP_NOT_FOUND,
    GROUP_REVISION_CONFLICT,
    GROUP_STORAGE_LIMIT_REACHED,
    GROUP_WRITE_FAILED,
    GROUPS_FILE_UNSUPPORTED,
    Group,
    GroupError,
    apply_patch,
    check_st_extra,
    parse_new_group,
)
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
from innkeeper_tavern.state.session_bindings.store import utc_now

GROUPS_FILE: Final = "groups.json"
SCHEMA_VERSION: Final = 1
DEFAULT_MAX_GROUPS: Final = 256
HARD_MAX_GROUPS: Final = 4096
DEFAULT_MAX_STATE_BYTES: Final = 32 << 20
HARD_MAX_STATE_BYTES: Final = 64 << 20
#: Group ids: ``group-`` and 32 hex digits (new ones), or what an older file holds.
MAX_GROUP_ID_CHARS: Final = 100

Clock = Callable[[], str]
#: Whether a character id is stored (members must name stored cards when they join).
CharacterCheck = Callable[[str], bool]


class GroupFile(msgspec.Struct, kw_only=True, rename="camel"):
    """The whole ``groups.json`` document."""

    schema_version: int
    groups: list[Group]


_encoder: Final = msgspec.json.Encoder()
_decoder: Final = msgspec.json.Decoder(GroupFile)


def new_group_id() -> str:
    """``group-<32 hex>``."""
    return f"group-{uuid.uuid4().hex}"


def valid_group_id(value: object) -> bool:
    """Whether ``value`` could name a stored group (a path segment that is safe to echo)."""
    return (
        isinstance(value, str)
        and 0 < len(value) <= MAX_GROUP_ID_CHARS
        and all(ch.isascii() and (ch.isalnum() or ch in "-_") for ch in value)
    )


def encode_state(groups: tuple[Group, ...]) -> bytes:
    """The exact bytes of ``groups.json``."""
    doc = GroupFile(schema_version=SCHEMA_VERSION, groups=list(groups))
    return msgspec.json.format(_encoder.encode(doc), indent=1) + b"\n"


_CODES: Final = DocumentCodes(
    file_too_large=GROUPS_FILE_UNSUPPORTED,
    storage_limit=GROUP_STORAGE_LIMIT_REACHED,
    write_failed=GROUP_WRITE_FAILED,
)


def _validate(data: bytes, count: int) -> None:
    """The encoded bytes decode back into as many groups (only a bug can fail this)."""
    if len(_decoder.decode(data).groups) != count:
        raise OSError("the encoded groups failed validation")


class GroupStore(DocumentStore):
    """Groups in ``<root>/groups.json``."""

    def __init__(
        self,
        root: Path,
        *,
        known_character: CharacterCheck,
        max_groups: int = DEFAULT_MAX_GROUPS,
        max_state_bytes: int = DEFAULT_MAX_STATE_BYTES,
        clock: Clock = utc_now,
        ids: Callable[[], str] = new_group_id,
        writer: Writer = atomic_write,
        logger: logging.Logger | None = None,
    ) -> None:
        check_limit("max_groups", max_groups, HARD_MAX_GROUPS)
        check_limit("max_state_bytes", max_state_bytes, HARD_MAX_STATE_BYTES)
        self.path = root / GROUPS_FILE
        self.max_groups = max_groups
        self.max_state_bytes = max_state_bytes
        self.lock = asyncio.Lock()
        self._known = known_character
        self._clock = clock
        self._ids = ids
        self._logger = logger or logging.getLogger("innkeeper.plugin.tavern.groups")
        self._file = DocumentFile(
            self.path,
            names=DocumentNames(noun="groups", empty="groups"),
            codes=_CODES,
            error=GroupError,
            max_state_bytes=max_state_bytes,
            writer=writer,
            logger=self._logger,
        )
        self._groups: tuple[Group, ...] = ()
        self._size = len(encode_state(()))

    # ------------------------------------------------------------------ loading

    async def open(self) -> None:
        """Load the file off the event loop."""
        async with self.lock:
            self._groups = await asyncio.to_thread(self._load)
            self._size = len(encode_state(self._groups))

    def _load(self) -> tuple[Group, ...]:
        data = self._file.read(HARD_MAX_STATE_BYTES)
        if data is None:
            return ()
        try:
            version = msgspec.json.decode(data).get("schemaVersion")
        except (msgspec.DecodeError, AttributeError):
            version = None
        if isinstance(version, int) and not isinstance(version, bool) and version > 1:
            raise GroupError(
                500,
                GROUPS_FILE_UNSUPPORTED,
                f"{GROUPS_FILE} has schemaVersion {version}; this Tavern reads up to "
                f"{SCHEMA_VERSION} and will not overwrite it",
            )
        try:
            doc = _decoder.decode(data)
            if doc.schema_version != SCHEMA_VERSION:
                raise ValueError(f"schemaVersion {doc.schema_version}")
        except (msgspec.DecodeError, msgspec.ValidationError, ValueError) as exc:
            self._file.set_aside(exc)
            return ()
        return tuple(doc.groups)

    # ------------------------------------------------------------------ reads

    def __len__(self) -> int:
        return len(self._groups)

    def groups(self) -> list[Group]:
        """Every group, oldest first."""
        return list(self._groups)

    def find(self, group_id: str) -> Group | None:
        """The group ``group_id``, ``None`` if there is none."""
        for group in self._groups:
            if group.id == group_id:
                return group
        return None

    def get(self, group_id: str) -> Group:
        """The group ``group_id``; 404 ``GROUP_NOT_FOUND`` otherwise."""
        group = self.find(group_id) if valid_group_id(group_id) else None
        if group is None:
            raise GroupError(404, GROUP_NOT_FOUND, f"group {group_id[:100]!r} does not exist")
        return group

    # ------------------------------------------------------------------ writes

    def _check_members(self, group: Group, before: Group | None) -> None:
        """Members joining now must be stored cards (a kept member whose card was deleted may
        stay: the group shows it as missing)."""
        kept = {m.character_id for m in before.members} if before else set()
        for member in group.members:
            if member.character_id not in kept and not self._known(member.character_id):
                raise GroupError(
                    400,
                    GROUP_MEMBER_UNKNOWN,
                    f"character {member.character_id[:100]!r} does not exist",
                )

    @staticmethod
    def _check_revision(group: Group, revision: object) -> None:
        if not isinstance(revision, int) or isinstance(revision, bool):
            raise GroupError(400, GROUP_INVALID, "revision (the group's current one) is required")
        if revision != group.revision:
            raise GroupError(
                409,
                GROUP_REVISION_CONFLICT,
                f"group {group.id} is at revision {group.revision}, not {revision}; "
                "reload it and apply the change again",
                details={"currentRevision": group.revision},
            )

    async def _commit(self, groups: tuple[Group, ...]) -> None:
        """Bound-check, validate, write and publish (caller holds the lock)."""
        if len(groups) > self.max_groups and len(groups) > len(self._groups):
            raise GroupError(
                409, GROUP_LIMIT_REACHED, f"at most {self.max_groups} groups may be stored"
            )
        self._size = await self._file.write(
            lambda: encode_state(groups), self._size, lambda data: _validate(data, len(groups))
        )
        self._groups = groups

    def _new_id(self) -> str:
        return unique_id(self._ids, valid_group_id, lambda i: self.find(i) is not None)

    async def create(self, body: object, *, st_extra: dict[str, Any] | None = None) -> Group:
        """Store a new group from a create body (revision 1)."""
        async with self.lock:
            group = parse_new_group(body, group_id=self._new_id(), now=self._clock())
            if st_extra:
                group = msgspec.structs.replace(group, st_extra=check_st_extra(st_extra))
            self._check_members(group, None)
            await self._commit((*self._groups, group))
        return group

    async def update(self, group_id: str, body: object) -> Group:
        """Apply a PATCH body made from ``body["revision"]``; the new revision is one more."""
        async with self.lock:
            current = self.get(group_id)
            self._check_revision(current, body.get("revision") if isinstance(body, dict) else 0)
            updated = apply_patch(current, body, now=self._clock())
            if updated is current:
                return current
            self._check_members(updated, current)
            await self._commit(tuple(updated if g.id == group_id else g for g in self._groups))
        return updated

    async def delete(self, group_id: str, revision: object) -> Group:
        """Remove the group, if ``revision`` is still its current one; returns it."""
        async with self.lock:
            doomed = self.get(group_id)
            self._check_revision(doomed, revision)
            await self._commit(tuple(g for g in self._groups if g.id != group_id))
        return doomed


__all__ = [
    "DEFAULT_MAX_GROUPS",
    "DEFAULT_MAX_STATE_BYTES",
    "GROUPS_FILE",
    "GroupStore",
    "encode_state",
    "new_group_id",
    "valid_group_id",
]
