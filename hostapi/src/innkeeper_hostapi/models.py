"""msgspec base structs for wire and disk models."""

from __future__ import annotations

import msgspec


class Model(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    """Base of public structs: immutable, keyword-only, unknown fields rejected.

    Subclass with ``rename="camel"`` where the wire format is camelCase.
    """


class HostInfo(Model, frozen=True):
    """Immutable facts about the running host, passed to ``innkeeper_host_started``."""

    version: str
    base_url: str
    data_dir: str
    reload: bool
