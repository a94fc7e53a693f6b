"""The activation input: an explicit, read-only, bounded view of what lore may be matched against.

`docs/contract/loader.md#activation-input`: the latest 128 messages / 64 KiB characters
by default, hard caps 1,024 messages / 1 MiB. `docs/worldbook.md#wi-scan-buffer`: messages are
scanned newest first, system messages excluded, each ``"Name: text"`` when include-names is on,
trimmed, and joined as ``"\\x01" + "\\n\\x01".join(...)``.
"""

from __future__ import annotations

from typing import Final, Literal

import msgspec

__all__ = [
    "DEFAULT_SCAN_CHARS",
    "DEFAULT_SCAN_MESSAGES",
    "HARD_SCAN_CHARS",
    "HARD_SCAN_MESSAGES",
    "SCAN_JOINER",
    "SCAN_PREFIX",
    "ActivationContext",
    "ActivationMessage",
    "ActivationSources",
    "ScanInput",
    "ScanLimits",
    "build_scan_input",
]

#: Default latest messages scanned (`docs/contract/loader.md#activation-input`).
DEFAULT_SCAN_MESSAGES: Final = 128
#: Same: default characters scanned (64 KiB).
DEFAULT_SCAN_CHARS: Final = 64 * 1024
#: Same: hard cap of messages.
HARD_SCAN_MESSAGES: Final = 1_024
#: Same: hard cap of characters (1 MiB).
HARD_SCAN_CHARS: Final = 1024 * 1024
#: ST's per-message prefix inside the scan buffer (lets regex keys anchor per message,
#: docs/worldbook.md#wi-scan-buffer).
SCAN_PREFIX: Final = "\x01"
#: ST's joiner between messages and between buffer parts (docs/worldbook.md#wi-scan-buffer).
SCAN_JOINER: Final = "\n\x01"


class ActivationMessage(msgspec.Struct, frozen=True, kw_only=True):
    """One chat message as the matcher sees it (chronological order in the context)."""

    id: str
    role: Literal["user", "assistant", "system"]
    text: str
    name: str = ""


class ActivationSources(msgspec.Struct, frozen=True, kw_only=True):
    """Opt-in global sources an entry may also scan (its ``match*`` flags).

    docs/worldbook.md#wi-scan-buffer.
    """

    persona_description: str = ""
    character_description: str = ""
    character_personality: str = ""
    character_depth_prompt: str = ""
    scenario: str = ""
    creator_notes: str = ""


class ActivationContext(msgspec.Struct, frozen=True, kw_only=True):
    """The read-only context the loader hands to activation.

    ``messages`` are chronological (oldest first), as the session stores them. ``inject`` holds
    extension prompts that ST scans (Author's Note / depth prompt with "allow scan", quiet prompt).
    ``chat_length`` is the timed-effects clock (ST: number of non-system chat messages); when
    ``None`` it is the number of non-system ``messages``.
    """

    messages: tuple[ActivationMessage, ...] = ()
    sources: ActivationSources = ActivationSources()
    inject: tuple[str, ...] = ()
    chat_length: int | None = None


class ScanLimits(msgspec.Struct, frozen=True, kw_only=True):
    """Configurable scan bounds; :meth:`clamped` enforces the hard caps."""

    max_messages: int = DEFAULT_SCAN_MESSAGES
    max_chars: int = DEFAULT_SCAN_CHARS

    def clamped(self) -> ScanLimits:
        """The same limits inside ``[0, hard cap]``."""
        return ScanLimits(
            max_messages=max(0, min(self.max_messages, HARD_SCAN_MESSAGES)),
            max_chars=max(0, min(self.max_chars, HARD_SCAN_CHARS)),
        )


class ScanInput(msgspec.Struct, frozen=True, kw_only=True):
    """The bounded scan material: formatted messages newest first plus the extra sources."""

    messages: tuple[str, ...]
    sources: ActivationSources
    inject: tuple[str, ...]
    chat_length: int
    total_messages: int
    truncated: bool
    scanned_chars: int


def build_scan_input(
    context: ActivationContext,
    *,
    include_names: bool = True,
    limits: ScanLimits | None = None,
) -> ScanInput:
    """Format and bound ``context`` the way ST builds its scan chat.

    Newest messages are kept first; the character budget counts message text plus one separator
    per message; the oldest kept message is cut at the end of the budget (its beginning is kept).
    """
    bounded = (limits or ScanLimits()).clamped()
    chat = [m for m in context.messages if m.role != "system"]
    chat_length = context.chat_length if context.chat_length is not None else len(chat)
    formatted: list[str] = []
    used = 0
    truncated = False
    seen: set[str] = set()
    for message in reversed(chat):
        # Messages are de-duplicated by stable id, newest kept
        # (docs/contract/loader.md#activation-input).
        if message.id in seen:
            continue
        seen.add(message.id)
        if len(formatted) >= bounded.max_messages:
            truncated = True
            break
        text = f"{message.name}: {message.text}" if include_names and message.name else message.text
        text = text.strip()
        room = bounded.max_chars - used
        if room <= 0:
            truncated = True
            break
        if len(text) > room:
            text = text[:room]
            truncated = True
        formatted.append(text)
        used += len(text) + len(SCAN_JOINER)
        if truncated:
            break
    return ScanInput(
        messages=tuple(formatted),
        sources=context.sources,
        inject=tuple(t for t in context.inject if t),
        chat_length=chat_length,
        total_messages=len(chat),
        truncated=truncated,
        scanned_chars=sum(len(t) for t in formatted),
    )
