"""What a preset's samplers become in a request, sampler by sampler, and why
(`docs/prompt-assembly.md#call-config`).

The turn's request hook runs :func:`~.admission.admit` over :func:`~.profile.propose_call_config`;
this module runs the very same two steps over a preset (saved or still being edited) and says,
for each sampler, what was stored, what would be sent and the reason for any difference. The
preset editor of the web client shows it next to the sliders. Nothing is written.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from innkeeper_hostapi.providers import ParamName, Provider
from innkeeper_tavern.pure.formats.preset import Preset
from innkeeper_tavern.pure.formats.preset_ranges import SAMPLER_RANGES

from .admission import admit
from .compile_parts import CALL_CONFIG_FIELDS, propose_call_config

__all__ = ["SamplerStatus", "explain_admission"]

SamplerStatus = Literal["unset", "not-sent", "sent", "mapped", "dropped"]

#: The preset's context size is no request parameter: it sizes the history the prompt keeps.
_MAX_CONTEXT: Final = "maxContext"


def _not_sent_reason(name: str, stored: Any) -> str:
    if name == "topK":
        return "top_k 0 is SillyTavern's 'off': not sent"
    if name == "seed":
        return "seed -1 is SillyTavern's 'random': not sent"
    if name == "reasoningEffort":
        return "reasoning effort 'auto' lets the server decide: not sent"
    if name == "stop":
        return "no stop strings: not sent"
    return f"{name} {stored!r} is not sent"


def _row(
    name: str, stored: Any, sent: Any, effective: Any, provider: Provider | None
) -> dict[str, Any]:
    low, high = SAMPLER_RANGES.get(name, (None, None))
    row: dict[str, Any] = {
        "name": name,
        "stored": stored,
        "sent": sent,
        "effective": effective,
        "range": {"min": low, "max": high},
    }
    status: SamplerStatus
    if stored is None:
        status, reason = "unset", "the preset does not set it: the server's default applies"
    elif sent is None:
        status, reason = "not-sent", _not_sent_reason(name, stored)
    elif effective is None:
        status = "dropped"
        assert provider is not None  # without a provider everything proposed is admitted
        if provider.accepts(_param(name)):
            reason = (
                f"the {provider.name} profile does not take {name} {sent!r}; "
                "the server's default applies (no other value is guessed)"
            )
        else:
            reason = (
                f"the {provider.name} profile does not send {name}; the server's default applies"
            )
    elif sent != stored:
        status, reason = "mapped", f"SillyTavern's {stored!r} is sent as {sent!r}"
    else:
        status, reason = "sent", "sent as stored"
    row["status"] = status
    row["reason"] = reason
    return row


def _param(name: str) -> ParamName:
    # Every key of CALL_CONFIG_FIELDS is a ParamName (it is a copy of PARAMETER_FIELDS).
    return name  # type: ignore[return-value]


def explain_admission(preset: Preset, provider: Provider | None) -> dict[str, Any]:
    """``{provider, samplers[], requested, effective, omitted}``: one row per sampler (spec
    order, then ``maxContext``) with ``stored``, ``sent``, ``effective``, ``range``, ``status``
    (``unset``/``not-sent``/``sent``/``mapped``/``dropped``) and a ``reason`` in words."""
    proposed = propose_call_config(preset)
    admission = admit(proposed, provider)
    rows = []
    for name, attr in CALL_CONFIG_FIELDS.items():
        stored = getattr(preset.sampling, attr)
        sent = proposed.get(name)
        rows.append(_row(name, stored, sent, admission.admitted.get(name), provider))
    context = preset.sampling.max_context
    rows.append(
        {
            "name": _MAX_CONTEXT,
            "stored": context,
            "sent": None,
            "effective": None,
            "range": {"min": 1, "max": None},
            "status": "unset" if context is None else "not-sent",
            "reason": "the preset does not set it"
            if context is None
            else "not a request parameter: it is the context budget the history is fitted to",
        }
    )
    return {
        "provider": admission.provider,
        "samplers": rows,
        **{k: v for k, v in admission.wire().items() if k != "provider"},
    }
