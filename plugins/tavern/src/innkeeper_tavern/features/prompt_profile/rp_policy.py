"""``rp-policy.json``: the optional ``rp:policy`` section text (order 45).

`docs/contract/loader.md#rp-overlay`: RP is a session overlay on the selection; the optional
policy text lives in ``rp-policy.json`` and the default only says high-risk operations are locked.
`docs/prompt-assembly.md#rp-policy-text`: at most 16 KiB; an empty text means no section.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Final

import msgspec

from innkeeper_tavern.state.resources.atomic import atomic_write, read_bounded, remove_file
from innkeeper_tavern.state.resources.errors import ResourceError

from .limits import RP_POLICY_MAX_BYTES

__all__ = ["DEFAULT_RP_POLICY", "RP_POLICY_FILE", "RpPolicyStore"]

RP_POLICY_FILE: Final = "rp-policy.json"
DEFAULT_RP_POLICY: Final = (
    "Roleplay mode is on for this session: high-risk operations (writing or editing files, "
    "running commands or code, fetching from the network) are locked."
)


class _Policy(msgspec.Struct, kw_only=True, rename="camel"):
    schema_version: int = 1
    text: str = DEFAULT_RP_POLICY


_decoder: Final = msgspec.json.Decoder(_Policy)


class RpPolicyStore:
    """The policy text, default until saved."""

    def __init__(self, root: Path, *, logger: logging.Logger | None = None) -> None:
        self.path = root / RP_POLICY_FILE
        self._log = logger or logging.getLogger("innkeeper.plugin.tavern.loader")
        self._policy = _Policy()
        self.custom = False

    async def open(self) -> None:
        """Load the file (a missing or unreadable file means the default)."""
        try:
            data = await asyncio.to_thread(read_bounded, self.path, RP_POLICY_MAX_BYTES + 1024)
            if data:
                self._policy = _decoder.decode(data)
                self.custom = True
        except (ResourceError, msgspec.DecodeError, msgspec.ValidationError) as exc:
            self._log.error("rp-policy.json unreadable (%s); using the default", type(exc).__name__)

    @property
    def text(self) -> str:
        """The current policy text (``""`` = no section)."""
        return self._policy.text

    async def save(self, text: str) -> None:
        """Replace the text (the caller checked the size)."""
        policy = _Policy(text=text)
        await asyncio.to_thread(atomic_write, self.path, msgspec.json.encode(policy))
        self._policy = policy
        self.custom = True

    async def reset(self) -> None:
        """Back to the default."""
        await asyncio.to_thread(remove_file, self.path)
        self._policy = _Policy()
        self.custom = False
