"""One small settings document in one atomic file (``ui-settings.json`` and friends).

docs/contract/conventions.md#atomic-writes: the document is validated before it is published; the
file is written atomically (temp file, fsync, rename) before memory changes, so a rejected or failed
write leaves both the file and the served document unchanged. DELETE removes the file (the defaults
are never written). A file that cannot be read at start is logged by code and the defaults serve.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from innkeeper_tavern.state.resources.atomic import atomic_write, read_bounded, remove_file
from innkeeper_tavern.state.resources.errors import ResourceError

__all__ = ["SettingsInvalid", "SettingsStore"]

#: Validates a candidate document and returns its normalized form (raises :class:`SettingsInvalid`).
Validator = Callable[[Any], dict[str, Any]]


class SettingsInvalid(Exception):
    """A settings document broke a rule; ``code`` is the stable error code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class SettingsStore:
    """The current document of one settings file (defaults until saved)."""

    def __init__(
        self,
        path: Path,
        *,
        defaults: Callable[[], dict[str, Any]],
        validate: Validator,
        max_bytes: int,
        logger: logging.Logger,
    ) -> None:
        self.path = path
        self._defaults = defaults
        self._validate = validate
        self._max_bytes = max_bytes
        self._log = logger
        self._doc = defaults()
        self.custom = False

    async def open(self) -> None:
        """Load the saved file; a missing one means the defaults, an invalid one is logged."""
        try:
            data = await asyncio.to_thread(read_bounded, self.path, self._max_bytes)
        except ResourceError as exc:
            self._log.error("%s unreadable (%s); using the defaults", self.path.name, exc.code)
            return
        if not data:
            return
        try:
            self._doc = self._validate(json.loads(data))
            self.custom = True
        except (ValueError, SettingsInvalid) as exc:
            code = exc.code if isinstance(exc, SettingsInvalid) else "INVALID_JSON"
            self._log.error("%s invalid (%s); using the defaults", self.path.name, code)

    @property
    def document(self) -> dict[str, Any]:
        """A copy of the current document."""
        return json.loads(json.dumps(self._doc))  # type: ignore[no-any-return]

    async def replace(self, candidate: Any) -> dict[str, Any]:
        """Validate ``candidate``, write it atomically, then serve it (full replace)."""
        doc = self._validate(candidate)
        data = (json.dumps(doc, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
        if len(data) > self._max_bytes:
            raise SettingsInvalid(
                "SETTINGS_TOO_LARGE", f"{self.path.name} would be over {self._max_bytes} bytes"
            )
        await asyncio.to_thread(atomic_write, self.path, data)
        self._doc = doc
        self.custom = True
        return self.document

    async def reset(self) -> dict[str, Any]:
        """Back to the defaults (the file is removed)."""
        await asyncio.to_thread(remove_file, self.path)
        self._doc = self._defaults()
        self.custom = False
        return self.document
