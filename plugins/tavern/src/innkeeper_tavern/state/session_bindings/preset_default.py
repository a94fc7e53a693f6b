"""The global default preset: ``state.json`` ``{schemaVersion: 1, selectedId}``.

`docs/contract/loader.md#session-bindings`: the global default preset (``selectedId``) is what a
session that is not bound yet starts from, and ``POST /select`` without a ``sessionId`` sets it.
The file name and shape are the original's (`docs/resources.md#original-data`), so a
data directory written by either reads the same. Writes are atomic and publish only after they
succeed.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Final

import msgspec

from .errors import SESSION_SELECTION_WRITE_FAILED, SelectionStoreError
from .files import FileTooLarge, atomic_write, read_limited
from .model import valid_resource_id

#: `docs/resources.md#original-data`: the preset store's state file.
PRESET_STATE_FILE: Final = "state.json"
#: Its schema version.
PRESET_STATE_SCHEMA: Final = 1
#: The global default persona (user) of a new session: same shape, its own file.
USER_DEFAULT_FILE: Final = "default-user.json"
#: Our bound on it: one id and a version fit in far less.
MAX_PRESET_STATE_BYTES: Final = 64 << 10


class _PresetState(msgspec.Struct, kw_only=True, rename="camel"):
    schema_version: int = PRESET_STATE_SCHEMA
    selected_id: str | None = None


_decoder: Final = msgspec.json.Decoder()
_encoder: Final = msgspec.json.Encoder()


class GlobalPresetSelection:
    """The preset a new session without a parent freezes (``None``: no preset)."""

    def __init__(
        self,
        root: Path,
        *,
        logger: logging.Logger | None = None,
        file_name: str = PRESET_STATE_FILE,
        what: str = "preset",
    ) -> None:
        # The same file shape keeps the global default persona (``file_name`` and ``what``
        # name it): ``{schemaVersion: 1, selectedId}``.
        self.path = root / file_name
        self.what = what
        self.lock = asyncio.Lock()
        self._logger = logger or logging.getLogger("innkeeper.plugin.tavern.selection")
        self._selected: str | None = None

    @property
    def selected_id(self) -> str | None:
        """The current global default preset id."""
        return self._selected

    async def open(self) -> None:
        """Load ``state.json``; an unreadable one is logged and treated as "no default"."""
        async with self.lock:
            self._selected = await asyncio.to_thread(self._load)

    def _load(self) -> str | None:
        try:
            data = read_limited(self.path, MAX_PRESET_STATE_BYTES)
            raw = _decoder.decode(data) if data is not None else {}
        except (FileTooLarge, msgspec.DecodeError) as exc:
            self._logger.error(
                "%s is unreadable (%s); no global default %s", self.path.name, exc, self.what
            )
            return None
        value = raw.get("selectedId") if isinstance(raw, dict) else None
        return value if valid_resource_id(value) else None

    async def select(self, preset_id: str | None) -> None:
        """Set (or clear with ``None``) the global default; atomic, published after the write."""
        if preset_id is not None and not valid_resource_id(preset_id):
            raise ValueError(f"invalid {self.what} id")
        async with self.lock:
            await self._write(preset_id)

    async def clear(self, preset_id: str) -> bool:
        """Clear the default if it is ``preset_id`` (the preset was deleted)."""
        async with self.lock:
            if self._selected != preset_id:
                return False
            await self._write(None)
        return True

    async def _write(self, preset_id: str | None) -> None:
        data = _encoder.encode(_PresetState(selected_id=preset_id))
        try:
            await asyncio.to_thread(atomic_write, self.path, msgspec.json.format(data) + b"\n")
        except OSError as exc:
            self._logger.error("writing %s failed: %s", self.path.name, exc)
            raise SelectionStoreError(
                500, SESSION_SELECTION_WRITE_FAILED, f"could not write {self.path.name}"
            ) from None
        self._selected = preset_id
