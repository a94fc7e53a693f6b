"""Why a turn stops early: raised inside the turn loop, mapped to ``turn/end``."""

from __future__ import annotations


class TurnFailed(Exception):
    """The turn's request failed for good; ``code``/``message`` go into ``turn/end``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class TurnInterrupted(Exception):
    """``cancel`` interrupted the turn (its stream, a tool call, or between steps)."""
