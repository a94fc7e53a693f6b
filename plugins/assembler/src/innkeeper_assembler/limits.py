"""Every limit of the Assembler, named, with the spec section it comes from.

`docs/contract/world-info.md#profile-budget`: applied strategies enforce a logical profile
budget (``Strategy.max_profile_bytes``, default 512 KiB, hard 2 MiB) and, separately, the fixed
2 MiB physical ceiling of the complete system snapshot. The store limits are this host's own
(the detailed Assembler documents are not available); they follow the Tavern stores' style.
"""

from __future__ import annotations

from typing import Final

from innkeeper_hostapi.assembly import (
    DEFAULT_MAX_PROFILE_BYTES,
    HARD_MAX_PROFILE_BYTES,
    SYSTEM_SNAPSHOT_MAX_BYTES,
)

__all__ = [
    "APPLIED_FILE_MAX_BYTES",
    "DEFAULT_MAX_PROFILE_BYTES",
    "HARD_MAX_PROFILE_BYTES",
    "MAX_ANCESTORS",
    "MAX_APPLIED_SESSIONS",
    "MAX_MODULES",
    "MAX_RECORDED_ITEMS",
    "MAX_STRATEGIES",
    "PLAN_CACHE_SIZE",
    "STRATEGY_BODY_MAX_BYTES",
    "STRATEGY_FILE_MAX_BYTES",
    "SYSTEM_SNAPSHOT_MAX_BYTES",
]

#: Stored strategies (a full store rejects new ones, never evicts).
MAX_STRATEGIES: Final = 200
#: Modules per strategy (a 300-prompt preset is one Tavern source, not 300 modules).
MAX_MODULES: Final = 256
#: Sessions with an applied snapshot (same hard cap as the session-selection store).
MAX_APPLIED_SESSIONS: Final = 4096
#: Files over these sizes are never parsed (the plugin fails to start with the reason).
STRATEGY_FILE_MAX_BYTES: Final = 8 * 1024 * 1024
APPLIED_FILE_MAX_BYTES: Final = 32 * 1024 * 1024
#: One strategy body on the HTTP API.
STRATEGY_BODY_MAX_BYTES: Final = 256 * 1024
#: Plans kept between a step's system section and its projection (dropped at turn end).
PLAN_CACHE_SIZE: Final = 256
#: Items per list in one ``dsh-assembler:placement`` record (the rest is counted, not listed).
MAX_RECORDED_ITEMS: Final = 512
#: Ancestors walked to find the snapshot a fork inherits.
MAX_ANCESTORS: Final = 64
