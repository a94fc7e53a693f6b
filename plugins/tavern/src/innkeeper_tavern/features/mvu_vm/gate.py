"""The operation gate: what the player's own message allows a turn's commands to do.

docs/contract/mvu-vm.md#operation-gate: the gate reads only the user text of the same durable
turn, and only when it is at most 64 Ki UTF-16 code units (longer text gives no gate, it is never
cut down to one); a block is at most 30,000 code units and holds an execution boundary and at least
one operation item; the gate only narrows commands.

Block syntax (docs/mvu.md "The operation gate")::

    <MvuOperation>
    any note for the model (ignored by the gate)
    @execute
    - set 角色.好感度
    - delete 物品栏.旧剑
    </MvuOperation>

The tag is case-insensitive. ``@execute`` on a line of its own is the execution boundary; each
``- <command> <path>`` line after it is an operation item (``command`` one of MVU's command
names, ``path`` the rest of the line, trimmed). A block without a boundary or without an item,
or longer than 30,000 code units (tags included), is not a gate. The processor reads the gate
with ``Mvu.getOperationGate()`` — ``null`` or ``{blocks: [{items: [{type, path}]}]}`` — and may
only narrow the commands with it (its output is still checked as a filter).
"""

from __future__ import annotations

import re
from typing import Any, Final

from .vm import utf16_units

#: User text the gate reads, in UTF-16 code units.
MAX_GATE_TEXT_UNITS: Final = 64 * 1024
#: One operation block, tags included, in UTF-16 code units.
MAX_BLOCK_UNITS: Final = 30_000
#: Command names an item may use (MVU's commands and aliases, docs/mvu.md "Commands").
ITEM_COMMANDS: Final = frozenset(
    {"set", "add", "insert", "assign", "remove", "unset", "delete", "move"}
)

_BLOCK: Final = re.compile(r"<MvuOperation>(.*?)</MvuOperation>", re.IGNORECASE | re.DOTALL)
_BOUNDARY: Final = "@execute"
_ITEM: Final = re.compile(r"^-\s+(\w+)\s+(\S.*?)\s*$")


def _block_items(body: str) -> list[dict[str, str]] | None:
    lines = [line.strip() for line in body.splitlines()]
    if _BOUNDARY not in lines:
        return None
    items: list[dict[str, str]] = []
    for line in lines[lines.index(_BOUNDARY) + 1 :]:
        match = _ITEM.match(line)
        if match is not None and match.group(1).lower() in ITEM_COMMANDS:
            items.append({"type": match.group(1).lower(), "path": match.group(2)})
    return items or None


def operation_gate(user_text: str | None) -> dict[str, Any] | None:
    """The gate of a turn's user text: ``None`` when there is none (or the text is oversized)."""
    if not user_text or utf16_units(user_text) > MAX_GATE_TEXT_UNITS:
        return None
    blocks = []
    for match in _BLOCK.finditer(user_text):
        if utf16_units(match.group(0)) > MAX_BLOCK_UNITS:
            continue
        items = _block_items(match.group(1))
        if items is not None:
            blocks.append({"items": items})
    return {"blocks": blocks} if blocks else None
