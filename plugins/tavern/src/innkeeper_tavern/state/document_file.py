"""``DocumentFile``: one whole-file JSON document of the Tavern plugin, read bounded and written
whole.

The small stores that keep all their state in one file (``groups.json``,
``session-templates.json``) share this recipe:

- **Reading** (blocking, run through ``asyncio.to_thread``): temp files a crashed writer left
  are removed, then the file is read only if it is at most ``max_read_bytes``; a larger file is
  never parsed and stops the plugin with the reason (the store's ``FILE_TOO_LARGE``-kind code,
  status 500). A file that is not the store's document is moved to ``<name>.corrupt`` and the
  store starts empty (:meth:`DocumentFile.set_aside`).
- **Writing** (:meth:`DocumentFile.write`): the new state is encoded and bound-checked against
  ``max_state_bytes`` (413, unless the state shrinks: a state already over a lowered limit may
  still get smaller), the store validates a decoded copy of those exact bytes, and only then
  are they written atomically (temp file, fsync, rename) off the event loop. A failed write is
  500 with the store's ``WRITE_FAILED`` code and changes nothing; the store publishes its new
  state in memory only after :meth:`write` returns.

Each store keeps its own error type and codes: it passes an :data:`ErrorFactory` building
``(status, code, message)`` errors and the three codes in :class:`DocumentCodes`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from innkeeper_tavern.state.session_bindings.files import (
    FileTooLarge,
    read_limited,
    remove_stale_temps,
)

#: ``(status, code, message) -> exception`` of the store (``GroupError``, ``TemplateError``).
ErrorFactory = Callable[[int, str, str], Exception]
#: Blocking ``(path, bytes)`` writer; a seam so tests can make the disk fail.
Writer = Callable[[Path, bytes], None]


@dataclass(frozen=True, slots=True)
class DocumentCodes:
    """The store's stable error codes for the three ways a file operation is refused."""

    #: The file on disk is over the read limit (500, plugin stops, file untouched).
    file_too_large: str
    #: The new state would be over ``max_state_bytes`` (413).
    storage_limit: str
    #: The write failed or the encoded state did not validate (500).
    write_failed: str


@dataclass(frozen=True, slots=True)
class DocumentNames:
    """How messages name the store's contents: ``noun`` in "groups would need N bytes",
    ``empty`` in "starting without groups"."""

    noun: str
    empty: str


def check_limit(name: str, value: int, hard_max: int) -> None:
    """``ValueError`` unless ``0 < value <= hard_max`` (a store option out of range)."""
    if not 0 < value <= hard_max:
        raise ValueError(f"{name} must be between 1 and {hard_max}")


def unique_id(
    factory: Callable[[], str], valid: Callable[[str], bool], taken: Callable[[str], bool]
) -> str:
    """A fresh id from ``factory`` that is valid and not taken (a few tries, then a bug)."""
    for _ in range(16):
        candidate = factory()
        if valid(candidate) and not taken(candidate):
            return candidate
    raise RuntimeError("id factory keeps returning used or invalid ids")


class DocumentFile:
    """The file ``path`` of one store (see the module docstring for the rules)."""

    def __init__(
        self,
        path: Path,
        *,
        names: DocumentNames,
        codes: DocumentCodes,
        error: ErrorFactory,
        max_state_bytes: int,
        writer: Writer,
        logger: logging.Logger,
    ) -> None:
        self.path = path
        self.names = names
        self.codes = codes
        self.max_state_bytes = max_state_bytes
        self.writer = writer
        self._error = error
        self._logger = logger

    @property
    def aside(self) -> Path:
        """Where an unreadable file is moved: ``<name>.corrupt`` beside it."""
        return self.path.with_name(self.path.name + ".corrupt")

    def read(self, max_read_bytes: int) -> bytes | None:
        """The file's bytes, ``None`` when it does not exist (blocking)."""
        remove_stale_temps(self.path)
        try:
            return read_limited(self.path, max_read_bytes)
        except FileTooLarge as exc:
            raise self._error(
                500,
                self.codes.file_too_large,
                f"{self.path.name} is {exc.size} bytes; files over {max_read_bytes} bytes are "
                f"never parsed. Move it aside to start without {self.names.empty}.",
            ) from None

    def set_aside(self, reason: object) -> None:
        """Move an unreadable file to :attr:`aside`, saying why (blocking)."""
        self._logger.error(
            "%s is unreadable (%s); moved to %s, starting without %s",
            self.path.name,
            reason,
            self.aside.name,
            self.names.empty,
        )
        self.path.replace(self.aside)

    async def write(
        self, encode: Callable[[], bytes], previous_size: int, validate: Callable[[bytes], None]
    ) -> int:
        """Encode, bound-check, validate and write the new state off the loop; its size.

        ``validate`` raises when the decoded bytes are not a valid state (only a bug can make
        it fail); an ``OSError`` from it or from the disk becomes the ``write_failed`` error.
        """
        try:
            return await asyncio.to_thread(self._write_checked, encode, previous_size, validate)
        except OSError as exc:
            self._logger.error("writing %s failed: %s", self.path.name, exc)
            raise self._error(
                500, self.codes.write_failed, f"could not write {self.path.name}; nothing changed"
            ) from None

    def _write_checked(
        self, encode: Callable[[], bytes], previous_size: int, validate: Callable[[bytes], None]
    ) -> int:
        data = encode()
        size = len(data)
        if size > self.max_state_bytes and size >= previous_size:
            raise self._error(
                413,
                self.codes.storage_limit,
                f"{self.names.noun} would need {size} bytes; at most {self.max_state_bytes} "
                "allowed",
            )
        validate(data)
        self.writer(self.path, data)
        return size


class DocumentStore:
    """Base of a store kept in one :class:`DocumentFile` (set ``_file`` in ``__init__``)."""

    _file: DocumentFile

    @property
    def writer(self) -> Writer:
        """Blocking ``(path, bytes)`` writer; a seam so tests can make the disk fail."""
        return self._file.writer

    @writer.setter
    def writer(self, value: Writer) -> None:
        self._file.writer = value


__all__ = [
    "DocumentCodes",
    "DocumentFile",
    "DocumentNames",
    "DocumentStore",
    "ErrorFactory",
    "Writer",
    "check_limit",
    "unique_id",
]
