"""The Tavern's HTTP namespace: the path prefixes its routes register under and its own clients
(the commands' online backend, the SillyTavern migration) call. Defined once, here, at the
bottom of the tiers so every tier can name them."""

from __future__ import annotations

from typing import Final

__all__ = ["V1_PREFIX", "V2_PREFIX"]

#: The bundled UI contract's resource routes (docs/http.md).
V1_PREFIX: Final = "/pmp-dsh-tavern/api/v1"
#: The Tavern-owned play workspace routes (docs/play.md).
V2_PREFIX: Final = "/pmp-dsh-tavern/api/v2"
