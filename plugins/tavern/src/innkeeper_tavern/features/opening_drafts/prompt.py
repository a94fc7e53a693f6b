"""The prompt an opening draft's first send would carry (`docs/contract/openings.md#opening-drafts`:
the preview reads the draft's resources, variables and assembly rules).

:func:`draft_prompt` compiles the draft's selection through the loader's sessionless entry
point (:mod:`innkeeper_tavern.features.prompt_profile.sessionless`) and, when new sessions get a
default Assembler strategy (``[plugins.tavern] default_strategy``, ``tavern-rp`` unless configured),
asks the Assembler for its request preview under that strategy; otherwise it answers the
compatibility renderer's sections. No session is created, nothing is written (a compile without
a turn records no audit, snapshot or timed effect) and no model is called.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import msgspec

from innkeeper_hostapi import PluginContext
from innkeeper_hostapi.assembly import PROMPT_ASSEMBLER, Strategy
from innkeeper_tavern.features.prompt_profile.keys import PROFILE_LOADER, RP_POLICY_SECTION
from innkeeper_tavern.features.prompt_profile.sessionless import Sessionless, sessionless
from innkeeper_tavern.features.prompt_render import PART_JOINER as SECTION_JOINER
from innkeeper_tavern.features.prompt_sources.default import (
    DEFAULT_STRATEGY,
    DEFAULT_STRATEGY_ID,
    DEFAULT_STRATEGY_OPTION,
)
from innkeeper_tavern.state.session_bindings.model import Selection

__all__ = ["MAX_PREVIEW_PROMPT_BYTES", "OMITTED_SECTIONS", "draft_prompt"]

#: At most this many UTF-8 bytes of prompt text in one preview answer; the messages (or
#: sections) past it are left out and counted (``truncated``, ``omittedMessages``).
MAX_PREVIEW_PROMPT_BYTES: Final = 2 << 20
#: What a sessionless preview cannot render, with the reason (always listed).
OMITTED_SECTIONS: Final = (
    {
        "name": "user-message",
        "reason": "the first send's text is not known yet (pendingInputsIncluded:false): it is "
        "neither in the messages nor in the lore scan",
    },
    {
        "name": "host-sections",
        "reason": "system sections other plugins render per request take the turn of an "
        "existing session; a preview renders only Tavern's assembly",
    },
    {
        "name": "seeded-macros",
        "reason": "{{random}}, {{roll}} and {{pick}} are seeded by the session id, which the "
        "first send creates: their values in the preview differ from the send's",
    },
    {
        "name": "tavern.import-context",
        "reason": "a pending imported record is claimed by a session's request",
    },
)


def _strategy(ctx: PluginContext) -> Strategy | None:
    """The strategy a new session of this draft would get (``None``: the compatibility
    renderer)."""
    configured = ctx.config.get(DEFAULT_STRATEGY_OPTION, DEFAULT_STRATEGY_ID)
    assembler = ctx.get_optional(PROMPT_ASSEMBLER)
    if not isinstance(configured, str) or not configured or assembler is None:
        return None
    found = assembler.strategy(configured)
    if found is None and configured == DEFAULT_STRATEGY_ID:
        return DEFAULT_STRATEGY
    return found


def _bounded(items: list[dict[str, Any]], field: str) -> tuple[list[dict[str, Any]], int]:
    """The leading items whose ``field`` texts fit :data:`MAX_PREVIEW_PROMPT_BYTES`."""
    used = 0
    for index, item in enumerate(items):
        used += len(item[field].encode())
        if used > MAX_PREVIEW_PROMPT_BYTES:
            return items[:index], len(items) - index
    return items, 0


async def draft_prompt(
    ctx: PluginContext,
    selection: Selection,
    variables: Mapping[str, Any] | None,
    *,
    rp: bool,
) -> dict[str, Any]:
    """``{strategyId, backend, messages, sections, diagnostics, omittedSections, truncated,
    omittedMessages}`` of the first request a session bound to ``selection`` would send
    (``rp``: binding the card enters RP, so the ``rp:policy`` section is sent too)."""
    strategy = _strategy(ctx)
    scope = Sessionless(
        selection=selection, variables=variables, strategy_applied=strategy is not None
    )
    loader = ctx.get(PROFILE_LOADER)
    with sessionless(scope):
        compiled = await loader.compile(None)
        diagnostics = [d.wire() for d in compiled.diagnostics]
        sections = [{"name": p.name, "text": p.text} for p in compiled.parts if p.text]
        policy = loader.rp_policy.text if rp and loader.rp_policy is not None else ""
        messages: list[dict[str, Any]] = []
        system: list[str] = []  # the host's system message: its sections in section order
        if strategy is not None:
            assembler = ctx.get(PROMPT_ASSEMBLER)
            preview = await assembler.preview(None, strategy=strategy)
            messages = [{"role": m.role, "content": m.content} for m in preview.messages]
            diagnostics += [msgspec.to_builtins(d) for d in preview.diagnostics]
            if messages and messages[0]["role"] == "system" and 0 not in preview.request_only:
                system.append(messages.pop(0)["content"])  # the Assembler's section (order 11)
        else:
            system.extend(s["text"] for s in sections)  # the profile's parts (order 10)
        if policy:
            sections.append({"name": RP_POLICY_SECTION, "text": policy})
            system.append(policy)  # order 45, after Tavern's and the Assembler's sections
        if system:
            messages.insert(0, {"role": "system", "content": SECTION_JOINER.join(system)})
    kept, omitted = _bounded(messages, "content")
    kept_sections, omitted_sections = _bounded(sections, "text")
    return {
        "strategyId": strategy.id if strategy is not None else None,
        "backend": strategy.backend if strategy is not None else None,
        "messages": kept,
        "sections": kept_sections,
        "diagnostics": diagnostics,
        "omittedSections": [dict(item) for item in OMITTED_SECTIONS],
        "truncated": bool(omitted or omitted_sections),
        "omittedMessages": omitted,
    }
