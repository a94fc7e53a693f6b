"""The sampler field table: every sampling parameter a request may carry, declared once.

:class:`SamplerFields` is the table: one row per parameter, its attribute name, its type and
its default (``None``: not sent, the provider's default); its camelCase wire name comes from
the struct's ``rename="camel"``. The three types that carry these parameters derive from it
and add only what is theirs:

* ``innkeeper_hostapi.agents.CallConfigDraft``, the mutable call config request hooks edit
  (plus ``model``, ``extras``, ``tools``, ``tool_choice``);
* ``innkeeper_hostapi.providers.CallParams``, the frozen parameters of a provider request
  (plus ``extras`` and the fallback helpers);
* ``innkeeper_hostapi.sessions.CallParamsRecord``, the frozen record of one attempt in a
  ``request/header`` event (nothing more).

They stay real classes, so ``mypy --strict`` checks every attribute; a field added here appears
in all three. :data:`ParamName` spells the wire names once more as a ``Literal`` (a type cannot
be computed); this module refuses to import if the two disagree.

This module imports only the standard library and msgspec.
"""

from __future__ import annotations

from typing import Final, Literal, TypeAlias, cast, get_args

import msgspec

__all__ = ["PARAMETER_FIELDS", "ParamName", "SamplerFields"]

ParamName: TypeAlias = Literal[
    "temperature",
    "maxTokens",
    "reasoningEffort",
    "stop",
    "topP",
    "topK",
    "minP",
    "topA",
    "frequencyPenalty",
    "presencePenalty",
    "repetitionPenalty",
    "seed",
    "verbosity",
]
"""A call-config parameter that the fallback may omit (camelCase, as the spec names them)."""


class SamplerFields(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, rename="camel"):
    """The sampling parameters, each ``None`` by default ("not sent, provider default").

    Not frozen, so the mutable call config can derive from it; the request parameters and the
    record derive with ``frozen=True``. Keyword-only, like every struct of the host API.
    """

    temperature: float | None = None
    max_tokens: int | None = None
    reasoning_effort: str | None = None
    stop: tuple[str, ...] | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    top_a: float | None = None
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    repetition_penalty: float | None = None
    seed: int | None = None
    verbosity: str | None = None


#: Every call-config parameter by its spec (camelCase) name → the attribute holding it, in the
#: table's order (which is the spec's).
PARAMETER_FIELDS: Final[dict[ParamName, str]] = {
    cast("ParamName", info.encode_name): info.name for info in msgspec.structs.fields(SamplerFields)
}

if tuple(PARAMETER_FIELDS) != get_args(ParamName):  # pragma: no cover - a wrong edit fails here
    raise TypeError(
        f"ParamName and SamplerFields disagree: {get_args(ParamName)} != {tuple(PARAMETER_FIELDS)}"
    )
