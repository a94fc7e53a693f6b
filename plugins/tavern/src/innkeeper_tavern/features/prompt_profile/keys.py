"""The profile loader's service keys and its ``rp:policy`` section: named here, below the
face tier that registers them, so the prompt sources and opening drafts can resolve the loader
without importing its host wiring (:mod:`innkeeper_tavern.face.routes.prompt_profile`)."""

from __future__ import annotations

from typing import Final

from innkeeper_hostapi import ServiceKey

from .audit import AssemblyAuditLog
from .profile import TavernProfileLoader

__all__ = ["ASSEMBLY_AUDIT", "PROFILE_LOADER", "RP_POLICY_ORDER", "RP_POLICY_SECTION"]

#: `docs/contract/loader.md#ownership`: ``rp:policy`` stays at order 45.
RP_POLICY_SECTION: Final = "rp:policy"
RP_POLICY_ORDER: Final = 45

PROFILE_LOADER: ServiceKey[TavernProfileLoader] = ServiceKey(
    "tavern.profile_loader", TavernProfileLoader
)
ASSEMBLY_AUDIT: ServiceKey[AssemblyAuditLog] = ServiceKey("tavern.assembly_audit", AssemblyAuditLog)
