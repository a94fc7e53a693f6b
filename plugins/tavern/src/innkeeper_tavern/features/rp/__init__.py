"""RP secure mode: the controller (:mod:`.controller`), its durable state (:mod:`.durable`)
and the tool guard's rules (:mod:`.guard`). The routes, listeners and the ``/rp`` command are
registered by :mod:`innkeeper_tavern.face.routes.rp`."""

from .controller import RpAlert, RpController, RpOutcome
from .guard import BLOCKED_TOOL_NAMES, RP_BLOCK_CANCEL_REASON, blocked_reason

__all__ = [
    "BLOCKED_TOOL_NAMES",
    "RP_BLOCK_CANCEL_REASON",
    "RpAlert",
    "RpController",
    "RpOutcome",
    "blocked_reason",
]
