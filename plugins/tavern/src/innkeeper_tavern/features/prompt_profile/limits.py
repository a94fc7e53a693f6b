"""Limits and option names of the profile loader, each citing the rule it comes from."""

from __future__ import annotations

from typing import Final

from innkeeper_tavern.pure.worldbook.model import (
    DEFAULT_MAX_PROFILE_BYTES,
    HARD_MAX_PROFILE_BYTES,
    MAX_LORE_CANDIDATES,
    MAX_RUNTIME_ENTRIES,
)
from innkeeper_tavern.pure.worldbook.scan import (
    DEFAULT_SCAN_CHARS,
    DEFAULT_SCAN_MESSAGES,
    HARD_SCAN_CHARS,
    HARD_SCAN_MESSAGES,
)

__all__ = [
    "AUDIT_MAX_BOOKS",
    "AUDIT_MAX_DECISIONS",
    "AUDIT_MAX_SESSIONS",
    "AUDIT_MAX_STEPS",
    "DEFAULT_MAX_PROFILE_BYTES",
    "DEFAULT_SCAN_CHARS",
    "DEFAULT_SCAN_MESSAGES",
    "HARD_MAX_PROFILE_BYTES",
    "HARD_SCAN_CHARS",
    "HARD_SCAN_MESSAGES",
    "MAX_LORE_CANDIDATES",
    "MAX_PROFILE_BYTES_OPTION",
    "MAX_RUNTIME_ENTRIES",
    "MAX_SCAN_CHARS_OPTION",
    "MAX_SCAN_MESSAGES_OPTION",
    "RP_POLICY_MAX_BYTES",
    "SNAPSHOT_CACHE_SIZE",
    "TIMED_STATE_MAX_BYTES",
    "TIMED_STATE_MAX_SESSIONS",
]

#: ``[plugins.tavern]`` option: the compatibility profile cap in UTF-8 bytes
#: (`docs/contract/world-info.md#profile-budget`: default 512 KiB, hard cap 2 MiB).
MAX_PROFILE_BYTES_OPTION: Final = "max_profile_bytes"
#: ``[plugins.tavern]`` options: activation scan bounds (`docs/contract/loader.md#activation-input`:
#: default 128 messages / 64 KiB characters, hard caps 1,024 / 1 MiB).
MAX_SCAN_MESSAGES_OPTION: Final = "max_scan_messages"
MAX_SCAN_CHARS_OPTION: Final = "max_scan_characters"

#: `docs/contract/audit.md#world-book-audit`: at most 16 books and 128 decisions per record.
AUDIT_MAX_BOOKS: Final = 16
AUDIT_MAX_DECISIONS: Final = 128
#: Assembly audit records kept in memory: the newest turn's records (one per step, at most
#: ``AUDIT_MAX_STEPS``) of at most ``AUDIT_MAX_SESSIONS`` sessions. Earlier turns live in the
#: durable trace store; a record holds up to 128 lore decisions, so a long story must not keep
#: one per turn.
AUDIT_MAX_SESSIONS: Final = 256
AUDIT_MAX_STEPS: Final = 256  # the host's hard cap on ``[tools] max_steps``

#: `docs/prompt-assembly.md#rp-policy-text`: ``rp-policy.json`` holds at most 16 KiB.
RP_POLICY_MAX_BYTES: Final = 16 * 1024

#: Per-session timed-effect state (``loader-timed-effects.json``): sessions kept and file bytes.
#: Matches the selection store's default cap and state budget (2,048 / 4 MiB,
#: `docs/contract/loader.md#binding-limits`).
TIMED_STATE_MAX_SESSIONS: Final = 2_048
TIMED_STATE_MAX_BYTES: Final = 4 * 1024 * 1024

#: Assembled snapshots kept for the request hook and the error listener (one per live request;
#: the oldest is dropped first).
SNAPSHOT_CACHE_SIZE: Final = 64
