"""The path jail of the play workspace (`docs/contract/play.md#path-jail`;
`docs/play.md#the-path-jail`).

A client path is split into segments (on ``/`` or ``\\``), then walked from the bound root one
segment at a time **through directory file descriptors**: every step is an ``lstat`` relative to
the already-opened parent (no-follow), a symlink is refused, and the next directory is opened with
``O_NOFOLLOW | O_DIRECTORY`` relative to the parent's descriptor and checked to be the very inode
that was examined. Nothing ever follows a path string from the root again, so swapping a checked
directory for a symlink cannot redirect a write: the write lands in the directory that was opened,
and the parent is re-resolved before the publishing ``rename`` (a change is ``PLAY_PATH_RACE``).
The opened directory's real path (``/proc/self/fd``) is rechecked to lie inside the root.

Directories are created one level at a time (``mkdirat``), never recursively. Temporary files are
created exclusively (``O_EXCL``) next to their target. Everything here blocks: callers run it in a
worker thread.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Final

from .errors import (
    PLAY_FILE_NOT_UTF8,
    PLAY_FILE_TOO_LARGE,
    PLAY_FILE_WRITE_FAILED,
    PLAY_PATH_CONFLICT,
    PLAY_PATH_ESCAPE,
    PLAY_PATH_INVALID,
    PLAY_PATH_LINK,
    PLAY_PATH_NOT_FOUND,
    PLAY_PATH_RACE,
    PLAY_WORKSPACE_INVALID,
    PlayError,
)

#: Longest client path (characters), `docs/play.md#the-path-jail`.
MAX_PATH_CHARS: Final = 512
#: Largest workspace file read or written (bytes), `docs/contract/play.md#workspace`.
MAX_FILE_BYTES: Final = 1 << 20
#: File names that are managed documents at any depth (schema + revision/CAS).
MANAGED_NAMES: Final = frozenset({"catalog.json", "timeline.json"})
#: Mode of files and directories the jail creates.
FILE_MODE: Final = 0o600
DIR_MODE: Final = 0o700

_DRIVE: Final = re.compile(r"^[A-Za-z]:")
_SPLIT: Final = re.compile(r"[/\\]+")
_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_FILE_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def split_relative(path: object) -> tuple[str, ...]:
    """The segments of a client-relative path, or :class:`PlayError`.

    Blank, over-long or NUL-carrying paths are ``PLAY_PATH_INVALID``; absolute, drive and UNC
    paths and any ``..`` segment are ``PLAY_PATH_ESCAPE``. Empty and ``.`` segments are dropped;
    at least one segment must remain. A final segment that is a case variant of a managed name
    (``Catalog.JSON``) is refused: on a case-insensitive disk it would be the managed document
    reached around its revision check.
    """
    if not isinstance(path, str) or not path.strip():
        raise PlayError(400, PLAY_PATH_INVALID, "path must be a non-blank string")
    if len(path) > MAX_PATH_CHARS:
        raise PlayError(400, PLAY_PATH_INVALID, f"path is longer than {MAX_PATH_CHARS} characters")
    if "\x00" in path:
        raise PlayError(400, PLAY_PATH_INVALID, "path contains NUL")
    if path[0] in "/\\" or _DRIVE.match(path):
        raise PlayError(403, PLAY_PATH_ESCAPE, "path must be relative to the workspace root")
    segments = tuple(s for s in _SPLIT.split(path) if s not in ("", "."))
    if any(s == ".." for s in segments):
        raise PlayError(403, PLAY_PATH_ESCAPE, "path must not contain '..'")
    if not segments:
        raise PlayError(400, PLAY_PATH_INVALID, "path names no file or directory")
    last = segments[-1]
    if last not in MANAGED_NAMES and last.casefold() in MANAGED_NAMES:
        raise PlayError(
            400, PLAY_PATH_INVALID, f"{last!r} is a case variant of a managed document name"
        )
    return segments


def posix(segments: tuple[str, ...]) -> str:
    """The normalized POSIX form of ``segments`` (the key of guards and leases)."""
    return "/".join(segments)


def is_managed(segments: tuple[str, ...]) -> bool:
    """Whether the path names a managed document (``catalog.json``/``timeline.json``)."""
    return segments[-1] in MANAGED_NAMES


def is_system_disk(root: str) -> bool:
    """The original's ``isSystemDiskPath`` on POSIX: ``/``, ``/usr*`` or ``/System*``.

    A warning only (`docs/play.md#workspace`).
    """
    real = os.path.realpath(root)
    return real == "/" or real.startswith(("/usr", "/System"))


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry of a one-level listing."""

    name: str
    type: str  # "file" | "directory" | "link" | "other"
    size: int | None


class Opened:
    """A walked path: the parent directory's descriptor and the target's name within it.

    ``chain`` holds ``(st_dev, st_ino)`` of every directory from the root to the parent, so the
    walk can be repeated and compared (:meth:`Jail.recheck`).
    """

    def __init__(self, fd: int, name: str, chain: tuple[tuple[int, int], ...]) -> None:
        self.fd = fd
        self.name = name
        self.chain = chain

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


class Jail:
    """Walks client paths inside one bound root (see the module docstring)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.real_root = os.path.realpath(root)

    # -- walking ---------------------------------------------------------------------------
    def open_root(self) -> int:
        try:
            st = os.lstat(self.root)
        except OSError:
            raise PlayError(
                409, PLAY_WORKSPACE_INVALID, "the bound root no longer exists"
            ) from None
        if stat.S_ISLNK(st.st_mode):
            raise PlayError(403, PLAY_PATH_LINK, "the bound root is a symbolic link")
        if not stat.S_ISDIR(st.st_mode):
            raise PlayError(409, PLAY_WORKSPACE_INVALID, "the bound root is not a directory")
        try:
            return os.open(self.root, _DIR_FLAGS)
        except OSError:
            raise PlayError(
                409, PLAY_WORKSPACE_INVALID, "the bound root cannot be opened"
            ) from None

    def _step(self, fd: int, segment: str, *, create: bool) -> int | None:
        """Open directory ``segment`` under ``fd`` (creating it when asked); ``None`` if missing."""
        st = _lstat_at(fd, segment)
        if st is None:
            if not create:
                return None
            try:
                os.mkdir(segment, DIR_MODE, dir_fd=fd)
            except FileExistsError:
                pass  # a concurrent creator: examined below like any existing entry
            except OSError as exc:
                raise PlayError(
                    409, PLAY_PATH_CONFLICT, f"cannot create a directory: {exc.strerror}"
                ) from None
            st = _lstat_at(fd, segment)
            if st is None:
                raise PlayError(403, PLAY_PATH_RACE, "a directory vanished while it was created")
        _check_dir(st)
        try:
            child = os.open(segment, _DIR_FLAGS, dir_fd=fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise PlayError(
                    403, PLAY_PATH_RACE, "a directory changed while it was checked"
                ) from None
            raise PlayError(
                409, PLAY_PATH_CONFLICT, f"cannot open a directory: {exc.strerror}"
            ) from None
        try:
            opened = os.fstat(child)
            if (opened.st_dev, opened.st_ino) != (st.st_dev, st.st_ino):
                raise PlayError(403, PLAY_PATH_RACE, "a directory changed while it was checked")
            self._inside(child)
        except BaseException:
            os.close(child)
            raise
        return child

    def _inside(self, fd: int) -> None:
        """Realpath recheck: the opened directory still lies inside the root."""
        try:
            real = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return  # no /proc: the descriptor walk alone keeps the jail
        if real != self.real_root and not real.startswith(self.real_root.rstrip("/") + "/"):
            raise PlayError(403, PLAY_PATH_ESCAPE, "the path resolves outside the workspace root")

    def walk_dirs(
        self, segments: tuple[str, ...], *, create: bool, must_exist: bool = True
    ) -> tuple[int, tuple[tuple[int, int], ...]] | None:
        """Open the directory ``segments`` names (``()`` is the root).

        Returns its descriptor and the inode chain, or ``None`` when a level is missing and
        neither ``create`` nor ``must_exist`` is set (``must_exist`` raises
        ``PLAY_PATH_NOT_FOUND``).
        """
        fd = self.open_root()
        root_st = os.fstat(fd)
        chain = [(root_st.st_dev, root_st.st_ino)]
        try:
            for segment in segments:
                child = self._step(fd, segment, create=create)
                if child is None:
                    if must_exist:
                        raise PlayError(404, PLAY_PATH_NOT_FOUND, "no such file or directory")
                    os.close(fd)
                    return None
                os.close(fd)
                fd = child
                st = os.fstat(fd)
                chain.append((st.st_dev, st.st_ino))
        except BaseException:
            with contextlib.suppress(OSError):
                os.close(fd)
            raise
        return fd, tuple(chain)

    def open_parent(self, segments: tuple[str, ...], *, create: bool) -> Opened:
        """Walk to the parent of the file ``segments`` names."""
        walked = self.walk_dirs(segments[:-1], create=create, must_exist=True)
        assert walked is not None
        return Opened(walked[0], segments[-1], walked[1])

    def recheck(self, segments: tuple[str, ...], opened: Opened) -> None:
        """Re-resolve the parent from the root; a different directory is ``PLAY_PATH_RACE``."""
        try:
            walked = self.walk_dirs(segments[:-1], create=False, must_exist=True)
        except PlayError as exc:
            raise PlayError(
                403, PLAY_PATH_RACE, f"the parent changed before the write: {exc.message}"
            ) from None
        assert walked is not None
        os.close(walked[0])
        if walked[1] != opened.chain:
            raise PlayError(403, PLAY_PATH_RACE, "the parent directory changed before the write")
        self._inside(opened.fd)

    # -- files -----------------------------------------------------------------------------
    def read_at(self, opened: Opened, *, max_bytes: int = MAX_FILE_BYTES) -> bytes | None:
        """The bytes of the target, ``None`` if it does not exist."""
        st = _lstat_at(opened.fd, opened.name)
        if st is None:
            return None
        if stat.S_ISLNK(st.st_mode):
            raise PlayError(403, PLAY_PATH_LINK, "the path is a symbolic link")
        if not stat.S_ISREG(st.st_mode):
            raise PlayError(409, PLAY_PATH_CONFLICT, "the path is not a regular file")
        try:
            fd = os.open(opened.name, _FILE_FLAGS, dir_fd=opened.fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise PlayError(403, PLAY_PATH_LINK, "the path is a symbolic link") from None
            raise
        with os.fdopen(fd, "rb") as handle:
            if os.fstat(handle.fileno()).st_size > max_bytes:
                raise PlayError(
                    413, PLAY_FILE_TOO_LARGE, f"the file is larger than {max_bytes} bytes"
                )
            data = handle.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise PlayError(413, PLAY_FILE_TOO_LARGE, f"the file is larger than {max_bytes} bytes")
        return data

    def write_at(
        self,
        segments: tuple[str, ...],
        opened: Opened,
        data: bytes,
        *,
        precheck: Callable[[bytes | None], None] | None = None,
    ) -> None:
        """Publish ``data`` as the target: exclusive temp, fsync, parent recheck, rename.

        ``precheck(current bytes)`` runs again just before the rename (the CAS recheck).
        """
        if len(data) > MAX_FILE_BYTES:
            raise PlayError(
                413, PLAY_FILE_TOO_LARGE, f"the file is larger than {MAX_FILE_BYTES} bytes"
            )
        st = _lstat_at(opened.fd, opened.name)
        if st is not None:
            if stat.S_ISLNK(st.st_mode):
                raise PlayError(403, PLAY_PATH_LINK, "the path is a symbolic link")
            if not stat.S_ISREG(st.st_mode):
                raise PlayError(409, PLAY_PATH_CONFLICT, "the path is not a regular file")
        temp = f".{opened.name[:80]}.{os.getpid()}.{secrets.token_hex(6)}.tmp"
        fd = os.open(
            temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, FILE_MODE, dir_fd=opened.fd
        )
        try:
            try:
                view = memoryview(data)
                while view:
                    written = os.write(fd, view)
                    if written <= 0:
                        raise PlayError(500, PLAY_FILE_WRITE_FAILED, "a write made no progress")
                    view = view[written:]
                os.fsync(fd)
            finally:
                os.close(fd)
            self.recheck(segments, opened)
            if precheck is not None:
                precheck(self.read_at(opened))
            os.rename(temp, opened.name, src_dir_fd=opened.fd, dst_dir_fd=opened.fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=opened.fd)
            raise
        with contextlib.suppress(OSError):
            os.fsync(opened.fd)

    def list_at(self, fd: int) -> list[Entry]:
        """One level of a directory, sorted by name (hidden temp files left out)."""
        entries: list[Entry] = []
        with os.scandir(fd) as it:
            for item in it:
                if item.name.endswith(".tmp") and item.name.startswith("."):
                    continue
                kind = "other"
                size: int | None = None
                if item.is_symlink():
                    kind = "link"
                elif item.is_dir(follow_symlinks=False):
                    kind = "directory"
                elif item.is_file(follow_symlinks=False):
                    kind = "file"
                    size = item.stat(follow_symlinks=False).st_size
                entries.append(Entry(item.name, kind, size))
        entries.sort(key=lambda e: (e.name.casefold(), e.name))
        return entries


def decode_utf8(data: bytes) -> str:
    """Workspace files are UTF-8 text; anything else is 400 ``PLAY_FILE_NOT_UTF8``."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise PlayError(400, PLAY_FILE_NOT_UTF8, "the file is not valid UTF-8 text") from None


def _lstat_at(fd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        raise PlayError(409, PLAY_PATH_CONFLICT, "a parent is not a directory") from None
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:
            raise PlayError(400, PLAY_PATH_INVALID, "a path segment is too long") from None
        raise PlayError(
            409, PLAY_PATH_CONFLICT, f"the path cannot be examined: {exc.strerror}"
        ) from None


def _check_dir(st: os.stat_result) -> None:
    if stat.S_ISLNK(st.st_mode):
        raise PlayError(403, PLAY_PATH_LINK, "the path crosses a symbolic link")
    if not stat.S_ISDIR(st.st_mode):
        raise PlayError(409, PLAY_PATH_CONFLICT, "a parent of the path is not a directory")


@contextlib.contextmanager
def closing_fd(fd: int) -> Iterator[int]:
    """Close a descriptor on exit."""
    try:
        yield fd
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)
