"""Preset parameter admission: the preflight of the preset's call config against the provider.

`docs/contract/loader.md#parameter-admission`: preset sampling stays stored
as authored; at request time only the overrides the configured provider profile supports are
merged into the call config. An unsupported one — a parameter the profile does not send, or a
``reasoningEffort`` value it does not take — is omitted so the provider uses its own default; no
alternative value is guessed. Each omission is recorded with its requested and effective value.
The fallback after an explicit rejection (``request/error``) then works on the admitted
overrides only, unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from innkeeper_hostapi.providers import ParamName, Provider

__all__ = ["Admission", "admit"]


@dataclass(frozen=True, slots=True)
class Admission:
    """The preflight's verdict on one proposed call config."""

    provider: str | None
    #: The preset's proposed overrides (spec name → value as it would be sent).
    requested: Mapping[str, Any]
    #: What is merged: the admitted overrides (omitted ones are absent).
    admitted: Mapping[str, Any]
    #: Omitted overrides, in proposal order.
    omitted: tuple[str, ...]

    def wire(self) -> dict[str, Any]:
        """The audit's ``parameters.admission``: ``effective`` has ``null`` for an omission."""
        return {
            "provider": self.provider,
            "requested": dict(self.requested),
            "effective": {k: self.admitted.get(k) for k in self.requested},
            "omitted": list(self.omitted),
        }


def admit(proposed: Mapping[str, Any], provider: Provider | None) -> Admission:
    """Admit each proposed override the provider sends (everything when there is none)."""
    if provider is None:
        return Admission(None, dict(proposed), dict(proposed), ())
    admitted: dict[str, Any] = {}
    omitted: list[str] = []
    for name, value in proposed.items():
        if provider.accepts(cast(ParamName, name), value):
            admitted[name] = value
        else:
            omitted.append(name)
    return Admission(provider.name, dict(proposed), admitted, tuple(omitted))
