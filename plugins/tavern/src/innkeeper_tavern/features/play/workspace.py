"""The play workspace: one bound root, its files and managed documents
(`docs/contract/play.md#workspace`, `docs/contract/play.md#managed-documents`).

The binding lives in the plugin data directory as ``play-workspace.json`` (at most 8 KiB). Every
file operation walks the path through the :class:`~.paths.Jail` inside an in-process guard per
target (one request at a time per path; a request that cannot get the guard within
:data:`GUARD_WAIT_SECONDS` is ``409 PLAY_PATH_BUSY``). Managed documents (``catalog.json`` /
``timeline.json`` at any depth) are validated after a read and before a write and carry the
SHA-256 ``revision`` of their exact bytes; a write names the ``expectedRevision`` it replaces
(``None`` = create only), checked before validation and again just before the rename.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import hashlib
import json
import logging
import os
import re
import stat
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import msgspec

from innkeeper_hostapi.sessions import WorkspaceController, WorkspaceInvalidPath
from innkeeper_tavern.state.resources.atomic import atomic_write, read_bounded
from innkeeper_tavern.state.resources.errors import ResourceError

from .errors import (
    PLAY_FILE_REVISION_CONFLICT,
    PLAY_FILE_REVISION_INVALID,
    PLAY_FILE_REVISION_REQUIRED,
    PLAY_FILE_TOO_LARGE,
    PLAY_HOST_UNAVAILABLE,
    PLAY_PATH_BUSY,
    PLAY_PATH_CONFLICT,
    PLAY_PATH_LINK,
    PLAY_PATH_NOT_FOUND,
    PLAY_STORAGE_LIMIT,
    PLAY_WORKSPACE_CHANGED,
    PLAY_WORKSPACE_INVALID,
    PLAY_WORKSPACE_SCOPE_INVALID,
    PLAY_WORKSPACE_UNBOUND,
    PlayError,
)
from .leases import ANY_WRITE_KEY, MANAGED_KEY, WORKSPACE_KEY, Leases, file_key
from .paths import (
    MAX_FILE_BYTES,
    Entry,
    Jail,
    Opened,
    closing_fd,
    decode_utf8,
    is_managed,
    is_system_disk,
    posix,
    split_relative,
)
from .schema import validate_managed

#: The binding file in the plugin data directory and its size limit (`docs/play.md#files`).
BINDING_FILE: Final = "play-workspace.json"
MAX_BINDING_BYTES: Final = 8 << 10
#: The workspace contract version reported by ``GET /workspace``.
CONTRACT_VERSION: Final = 1
#: Seconds a request waits for another request on the same path before ``PLAY_PATH_BUSY``.
GUARD_WAIT_SECONDS: Final = 5.0
#: Longest root path accepted by ``PUT /workspace``.
MAX_ROOT_CHARS: Final = 4096
#: How many times a server-side document update replays its intent after a conflict.
CAS_TRIES: Final = 3
#: Folders bound before the current one that the binding remembers (newest first), so a player
#: who moves the play folder is told where the earlier playthroughs are.
MAX_PREVIOUS_ROOTS: Final = 8
_REVISION: Final = re.compile(r"^[0-9a-f]{64}$")

#: Marker for "the body has no expectedRevision key".
MISSING: Final = object()


def revision_of(data: bytes) -> str:
    """The revision of managed bytes: SHA-256 of the exact bytes, 64 lowercase hex."""
    return hashlib.sha256(data).hexdigest()


class PreviousRoot(msgspec.Struct, rename="camel", kw_only=True):
    """A folder that was bound before the current one: its playthroughs stay there."""

    root_path: str
    workspace_id: str
    bound_at: str
    left_at: str


class Binding(msgspec.Struct, rename="camel", kw_only=True):
    """``play-workspace.json``: the bound root (``activeTimelinePath`` is deprecated, kept)."""

    schema_version: int = 1
    root_path: str
    workspace_id: str
    bound_at: str
    first_selected_at: str
    active_timeline_path: str | None = None
    previous_roots: list[PreviousRoot] = msgspec.field(default_factory=list)


def _previous_roots(previous: Binding | None, new_root: str, now: str) -> list[PreviousRoot]:
    """The earlier folders after binding ``new_root``: the one left goes first, ``new_root``
    itself is dropped (it is current again), at most :data:`MAX_PREVIOUS_ROOTS`."""
    if previous is None:
        return []
    rows = list(previous.previous_roots)
    if previous.root_path != new_root:
        left = PreviousRoot(
            root_path=previous.root_path,
            workspace_id=previous.workspace_id,
            bound_at=previous.bound_at,
            left_at=now,
        )
        rows.insert(0, left)
    seen: set[str] = {new_root}
    kept: list[PreviousRoot] = []
    for row in rows:
        if row.root_path not in seen:
            seen.add(row.root_path)
            kept.append(row)
    return kept[:MAX_PREVIOUS_ROOTS]


@dataclass(frozen=True, slots=True)
class FileRead:
    """A file read: its text and, for a managed document, its revision and decoded value."""

    path: str
    content: str
    revision: str | None
    document: dict[str, Any] | None


def encode_document(document: dict[str, Any]) -> str:
    """The text the server writes when it rewrites a managed document itself."""
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def expected_revision(value: object) -> str | None:
    """Check the ``expectedRevision`` of a managed write (``MISSING`` when the key is absent)."""
    if value is MISSING:
        raise PlayError(
            400,
            PLAY_FILE_REVISION_REQUIRED,
            "writing a managed document needs expectedRevision (null to create it)",
        )
    if value is None:
        return None
    if not isinstance(value, str) or _REVISION.fullmatch(value) is None:
        raise PlayError(
            400, PLAY_FILE_REVISION_INVALID, "expectedRevision must be null or 64 lowercase hex"
        )
    return value


def _cas(expected: str | None) -> Callable[[bytes | None], None]:
    def check(current: bytes | None) -> None:
        if expected is None:
            if current is not None:
                raise PlayError(
                    409, PLAY_FILE_REVISION_CONFLICT, "the document exists (expected to create it)"
                )
        elif current is None:
            raise PlayError(409, PLAY_FILE_REVISION_CONFLICT, "the document does not exist")
        elif revision_of(current) != expected:
            raise PlayError(
                409, PLAY_FILE_REVISION_CONFLICT, "the document changed (revision mismatch)"
            )

    return check


class PlayWorkspace:
    """The bound root and every file operation inside it."""

    def __init__(
        self,
        data_dir: Path,
        workspaces: Callable[[], WorkspaceController | None],
        *,
        clock: Callable[[], str],
        logger: logging.Logger | None = None,
        default_root: Path | None = None,
    ) -> None:
        self._file = data_dir / BINDING_FILE
        #: Bound on first need when nothing is (``None``: stay unbound until ``PUT /workspace``).
        self.default_root = default_root
        self._bind_lock = asyncio.Lock()
        self._workspaces = workspaces
        self._clock = clock
        self._log = logger or logging.getLogger("innkeeper.plugin.tavern.play")
        self.binding: Binding | None = None
        self.leases = Leases()
        self._guards: dict[str, list[Any]] = {}

    async def open(self) -> None:
        """Load the binding (a corrupt file is logged and treated as unbound)."""
        try:
            raw = await asyncio.to_thread(read_bounded, self._file, MAX_BINDING_BYTES)
        except ResourceError as exc:
            self._log.warning("%s cannot be loaded: %s", BINDING_FILE, exc.code)
            return
        if raw is None:
            return
        try:
            self.binding = msgspec.json.decode(raw, type=Binding)
        except msgspec.DecodeError:
            self._log.warning("%s is not a valid binding; the workspace is unbound", BINDING_FILE)

    # -- binding --------------------------------------------------------------------------------
    def require(self) -> Binding:
        """The binding, or 409 ``PLAY_WORKSPACE_UNBOUND``."""
        if self.binding is None:
            raise PlayError(409, PLAY_WORKSPACE_UNBOUND, "no play workspace root is bound")
        return self.binding

    async def ensure(self) -> Binding:
        """The binding; when none is bound, bind :attr:`default_root` first (created when
        missing, then bound like ``PUT /workspace``: a symlink or a file there is refused)."""
        if self.binding is not None or self.default_root is None:
            return self.require()
        root = self.default_root
        async with self._bind_lock:
            if self.binding is None:
                try:
                    await asyncio.to_thread(root.mkdir, parents=True, exist_ok=True)
                except OSError as exc:
                    raise PlayError(
                        409,
                        PLAY_WORKSPACE_INVALID,
                        f"the default play folder cannot be created: {exc.strerror}",
                    ) from None
                await self.bind(str(root))
                self._log.info("bound the default play folder")
        return self.require()

    def scope(self) -> str | None:
        """``workspaceScope``: the JSON string of ``[workspaceId, rootPath]``."""
        b = self.binding
        return None if b is None else json.dumps([b.workspace_id, b.root_path])

    def check_scope(self, expected: object) -> None:
        """Check an optional ``expectedWorkspaceScope`` (parsed values are compared)."""
        if expected is None:
            return
        if not isinstance(expected, str):
            raise PlayError(
                400, PLAY_WORKSPACE_SCOPE_INVALID, "expectedWorkspaceScope must be a string"
            )
        try:
            parsed = json.loads(expected)
        except ValueError:
            parsed = None
        if not (
            isinstance(parsed, list)
            and len(parsed) == 2
            and all(isinstance(p, str) for p in parsed)
        ):
            raise PlayError(
                400,
                PLAY_WORKSPACE_SCOPE_INVALID,
                "expectedWorkspaceScope must be the JSON of [workspaceId, rootPath]",
            )
        b = self.require()
        if parsed != [b.workspace_id, b.root_path]:
            raise PlayError(409, PLAY_WORKSPACE_CHANGED, "the bound play workspace changed")

    def view(self, *, warnings: list[str] | None = None) -> dict[str, Any]:
        """The ``GET /workspace`` body."""
        b = self.binding
        default = str(self.default_root) if self.default_root is not None else None
        if b is None:
            return {
                "ok": True,
                "selected": False,
                "rootPath": None,
                "workspaceId": None,
                "workspaceScope": None,
                "contractVersion": CONTRACT_VERSION,
                "warnings": [],
                "defaultRootPath": default,
                "previousRoots": [],
            }
        found = list(warnings or [])
        if "SYSTEM_DISK" not in found and is_system_disk(b.root_path):
            found.append("SYSTEM_DISK")
        return {
            "ok": True,
            "selected": True,
            "rootPath": b.root_path,
            "workspaceId": b.workspace_id,
            "workspaceScope": self.scope(),
            "contractVersion": CONTRACT_VERSION,
            "boundAt": b.bound_at,
            "firstSelectedAt": b.first_selected_at,
            "warnings": found,
            "defaultRootPath": default,
            "previousRoots": [msgspec.to_builtins(r) for r in b.previous_roots],
        }

    async def bind(self, path: object) -> dict[str, Any]:
        """``PUT /workspace``: bind one existing directory (never created)."""
        if not isinstance(path, str) or not path.strip() or len(path) > MAX_ROOT_CHARS:
            raise PlayError(400, PLAY_WORKSPACE_INVALID, "path must be a non-blank string")
        if "\x00" in path or not path.startswith("/"):
            raise PlayError(400, PLAY_WORKSPACE_INVALID, "path must be an absolute directory path")
        root = os.path.normpath(path)  # noqa: ASYNC240 (string-only, no I/O)
        try:
            st = await asyncio.to_thread(os.lstat, root)
        except OSError:
            raise PlayError(400, PLAY_WORKSPACE_INVALID, "the directory does not exist") from None
        if stat.S_ISLNK(st.st_mode):
            raise PlayError(403, PLAY_PATH_LINK, "the workspace root must not be a symbolic link")
        if not stat.S_ISDIR(st.st_mode):
            raise PlayError(400, PLAY_WORKSPACE_INVALID, "the path is not a directory")
        controller = self._workspaces()
        if controller is None:
            raise PlayError(501, PLAY_HOST_UNAVAILABLE, "the host has no workspace controller")
        try:
            workspace = await controller.create(root)
        except WorkspaceInvalidPath as exc:
            raise PlayError(400, PLAY_WORKSPACE_INVALID, exc.message) from None
        now = self._clock()
        previous = self.binding
        first = previous.first_selected_at if previous is not None else now
        active = None
        if previous is not None and previous.root_path == workspace.root_path:
            active = previous.active_timeline_path
        binding = Binding(
            root_path=workspace.root_path,
            workspace_id=workspace.id,
            bound_at=now,
            first_selected_at=first,
            active_timeline_path=active,
            previous_roots=_previous_roots(previous, workspace.root_path, now),
        )
        data = msgspec.json.encode(binding)
        # The remembered folders give way (oldest first) before the binding itself is refused.
        while len(data) > MAX_BINDING_BYTES and binding.previous_roots:
            binding.previous_roots.pop()
            data = msgspec.json.encode(binding)
        if len(data) > MAX_BINDING_BYTES:
            raise PlayError(413, PLAY_STORAGE_LIMIT, f"{BINDING_FILE} would exceed its limit")
        await asyncio.to_thread(atomic_write, self._file, data)
        self.binding = binding
        self.leases.bump(WORKSPACE_KEY)
        warnings = ["SWIPE_DISK"]
        if is_system_disk(binding.root_path):
            warnings.append("SYSTEM_DISK")
        return self.view(warnings=warnings)

    def jail(self) -> Jail:
        return Jail(self.require().root_path)

    # -- guard ----------------------------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def guard(self, key: str) -> AsyncIterator[None]:
        """One in-process operation at a time per target path."""
        full = f"{self.require().root_path}\\0{key}"
        entry = self._guards.get(full)
        if entry is None:
            entry = self._guards[full] = [asyncio.Lock(), 0]
        lock: asyncio.Lock = entry[0]
        entry[1] += 1  # users (holder and waiters): the lock is dropped only when none is left
        try:
            try:
                await asyncio.wait_for(lock.acquire(), GUARD_WAIT_SECONDS)
            except TimeoutError:
                raise PlayError(
                    409, PLAY_PATH_BUSY, "another operation on this path is running"
                ) from None
            try:
                yield
            finally:
                lock.release()
        finally:
            entry[1] -= 1
            if entry[1] == 0 and self._guards.get(full) is entry:
                del self._guards[full]

    # -- files ----------------------------------------------------------------------------------
    async def read(self, path: object) -> FileRead:
        """``GET /workspace/files?path=``; a missing file is 404 ``PLAY_PATH_NOT_FOUND``."""
        found = await self.read_optional(path)
        if found is None:
            raise PlayError(404, PLAY_PATH_NOT_FOUND, "no such file")
        return found

    async def read_optional(self, path: object) -> FileRead | None:
        """Like :meth:`read` but ``None`` for a missing file (or missing parent)."""
        segments = split_relative(path)
        jail = self.jail()
        key = posix(segments)

        def work() -> bytes | None:
            walked = jail.walk_dirs(segments[:-1], create=False, must_exist=False)
            if walked is None:
                return None
            opened = Opened(walked[0], segments[-1], walked[1])
            try:
                return jail.read_at(opened)
            finally:
                opened.close()

        async with self.guard(key):
            data = await asyncio.to_thread(work)
            if data is None:
                return None
            text = decode_utf8(data)
            if not is_managed(segments):
                return FileRead(key, text, None, None)
            document = validate_managed(segments[-1], data)
            return FileRead(key, text, revision_of(data), document)

    async def write(
        self,
        path: object,
        content: object,
        *,
        expected: object = MISSING,
        expected_scope: object = None,
    ) -> str | None:
        """``PUT /workspace/files?path=``: store the exact UTF-8 bytes of ``content``.

        Returns the new revision of a managed document (``None`` for an ordinary file).
        """
        segments = split_relative(path)
        if not isinstance(content, str):
            raise PlayError(400, "PLAY_BODY_INVALID", "content must be a string")
        data = content.encode("utf-8")
        if len(data) > MAX_FILE_BYTES:
            raise PlayError(
                413, PLAY_FILE_TOO_LARGE, f"the file is larger than {MAX_FILE_BYTES} bytes"
            )
        managed = is_managed(segments)
        revision = expected_revision(expected) if managed else None
        # Bound only once the body is valid: a refused request leaves no binding behind.
        await self.ensure()
        self.check_scope(expected_scope)
        jail = self.jail()
        key = posix(segments)

        def work() -> None:
            opened = jail.open_parent(segments, create=True)
            try:
                if managed:
                    check = _cas(revision)
                    check(jail.read_at(opened))  # CAS before validation…
                    validate_managed(segments[-1], data)
                    jail.write_at(segments, opened, data, precheck=check)  # …and before rename
                else:
                    jail.write_at(segments, opened, data)
            finally:
                opened.close()

        async with self.guard(key):
            await asyncio.to_thread(work)
            if managed:
                self.leases.bump(file_key(key))
                self.leases.bump(MANAGED_KEY)
            self.leases.bump(ANY_WRITE_KEY)
        return revision_of(data) if managed else None

    async def update(
        self,
        path: str,
        mutate: Callable[[dict[str, Any] | None], dict[str, Any] | None],
        *,
        tries: int = CAS_TRIES,
    ) -> tuple[str | None, dict[str, Any] | None]:
        """Apply a pure intent to a managed document with CAS, replaying it on a conflict.

        ``mutate`` gets the fresh document (``None`` when missing) and returns the new one, or
        ``None`` for "no change". Returns the resulting revision and document.
        """
        for attempt in range(1, tries + 1):
            current = await self.read_optional(path)
            document = mutate(copy.deepcopy(current.document) if current is not None else None)
            if document is None:
                return (current.revision, current.document) if current is not None else (None, None)
            try:
                revision = await self.write(
                    path,
                    encode_document(document),
                    expected=current.revision if current is not None else None,
                )
            except PlayError as exc:
                if exc.code != PLAY_FILE_REVISION_CONFLICT or attempt == tries:
                    raise
                continue
            return revision, document
        raise AssertionError("unreachable")

    async def list(self, prefix: object) -> tuple[str, list[Entry]]:
        """``GET /workspace/files?list=``: one level (``""`` or ``.`` is the root)."""
        segments: tuple[str, ...] = ()
        if not (isinstance(prefix, str) and prefix.strip() in ("", ".", "/")):
            segments = split_relative(prefix)
        jail = self.jail()

        def work() -> list[Entry]:
            walked = jail.walk_dirs(segments, create=False, must_exist=True)
            assert walked is not None
            with closing_fd(walked[0]) as fd:
                return jail.list_at(fd)

        return posix(segments), await asyncio.to_thread(work)

    async def read_optional_dir(self, path: object) -> bool:
        """Whether ``path`` names an existing directory (no link followed)."""
        segments = split_relative(path)
        jail = self.jail()

        def work() -> bool:
            walked = jail.walk_dirs(segments, create=False, must_exist=False)
            if walked is None:
                return False
            os.close(walked[0])
            return True

        return await asyncio.to_thread(work)

    async def mkdir(self, path: object) -> bool:
        """``POST /workspace/dirs``: create the directory level by level; ``False`` if it
        already existed."""
        segments = split_relative(path)
        await self.ensure()
        jail = self.jail()

        def work() -> bool:
            existing = jail.walk_dirs(segments, create=False, must_exist=False)
            if existing is not None:
                os.close(existing[0])
                return False
            walked = jail.walk_dirs(segments, create=True)
            assert walked is not None
            os.close(walked[0])
            return True

        async with self.guard(posix(segments)):
            try:
                created = await asyncio.to_thread(work)
            except FileExistsError:
                raise PlayError(409, PLAY_PATH_CONFLICT, "a file is in the way") from None
            if created:
                self.leases.bump(ANY_WRITE_KEY)
            return created
