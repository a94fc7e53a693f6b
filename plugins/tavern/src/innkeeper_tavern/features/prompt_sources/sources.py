"""Tavern's sources in the Assembler's registry (``dshPromptSources`` protocol 1).

`docs/contract/loader.md#integration-invariants` (2): the Tavern's prompt sources register in
the shared Assembler source registry. One source, ``tavern.profile``, offers the
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
first assistant message — the array SillyTavern's prompt manager sends (one message per prompt, the
example dialogue as its ``[Example Chat]`` blocks, no marker fallbacks), with the preset's request
shape (``squash_system_messages``, ``names_behavior``, ``continue_prefill``) and, for continue and
impersonate requests, the nudge or the impersonation prompt (``docs/assembler.md`` "The default RP
strategy").

The items come from the loader's own resolution (``assembly_input`` of
:meth:`TavernProfileLoader.compile`) rendered by the same pure renderer with the same macro seed,
so a strategy sends the very texts the compatibility path would, but the advanced backend places
in-chat items at their real depth and role. A request reuses the compile the loader's section
made for the same step; a preview compiles without writing anything.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Final, Literal

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
    RequestShape,
    SourceRequest,
)
from innkeeper_tavern.features.prompt_profile.keys import PROFILE_LOADER
from innkeeper_tavern.features.prompt_profile.profile import AssemblyInput, render_request
from innkeeper_tavern.features.prompt_render import ProfilePart, render_profile
from innkeeper_tavern.pure.formats.macros import expand_macros
from innkeeper_tavern.pure.formats.preset import Preset, blank_preset

from . import group as group_items
from .examples import EXAMPLE_USER, example_blocks, parse_block

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
GREETING_ORDER: Final = 1 << 40
#: Chat-start orders of relative parts are ``index * PART_STRIDE``; the messages one part
#: becomes (example dialogue) take the orders after it.
PART_STRIDE: Final = 1 << 16
#: A continue request's nudge: after the chat's depth-0 items, before the post-history prompts.
NUDGE_ORDER: Final = POST_HISTORY_ORDER - 1
#: An impersonate request's prompt: after everything else.
IMPERSONATE_ORDER: Final = 1 << 29
HistoryNames = Literal["none", "name", "content"]
#: SillyTavern's ``names_behavior``: 1 names the speakers in ``name``, 2 prefixes the content.
_NAMES: Final[dict[int, HistoryNames]] = {1: "name", 2: "content"}
#: ``relative`` module option: relative prompts as one system text (default) or as messages.
RELATIVE_OPTION: Final = "relative"


def _placement(
    part: ProfilePart, after: dict[str, int], index: int, as_messages: bool, speaker: str | None
) -> Placement:
    if part.kind in ("prompt", "marker") and part.identifier in after:
        rank = POST_HISTORY_ORDER + after[part.identifier]
        return AtDepth(depth=0, order=rank, role=_role(part.role))
    if part.kind == "greeting":
        return ChatStart(role="assistant", order=GREETING_ORDER, chat=True, name=speaker)
    if part.kind == "in-chat":
        # identifier: in-chat:d<depth>:o<order>:<role> (the renderer's group key)
        _, depth, order, role = part.identifier.split(":")
        return AtDepth(depth=int(depth[1:]), order=int(order[1:]), role=_role(role))
    if as_messages:
        return ChatStart(role=_role(part.role), order=index * PART_STRIDE)
    return InSystem()


#: SillyTavern's default ``new_chat_prompt`` (a preset may set its own, or ``""``).
DEFAULT_NEW_CHAT_PROMPT: Final = "[Start a new Chat]"
#: SillyTavern's default ``new_example_chat_prompt``: the heading of each example block.
DEFAULT_NEW_EXAMPLE_CHAT_PROMPT: Final = "[Example Chat]"
#: SillyTavern's default ``continue_nudge_prompt`` (``{{lastChatMessage}}``: the continued text).
DEFAULT_CONTINUE_NUDGE: Final = (
    "[Continue the following message. Do not include ANY parts of the original message. Use "
    "capitalization and punctuation as if your reply is a part of the original message: "
    "{{lastChatMessage}}]"
)
#: SillyTavern's default ``impersonation_prompt``.
DEFAULT_IMPERSONATION_PROMPT: Final = (
    "[Write your next reply from the point of view of {{user}}, using the chat history so far "
    "as a guideline for the writing style of {{user}}. Don't write as {{char}} or system. "
    "Don't describe actions of {{char}}.]"
)


def _new_chat(given: AssemblyInput) -> list[Contribution]:
    """SillyTavern's ``new_chat_prompt``: a system message before the oldest chat message (the
    greeting), with macros expanded."""
    raw = _raw(given)
    text = (
        group_items.new_chat_text(raw)
        if given.group is not None
        else raw.get("new_chat_prompt", DEFAULT_NEW_CHAT_PROMPT)
    )
    if not isinstance(text, str) or not text.strip():
        return []
    return [
        Contribution(
            key="preset:newChatPrompt",
            text=expand_macros(text, given.macro_env),
            # SillyTavern never squashes it into the system messages before it.
            placement=ChatStart(role="system", order=GREETING_ORDER - 1, merge=False),
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


def _speaker(name: str) -> str | None:
    """A name as SillyTavern sends it in ``name``: letters, digits and ``_`` (others become
    ``_``), at most 64 characters."""
    cleaned = re.sub(r"[^A-Za-z0-9_]", "_", name)[:64]
    return cleaned or None


def _raw(given: AssemblyInput) -> Mapping[str, Any]:
    return given.preset.source.raw if given.preset is not None else {}


def _names(given: AssemblyInput) -> HistoryNames:
    value = _raw(given).get("names_behavior", 0)
    return _NAMES.get(value, "none") if isinstance(value, int) else "none"


def _examples(given: AssemblyInput, order: int) -> list[Contribution]:
    """The example dialogue as SillyTavern's blocks (:mod:`.examples`), lore positioned at
    the top/bottom of the examples as blocks of their own."""
    env = given.macro_env
    lore = sorted(given.lore, key=lambda e: e.slot)
    pieces = [
        *(e.content for e in lore if e.position == "em_top"),
        given.character.message_example if given.character is not None else "",
        *(e.content for e in lore if e.position == "em_bottom"),
    ]
    raw = _raw(given).get("new_example_chat_prompt", DEFAULT_NEW_EXAMPLE_CHAT_PROMPT)
    heading = expand_macros(raw, env).strip() if isinstance(raw, str) else ""
    out: list[Contribution] = []
    for piece in pieces:
        for block in example_blocks(expand_macros(piece, env) if piece.strip() else ""):
            turns = parse_block(block, env.user, env.char)
            if not turns:
                continue
            if heading:
                order += 1
                out.append(
                    Contribution(
                        key=f"character:dialogueExamples:{len(out)}",
                        text=heading,
                        placement=ChatStart(role="system", order=order, merge=False),
                        kind="tavern-example",
                        provenance=("preset:new_example_chat_prompt",),
                    )
                )
            for turn in turns:
                order += 1
                text = turn.text
                if given.group is not None:  # a group's examples say who speaks
                    text = f"{env.user if turn.name == EXAMPLE_USER else env.char}: {text}"
                out.append(
                    Contribution(
                        key=f"character:dialogueExamples:{len(out)}",
                        text=text,
                        placement=ChatStart(role="system", order=order, name=turn.name),
                        kind="tavern-example",
                        provenance=("character:messageExample",),
                    )
                )
    return out


def contributions(
    given: AssemblyInput, parts: Sequence[ProfilePart], *, relative_messages: bool = False
) -> list[Contribution]:
    """Map rendered parts to contributions (lore-only parts ranked by their worst lore rank).
    ``relative_messages`` sends every relative part as its own chat-start message, the example
    dialogue as SillyTavern's example messages, and names the greeting as the preset's
    ``names_behavior`` says."""
    ranks = {entry.lore_id: entry.rank for entry in given.lore}
    after = post_history(given.preset)
    names = _names(given) if relative_messages else "none"
    char = given.macro_env.char
    speaker = _speaker(char) if names == "name" else None
    out: list[Contribution] = []
    for index, part in enumerate(parts):
        if relative_messages and part.kind == "fallback":
            # SillyTavern sends a field only at its enabled marker: no marker, no message.
            continue
        category = _category(part)
        key = part.identifier if part.kind == "in-chat" else f"{category}:{part.identifier}"
        placement = _placement(part, after, index, relative_messages, speaker)
        if (
            relative_messages
            and part.identifier == "dialogueExamples"
            and part.kind == "marker"
            and isinstance(placement, ChatStart)
        ):
            out.extend(_examples(given, placement.order))
            continue
        text = part.text
        if part.kind == "greeting" and names == "content" and char:
            text = f"{char}: {text}"
        rank = None
        if category == "lore":
            found = [ranks[s[5:]] for s in part.sources if s[5:] in ranks]
            rank = max(found) if found else None
        out.append(
            Contribution(
                key=key,
                text=text,
                placement=placement,
                kind=f"tavern-{part.kind}",
                rank=rank,
                provenance=part.sources,
            )
        )
    return out


def _shape(given: AssemblyInput) -> list[Contribution]:
    """The preset's Chat Completion shape: squashing, speaker names, the continue prefill."""
    raw = _raw(given)
    names = _names(given)
    env = given.macro_env
    user, char = env.user, env.char
    squash = raw.get("squash_system_messages") is True
    prefill = raw.get("continue_prefill") is True
    if given.group is not None:
        shape = group_items.shape(given.group, raw, user, squash=squash, prefill=prefill)
    else:
        if names == "name":
            user, char = _speaker(user) or "", _speaker(char) or ""
        shape = RequestShape(
            squash_system=squash,
            history_names=names,
            user_name=user,
            assistant_name=char,
            continue_prefill=prefill,
        )
    return [
        Contribution(
            key="preset:requestShape",
            text="",
            placement=shape,
            kind="tavern-shape",
            provenance=("preset:squash_system_messages", "preset:names_behavior"),
        )
    ]


def _request_kind(given: AssemblyInput, request: SourceRequest) -> list[Contribution]:
    """A continue request's nudge, an impersonate request's prompt (SillyTavern's
    ``continue_nudge_prompt`` / ``impersonation_prompt``, macros expanded)."""
    raw = _raw(given)
    env = given.macro_env
    if request.kind == "continue" and raw.get("continue_prefill") is not True:
        if not request.continued.strip():
            return []
        template = raw.get("continue_nudge_prompt", DEFAULT_CONTINUE_NUDGE)
        if not isinstance(template, str):
            return []
        continued = request.continued.strip()
        nudge_env = replace(env, extra={**env.extra, "lastchatmessage": continued})
        return [
            Contribution(
                key="preset:continueNudge",
                text=expand_macros(template, nudge_env),
                placement=AtDepth(depth=0, order=NUDGE_ORDER, role="system"),
                kind="tavern-prompt",
                provenance=("preset:continue_nudge_prompt",),
            )
        ]
    if request.kind == "impersonate":
        template = raw.get("impersonation_prompt", DEFAULT_IMPERSONATION_PROMPT)
        if not isinstance(template, str):
            return []
        return [
            Contribution(
                key="preset:impersonate",
                text=expand_macros(template, env),
                placement=AtDepth(depth=0, order=IMPERSONATE_ORDER, role="system"),
                kind="tavern-prompt",
                provenance=("preset:impersonation_prompt",),
            )
        ]
    return []


#: The request kind a compile renders its profile for (``RenderRequest``'s default generation
#: type): a request of that kind reuses the compile's render.
_COMPILED_KIND: Final = "normal"


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
        outcome = compiled.outcome
        if outcome is None or request.kind != _COMPILED_KIND:
            outcome = await asyncio.to_thread(
                render_profile, render_request(given, request.kind), loader.max_profile_bytes
            )
        if outcome.rendered is None:
            return []
        as_messages = request.options.get(RELATIVE_OPTION) == "messages"
        items = contributions(given, outcome.rendered.parts, relative_messages=as_messages)
        if as_messages:
            items.extend(_new_chat(given))
            items.extend(_context_budget(given))
            items.extend(_shape(given))
            items.extend(_request_kind(given, request))
            if given.group is not None:
                raw = _raw(given)
                env = given.macro_env
                items.extend(group_items.greetings(given.group, raw, GREETING_ORDER, env))
                items.extend(group_items.nudge(raw, env, request.kind, NUDGE_ORDER - 1))
        return items


def register_tavern_sources(ctx: PluginContext, registry: PromptSourceRegistry) -> Registration:
    """Register ``tavern.profile`` for Tavern's ``ctx`` (disposed when Tavern unloads)."""
    return registry.register(ctx, TavernProfileSource(ctx))
