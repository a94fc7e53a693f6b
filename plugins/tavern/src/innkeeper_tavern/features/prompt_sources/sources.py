"""Tavern's sources in the Assembler's registry (``dshPromptSources`` protocol 1).

`spec/LOADER_CONTRACT.md` "Adapter integration invariants" 2: "Tavern assembler adapters register
through the shared Assembler source registry." One source, ``tavern.profile``, offers the
resolved resources of a request — preset prompts, card fields, persona, lore by position, the
greeting, in-chat prompts — as contributions a strategy places. Item keys carry a category
prefix so a module can select a part of them:

| key prefix | items | placement asked for |
| --- | --- | --- |
| ``preset:`` | relative preset prompts (``preset:main`` ...) | system |
| ``preset:`` | prompts after ``chatHistory`` in live order (``preset:jailbreak``) | depth 0 (2) |
| ``character:`` | card fields and their markers/fallbacks | system |
| ``persona:`` | the bound user's description | system |
| ``lore:`` | lore-only parts (world-info before/after markers) | system, ranked |
| ``greeting:`` | the selected greeting (first generation only) | chat start, assistant |
| ``in-chat:`` | in-chat groups ``in-chat:d<depth>:o<order>:<role>`` (1) | at that depth, role |

(1) in-chat preset prompts, @depth lore, the card's depth prompt and Author's-Note lore, grouped
by the renderer as SillyTavern groups them.
(2) after the whole chat, depth-0 in-chat items included, in live order and with their own role
(:data:`POST_HISTORY_ORDER`); the standard backend degrades them to system text at the end, as
the compatibility renderer does.

With the module option ``relative: "messages"`` (the default RP strategy,
:mod:`innkeeper_tavern.features.prompt_sources.default`) every system item above becomes its own
chat-start message with the part's role, in the preset's order, and the greeting follows them as the
first
assistant message — the array SillyTavern's prompt manager sends (one message per prompt, no
squashing).

The items come from the loader's own resolution (``assembly_input`` of
:meth:`TavernProfileLoader.compile`) rendered by the same pure renderer with the same macro seed,
so a strategy sends the very texts the compatibility path would, but the advanced backend places
in-chat items at their real depth and role. A request reuses the compile the loader's section
made for the same step; a preview compiles without writing anything.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Final

from innkeeper_hostapi import PluginContext, Registration
from innkeeper_hostapi.assembly import (
    AtDepth,
    ChatStart,
    Contribution,
    HistoryBudget,
    InSystem,
    Placement,
    PromptRole,
    PromptSourceRegistry,
    SourceRequest,
)
from innkeeper_tavern.features.prompt_profile.keys import PROFILE_LOADER
from innkeeper_tavern.features.prompt_profile.profile import AssemblyInput
from innkeeper_tavern.features.prompt_render import ProfilePart, RenderRequest, render_profile
from innkeeper_tavern.pure.formats.macros import expand_macros
from innkeeper_tavern.pure.formats.preset import Preset, blank_preset

__all__ = [
    "TAVERN_PROFILE_SOURCE",
    "TavernProfileSource",
    "contributions",
    "register_tavern_sources",
]

TAVERN_PROFILE_SOURCE: Final = "tavern.profile"
#: Post-history prompts sit at depth 0 after every in-chat item (SillyTavern sends them after
#: the chat) and before the Assembler's context items (order ``1 << 30``).
POST_HISTORY_ORDER: Final = 1 << 20
#: What the renderer walks when no preset is selected.
_DEFAULT_PRESET: Final = blank_preset("Default")


def _category(part: ProfilePart) -> str:
    if part.kind == "greeting":
        return "greeting"
    sources = part.sources
    if sources and all(s.startswith("lore:") for s in sources):
        return "lore"
    if "user:description" in sources:
        return "persona"
    if any(s.startswith("character:") for s in sources):
        return "character"
    return "preset"


def post_history(preset: Preset | None) -> dict[str, int]:
    """Identifiers after ``chatHistory`` in the live order, with their rank after it."""
    enabled = [p.identifier for p in (preset or _DEFAULT_PRESET).prompts if p.enabled]
    if "chatHistory" not in enabled:
        return {}
    after = enabled[enabled.index("chatHistory") + 1 :]
    return {identifier: index for index, identifier in enumerate(after)}


def _role(role: str) -> PromptRole:
    return "user" if role == "user" else "assistant" if role == "assistant" else "system"


#: Chat-start order of the greeting when relative prompts are messages: after all of them.
GREETING_ORDER: Final = 1 << 20
#: ``relative`` module option: relative prompts as one system text (default) or as messages.
RELATIVE_OPTION: Final = "relative"


def _placement(
    part: ProfilePart, after: dict[str, int], index: int, as_messages: bool
) -> Placement:
    if part.kind in ("prompt", "marker") and part.identifier in after:
        rank = POST_HISTORY_ORDER + after[part.identifier]
        return AtDepth(depth=0, order=rank, role=_role(part.role))
    if part.kind == "greeting":
        return ChatStart(role="assistant", order=GREETING_ORDER)
    if part.kind == "in-chat":
        # identifier: in-chat:d<depth>:o<order>:<role> (the renderer's group key)
        _, depth, order, role = part.identifier.split(":")
        return AtDepth(depth=int(depth[1:]), order=int(order[1:]), role=_role(role))
    if as_messages:
        return ChatStart(role=_role(part.role), order=index)
    return InSystem()


#: SillyTavern's default ``new_chat_prompt`` (a preset may set its own, or ``""``).
DEFAULT_NEW_CHAT_PROMPT: Final = "[Start a new Chat]"


def _new_chat(given: AssemblyInput) -> list[Contribution]:
    """SillyTavern's ``new_chat_prompt``: a system message before the oldest chat message (the
    greeting), with macros expanded."""
    raw = given.preset.source.raw if given.preset is not None else {}
    text = raw.get("new_chat_prompt", DEFAULT_NEW_CHAT_PROMPT)
    if not isinstance(text, str) or not text.strip():
        return []
    return [
        Contribution(
            key="preset:newChatPrompt",
            text=expand_macros(text, given.macro_env),
            placement=ChatStart(role="system", order=GREETING_ORDER - 1),
            kind="tavern-prompt",
            provenance=("preset:new_chat_prompt",),
        )
    ]


def _context_budget(given: AssemblyInput) -> list[Contribution]:
    """SillyTavern's context budget: ``openai_max_context`` minus ``openai_max_tokens``; the
    Assembler sends the newest chat messages that fit it (``docs/assembler.md``)."""
    sampling = given.preset.sampling if given.preset is not None else None
    if sampling is None or not sampling.max_context:
        return []
    tokens = max(1, sampling.max_context - (sampling.max_tokens or 0))
    return [
        Contribution(
            key="preset:contextBudget",
            text="",
            placement=HistoryBudget(tokens=tokens),
            kind="tavern-budget",
            provenance=("preset:openai_max_context", "preset:openai_max_tokens"),
        )
    ]


def contributions(
    given: AssemblyInput, parts: Sequence[ProfilePart], *, relative_messages: bool = False
) -> list[Contribution]:
    """Map rendered parts to contributions (lore-only parts ranked by their worst lore rank).
    ``relative_messages`` sends every relative part as its own chat-start message."""
    ranks = {entry.lore_id: entry.rank for entry in given.lore}
    after = post_history(given.preset)
    out: list[Contribution] = []
    for index, part in enumerate(parts):
        category = _category(part)
        key = part.identifier if part.kind == "in-chat" else f"{category}:{part.identifier}"
        rank = None
        if category == "lore":
            found = [ranks[s[5:]] for s in part.sources if s[5:] in ranks]
            rank = max(found) if found else None
        out.append(
            Contribution(
                key=key,
                text=part.text,
                placement=_placement(part, after, index, relative_messages),
                kind=f"tavern-{part.kind}",
                rank=rank,
                provenance=part.sources,
            )
        )
    return out


class TavernProfileSource:
    """The ``tavern.profile`` source."""

    def __init__(self, ctx: PluginContext) -> None:
        self.ctx = ctx

    @property
    def id(self) -> str:
        """``tavern.profile``."""
        return TAVERN_PROFILE_SOURCE

    async def render(self, request: SourceRequest) -> Sequence[Contribution]:
        """The request's Tavern items (see the module docstring)."""
        loader = self.ctx.get(PROFILE_LOADER)
        turn = request.turn
        compiled = None
        if turn is not None and request.session_id is not None:
            compiled = loader.snapshot(request.session_id, turn.turn, turn.step)
        if compiled is None:
            compiled = await loader.compile(request.session_id, turn)
        given = compiled.assembly_input
        render_request = RenderRequest(
            preset=given.preset,
            character=given.character,
            user=given.user,
            lore=given.lore,
            prefer_system_prompt=given.prefer_system_prompt,
            prefer_post_history=given.prefer_post_history,
            include_greeting=given.include_greeting,
            env=given.macro_env,
            seed=given.seed,
        )
        outcome = await asyncio.to_thread(render_profile, render_request, loader.max_profile_bytes)
        if outcome.rendered is None:
            return []
        as_messages = request.options.get(RELATIVE_OPTION) == "messages"
        items = contributions(given, outcome.rendered.parts, relative_messages=as_messages)
        if as_messages:
            items.extend(_new_chat(given))
            items.extend(_context_budget(given))
        return items


def register_tavern_sources(ctx: PluginContext, registry: PromptSourceRegistry) -> Registration:
    """Register ``tavern.profile`` for Tavern's ``ctx`` (disposed when Tavern unloads)."""
    return registry.register(ctx, TavernProfileSource(ctx))
