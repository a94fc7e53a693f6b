"""The bounded activation input.

`docs/contract/loader.md#activation-input`, docs/worldbook.md#wi-scan-buffer.
"""

from __future__ import annotations

from innkeeper_tavern.pure.worldbook import (
    ActivationContext,
    ActivationMessage,
    ScanLimits,
    build_scan_input,
)
from innkeeper_tavern.pure.worldbook.scan import HARD_SCAN_CHARS, HARD_SCAN_MESSAGES


def msg(i: int, text: str, role: str = "user", name: str = "") -> ActivationMessage:
    return ActivationMessage(id=str(i), role=role, text=text, name=name)  # type: ignore[arg-type]


def test_newest_first_names_trim_and_system_excluded() -> None:
    context = ActivationContext(
        messages=(
            msg(1, "  hello ", name="Bob"),
            msg(2, "rules", role="system"),
            msg(3, "hi there", role="assistant", name="Sera"),
        )
    )
    scan = build_scan_input(context, include_names=True)
    assert scan.messages == ("Sera: hi there", "Bob:   hello")  # prefixed, then trimmed
    assert scan.chat_length == 2
    assert build_scan_input(context, include_names=False).messages == ("hi there", "hello")


def test_default_and_hard_bounds() -> None:
    many = ActivationContext(messages=tuple(msg(i, "x" * 10) for i in range(2_000)))
    scan = build_scan_input(many)
    assert len(scan.messages) == 128
    assert scan.truncated
    assert scan.total_messages == 2_000
    assert scan.chat_length == 2_000  # the timed-effects clock counts the whole chat
    loose = build_scan_input(many, limits=ScanLimits(max_messages=10**6, max_chars=10**9))
    assert len(loose.messages) == HARD_SCAN_MESSAGES
    big = ActivationContext(messages=(msg(1, "a" * (2 * HARD_SCAN_CHARS)), msg(2, "tail")))
    bounded = build_scan_input(big, limits=ScanLimits(max_chars=10**9))
    assert bounded.messages[0] == "tail"
    assert bounded.scanned_chars <= HARD_SCAN_CHARS
    assert bounded.truncated


def test_default_character_budget_and_dedupe() -> None:
    context = ActivationContext(
        messages=(msg(1, "b" * 70_000), msg(2, "old"), msg(2, "new copy"), msg(3, "c" * 10))
    )
    scan = build_scan_input(context)
    assert scan.messages[:2] == ("c" * 10, "new copy")
    assert scan.scanned_chars <= 64 * 1024
    assert scan.truncated
