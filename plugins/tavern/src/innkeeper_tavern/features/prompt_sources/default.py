"""The default RP assembly strategy, applied to every new session (issue 10, item 3).

New sessions get a default RP assembly strategy, distinct from the compatibility renderer
(`docs/contract/loader.md#compatibility-renderer`). :data:`DEFAULT_STRATEGY` is it: the Assembler's
``advanced`` backend over the ``tavern.profile`` source with relative prompts as messages, so a
request is the array SillyTavern's prompt manager sends
(``docs/prompt-assembly.md#st-message-order``; SillyTavern's ``public/scripts/openai.js``
``populateChatCompletion`` and ``PromptManager.js``):

1. the preset's ``prompt_order`` sections before ``chatHistory``, in order, each its own message
   with its own role (main prompt, world info before, persona, card fields, world info after,
   example dialogue, ... — markers filled, macros expanded);
2. the chat: the selected greeting as the first assistant message, then the durable history —
   the newest messages that fit the preset's context budget (``openai_max_context`` minus
   ``openai_max_tokens``; older ones are left out of the request, see ``docs/assembler.md``
   "History budget"); in-chat prompts, @depth lore, the card's depth prompt and Author's-Note
   lore at their depth and role;
3. the prompts after ``chatHistory`` (post-history instructions) after the last user message;
4. a bound, pending imported record (``tavern.import-context``) as system text after the
   profile, for the one request that claims it.

Everything the strategy adds is request-only (the host records it in ``request/assembly``); the
durable history is never rewritten.

A new root session (not a fork, not delegated, never used before) gets the strategy named by
``[plugins.tavern] default_strategy`` (default :data:`DEFAULT_STRATEGY_ID`; ``""`` turns this
off) when its agent is first created. Forks and delegated sessions copy their parent's snapshot
(the Assembler's own rule), so a swipe or a branch is assembled like its parent. A session that
opts out (``DELETE /dsh-assembler/api/v1/sessions/{id}/strategy``) keeps the compatibility
renderer; the default is never applied to it again, since it is no longer new. The shipped
strategy is stored once, when first needed, and never overwritten: edit it like any other.
"""

from __future__ import annotations

from typing import Final

from innkeeper_hostapi import PluginContext
from innkeeper_hostapi.agents import AGENT_CREATED, AgentCreated
from innkeeper_hostapi.assembly import PROMPT_ASSEMBLER, Module, Strategy

from .sources import RELATIVE_OPTION, TAVERN_PROFILE_SOURCE
from .state import TAVERN_IMPORT_CONTEXT_SOURCE

__all__ = [
    "DEFAULT_STRATEGY",
    "DEFAULT_STRATEGY_ID",
    "DEFAULT_STRATEGY_OPTION",
    "install_default_strategy",
]

DEFAULT_STRATEGY_ID: Final = "tavern-rp"
#: ``[plugins.tavern]`` option: the strategy id new sessions get (``""``: none).
DEFAULT_STRATEGY_OPTION: Final = "default_strategy"
DEFAULT_STRATEGY: Final = Strategy(
    id=DEFAULT_STRATEGY_ID,
    name="Tavern RP (SillyTavern's prompt order)",
    backend="advanced",
    modules=(
        Module(source=TAVERN_PROFILE_SOURCE, options={RELATIVE_OPTION: "messages"}),
        # A pending imported record (docs/play.md "Import context"): after the profile, before
        # the chat; it contributes nothing for sessions without one.
        Module(source=TAVERN_IMPORT_CONTEXT_SOURCE),
    ),
)


def install_default_strategy(ctx: PluginContext) -> str | None:
    """Apply the configured default strategy to new sessions; returns its id (or ``None``)."""
    configured = ctx.config.get(DEFAULT_STRATEGY_OPTION, DEFAULT_STRATEGY_ID)
    if not isinstance(configured, str):
        raise ValueError(f"{DEFAULT_STRATEGY_OPTION} must be a strategy id or an empty string")
    if not configured:
        return None

    async def on_created(event: AgentCreated) -> None:
        if event.resumed or event.parent_session_id is not None or event.delegation_depth:
            return
        assembler = ctx.get_optional(PROMPT_ASSEMBLER)
        if assembler is None or assembler.applied(event.session_id) is not None:
            return
        if assembler.strategy(configured) is None:
            if configured != DEFAULT_STRATEGY_ID:
                ctx.logger.warning("default strategy %r does not exist; none applied", configured)
                return
            await assembler.put_strategy(DEFAULT_STRATEGY)
        await assembler.apply(event.session_id, configured)

    ctx.on(AGENT_CREATED, on_created)
    return configured
