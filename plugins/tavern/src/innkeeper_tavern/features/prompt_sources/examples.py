"""A card's example dialogue as SillyTavern's Chat Completion sends it (``docs/assembler.md``
"The default RP strategy").

The text is split into blocks at each ``<START>`` (a block is assumed at the top when the text
does not begin with one). Each block becomes the preset's ``new_example_chat_prompt`` (a system
message, ``[Example Chat]`` by default) followed by the block's turns, each a **system** message
named ``example_user`` or ``example_assistant``: a line starting with ``<user>:`` begins a user
turn, one starting with ``<char>:`` a character turn; following lines belong to the turn; the
speaker's ``Name:`` prefix is removed once and the turn trimmed. Lines before the first speaker
join the first turn. The block's first line (the ``<START>`` heading) is never sent.

Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal

__all__ = ["EXAMPLE_ASSISTANT", "EXAMPLE_USER", "ExampleTurn", "example_blocks", "parse_block"]

EXAMPLE_USER: Final = "example_user"
EXAMPLE_ASSISTANT: Final = "example_assistant"
_START: Final = re.compile(r"<START>", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class ExampleTurn:
    """One turn of an example block."""

    name: Literal["example_user", "example_assistant"]
    text: str


def example_blocks(text: str) -> list[str]:
    """The ``<START>`` blocks of an example dialogue (each with its heading line)."""
    text = text.strip()
    if not text or text == "<START>":
        return []
    if not text.startswith("<START>"):
        text = "<START>\n" + text
    return [f"<START>\n{block.strip()}\n" for block in _START.split(text)[1:]]


def parse_block(block: str, user: str, char: str) -> list[ExampleTurn]:
    """The turns of one block, ``user`` and ``char`` being the speakers' display names."""
    lines = block.replace("\r", "").split("\n")[1:]
    turns: list[ExampleTurn] = []
    pending: list[str] = []
    speaker: Literal["user", "char"] | None = None

    def flush(who: Literal["user", "char"]) -> None:
        name = user if who == "user" else char
        body = "\n".join(pending).replace(name + ":", "", 1).strip()
        turns.append(ExampleTurn(EXAMPLE_USER if who == "user" else EXAMPLE_ASSISTANT, body))
        pending.clear()

    for line in lines:
        if line.startswith(user + ":"):
            if speaker == "char":
                flush("char")
            speaker = "user"
        elif line.startswith(char + ":"):
            if speaker == "user":
                flush("user")
            speaker = "char"
        pending.append(line)
    if speaker is not None:
        flush(speaker)
    return turns
