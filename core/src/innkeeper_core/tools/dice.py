"""The built-in dice roller: tool ``roll`` and command ``/roll``, in SillyTavern's notation.

SillyTavern rolls with droll (``{{roll X}}``, ``/roll X``): ``[count]d<sides>[+|-modifier]``,
for example ``d20``, ``2d6+3``, ``4d10-1``; digits alone mean one die with that many sides
(``20`` is ``1d20``). Off unless ``[tools] dice = true``: a tool that is always on would change
every request's ``tools``.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from innkeeper_hostapi.slash import CommandAnswer, CommandInvocation
from innkeeper_hostapi.tools import ToolError, ToolInvocation

__all__ = ["DICE_SCHEMA", "DiceRoll", "DiceRoller", "parse_dice"]

#: Bounds of one roll (droll has none; these keep a model's request small).
MAX_DICE: Final = 100
MAX_SIDES: Final = 1_000_000
MAX_MODIFIER: Final = 1_000_000

_NOTATION: Final = re.compile(r"^(?:(\d+)?d(\d+)([+-]\d+)?|(\d+))$", re.IGNORECASE)

DICE_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "dice": {
            "type": "string",
            "description": "SillyTavern dice notation: [count]d<sides>[+|-modifier], e.g. 2d6+3",
            "maxLength": 32,
        }
    },
    "required": ["dice"],
    "additionalProperties": False,
}
DICE_DESCRIPTION: Final = (
    "Roll dice for the story. Notation: [count]d<sides>[+|-modifier] (d20, 2d6+3, 4d10-1); "
    "a bare number N rolls one N-sided die. Returns each die and the total."
)


@dataclass(frozen=True, slots=True)
class DiceRoll:
    """A parsed roll."""

    count: int
    sides: int
    modifier: int

    @property
    def notation(self) -> str:
        mod = f"{self.modifier:+d}" if self.modifier else ""
        return f"{self.count}d{self.sides}{mod}"


def parse_dice(text: str) -> DiceRoll:
    """Parse ST notation; raises ``ValueError`` with a short reason."""
    match = _NOTATION.match(text.strip().replace(" ", ""))
    if match is None:
        raise ValueError(f"{text!r} is not dice notation ([count]d<sides>[+|-modifier])")
    if match.group(4) is not None:
        count, sides, modifier = 1, int(match.group(4)), 0
    else:
        count = int(match.group(1)) if match.group(1) else 1
        sides, modifier = int(match.group(2)), int(match.group(3) or 0)
    if not 1 <= count <= MAX_DICE:
        raise ValueError(f"roll between 1 and {MAX_DICE} dice")
    if not 1 <= sides <= MAX_SIDES:
        raise ValueError(f"dice have between 1 and {MAX_SIDES} sides")
    if abs(modifier) > MAX_MODIFIER:
        raise ValueError(f"the modifier is at most {MAX_MODIFIER}")
    return DiceRoll(count, sides, modifier)


class DiceRoller:
    """Rolls with an injected random source (``random.SystemRandom()`` by default)."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self._randint: Callable[[int, int], int] = (rng or random.SystemRandom()).randint

    def roll(self, roll: DiceRoll) -> dict[str, Any]:
        rolls = [self._randint(1, roll.sides) for _ in range(roll.count)]
        return {
            "dice": roll.notation,
            "rolls": rolls,
            "modifier": roll.modifier,
            "total": sum(rolls) + roll.modifier,
        }

    async def tool(self, call: ToolInvocation) -> dict[str, Any]:
        try:
            return self.roll(parse_dice(str(call.arguments["dice"])))
        except ValueError as exc:
            raise ToolError(str(exc)) from None

    async def command(self, invocation: CommandInvocation) -> CommandAnswer:
        try:
            result = self.roll(parse_dice(invocation.args or "1d6"))
        except ValueError as exc:
            return CommandAnswer("roll", "error", str(exc))
        shown = ", ".join(str(r) for r in result["rolls"])
        return CommandAnswer("roll", "success", f"{result['dice']}: [{shown}] = {result['total']}")
