"""One small JSON state file (relations, library state) kept in memory and replaced atomically.

The state is an immutable-by-convention msgspec Struct: a mutation builds a new value, validates
and encodes it (checking the byte limit), writes it atomically and only then swaps the in-memory
reference, so a failed write leaves memory and disk as they were.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Final, Generic, TypeVar

import msgspec

from .atomic import atomic_write, read_bounded
from .errors import DOCUMENT_TOO_LARGE, STORAGE_WRITE_FAILED, ResourceError

S = TypeVar("S", bound=msgspec.Struct)

_encoder: Final = msgspec.json.Encoder()


class StateFile(Generic[S]):
    """``path`` holding one ``state_type`` value of at most ``max_bytes``."""

    def __init__(
        self,
        path: Path,
        state_type: type[S],
        *,
        max_bytes: int,
        logger: logging.Logger,
    ) -> None:
        self.path = path
        self.lock = asyncio.Lock()
        self._type = state_type
        self._max_bytes = max_bytes
        self._logger = logger
        self._decoder = msgspec.json.Decoder(state_type)
        self._state: S = state_type()
        self._opened = False
        #: Incremented whenever the published state changes.
        self.revision = 0

    @property
    def state(self) -> S:
        """The current (published) state. Treat it as read-only."""
        return self._state

    async def open(self) -> None:
        """Load the file (an absent file is the default state)."""
        if self._opened:
            return
        async with self.lock:
            if not self._opened:
                self._state = await asyncio.to_thread(self._load)
                self.revision += 1
                self._opened = True

    def _load(self) -> S:
        data = read_bounded(self.path, self._max_bytes)
        if data is None:
            return self._type()
        try:
            return self._decoder.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            # Refuse to silently reset user data: move the bad file aside and start empty.
            aside = self.path.with_name(self.path.name + ".corrupt")
            self._logger.error("%s is unreadable (%s); moved to %s", self.path.name, exc, aside)
            self.path.replace(aside)
            return self._type()

    def encode(self, state: S) -> bytes:
        """Encode ``state``, checking the byte limit and that it decodes back."""
        data = _encoder.encode(state)
        if len(data) > self._max_bytes:
            raise ResourceError(
                413,
                DOCUMENT_TOO_LARGE,
                f"{self.path.name} would be {len(data)} bytes; at most {self._max_bytes} allowed",
            )
        self._decoder.decode(data)
        return data

    async def save_locked(self, state: S) -> None:
        """Write ``state`` and publish it (caller holds :attr:`lock`)."""
        data = self.encode(state)
        try:
            await asyncio.to_thread(atomic_write, self.path, data)
        except OSError as exc:
            self._logger.error("writing %s failed: %s", self.path.name, exc)
            raise ResourceError(
                500, STORAGE_WRITE_FAILED, f"could not write {self.path.name}; nothing changed"
            ) from None
        self._state = state
        self.revision += 1
