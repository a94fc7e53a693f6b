"""The group store (``groups.json``); the model is :mod:`innkeeper_tavern.pure.groups.model`."""

from __future__ import annotations

from innkeeper_hostapi import ServiceKey

from .store import GroupStore

#: The group store, for other Tavern parts (resolve at call time).
TAVERN_GROUPS: ServiceKey[GroupStore] = ServiceKey("tavern.groups", GroupStore)

__all__ = ["TAVERN_GROUPS", "GroupStore"]
