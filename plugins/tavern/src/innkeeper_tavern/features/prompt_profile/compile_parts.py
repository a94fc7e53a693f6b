"""The parts of a compatibility profile, each compiled from resolved inputs by its own function.

:meth:`TavernProfileLoader.compile <.profile.TavernProfileLoader.compile>` resolves (the
selection, the preset, the adapters, the history, the lore) and calls these for what each
resolved input becomes: the character's renderer fields, the macro environment, the activation
settings, the greeting the lore scan sees, the resources summary and the proposed call config.
They do no I/O and read no loader state.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from datetime import datetime
from typing import Any, Final

from innkeeper_hostapi.providers import PARAMETER_FIELDS
from innkeeper_tavern.features.prompt_render import CharacterFields, PromptRole, UserFields
from innkeeper_tavern.pure.formats.macros import MacroEnv
from innkeeper_tavern.pure.formats.preset import Preset
from innkeeper_tavern.pure.worldbook import ActivationMessage, ActivationSettings
from innkeeper_tavern.state.session_bindings.model import Selection

from .adapters import ActivationInput, ResolvedCharacter
from .group_view import GroupView
from .history import ChatHistory

__all__ = [
    "CALL_CONFIG_FIELDS",
    "DEFAULT_CHARACTER_NAME",
    "DEFAULT_USER_NAME",
    "GREETING_MESSAGE_ID",
    "REASONING_EFFORT_SENT",
    "activation_settings",
    "character_fields",
    "group_fields",
    "macro_env",
    "profile_seed",
    "propose_call_config",
    "resource_summaries",
    "sent_value",
    "with_greeting",
    "with_group_greetings",
]

#: ``{{char}}`` / ``{{user}}`` without a bound card / user (the original loader's defaults,
#: `docs/resources.md#original-data`).
DEFAULT_CHARACTER_NAME: Final = "Assistant"
DEFAULT_USER_NAME: Final = "User"

#: The four preset sampling fields a request may carry
#: (`docs/contract/loader.md#parameter-admission`), spec name → preset sampling attribute. Preset
#: sampler → call-config parameter (spec name → ``Sampling`` attribute): every Chat Completion
#: sampler the host can send (issue 10, item 4).
CALL_CONFIG_FIELDS: Final[dict[str, str]] = {k: v for k, v in PARAMETER_FIELDS.items()}
#: SillyTavern's own ``reasoning_effort`` choices mapped as SillyTavern sends them: ``auto`` is
#: not sent (the server decides), ``min``/``max`` become the API's ends. Any other stored value
#: is a provider id and is proposed as authored; the request hook then admits it only if the
#: provider profile takes it (`docs/contract/loader.md#parameter-admission`: no alternative effort
#: name is guessed).
REASONING_EFFORT_SENT: Final[dict[str, str | None]] = {
    "auto": None,
    "min": "minimal",
    "max": "high",
}


def propose_call_config(preset: Preset | None) -> dict[str, Any]:
    """The preset's supported sampling overrides (only fields the preset sets)."""
    if preset is None:
        return {}
    out: dict[str, Any] = {}
    for name, attr in CALL_CONFIG_FIELDS.items():
        value = sent_value(name, getattr(preset.sampling, attr))
        if value is not None:
            out[name] = value
    return out


def sent_value(name: str, value: Any) -> Any:
    """A preset sampler as the OpenAI-compatible request carries it, or ``None`` (not sent):
    ``stop`` as a non-empty list, ``reasoningEffort`` mapped (:data:`REASONING_EFFORT_SENT`),
    ``topK`` and ``seed`` as integers (a negative seed is SillyTavern's "random": not sent)."""
    if value is None:
        return None
    if name == "stop":
        return list(value) if value else None
    if name == "reasoningEffort":
        return REASONING_EFFORT_SENT.get(str(value), str(value))
    if name == "topK":
        return int(value) if value > 0 else None
    if name == "seed":
        return int(value) if value >= 0 else None
    return value


#: Id of the greeting in the activation input (it is no durable message).
GREETING_MESSAGE_ID: Final = "greeting"


def with_greeting(activation: ActivationInput, greeting: str) -> ActivationInput:
    """The activation input with the selected greeting as the chat's first message, as
    SillyTavern scans it (the default RP strategy sends it as the first assistant message of
    every request). The timed-effects clock is unchanged."""
    if not greeting.strip():
        return activation
    first = ActivationMessage(id=GREETING_MESSAGE_ID, role="assistant", text=greeting)
    return _opened_with(activation, (first,))


def _opened_with(
    activation: ActivationInput, firsts: tuple[ActivationMessage, ...]
) -> ActivationInput:
    """``activation`` with ``firsts`` (greetings) before its messages, marked as scanned."""
    messages = (*firsts, *activation.messages)
    metadata = {**activation.metadata, "greetingScanned": True}
    return replace(
        activation,
        messages=messages,
        text="\n".join(m.text for m in messages),
        metadata=metadata,
    )


def _greeting(character: ResolvedCharacter, index: int | None) -> str:
    data = character.card.data
    if not index or index <= 0:
        return data.first_message
    greetings = data.alternate_greetings
    if not greetings:
        return data.first_message
    # A stored index past the card's greetings reads as the last one (selection routes).
    return greetings[min(index, len(greetings)) - 1]


def _role(value: Any) -> PromptRole:
    if value == "user" or value == 1:
        return "user"
    if value == "assistant" or value == 2:
        return "assistant"
    return "system"


def character_fields(character: ResolvedCharacter, selection: Selection) -> CharacterFields:
    """The renderer's view of a card (switches applied: off means truly suppressed)."""
    data = character.card.data
    options = selection.character
    depth = data.extensions.get("depth_prompt")
    depth_prompt, depth_value = "", 4
    depth_role: PromptRole = "system"
    if isinstance(depth, dict):
        prompt = depth.get("prompt")
        depth_prompt = prompt if isinstance(prompt, str) else ""
        raw_depth = depth.get("depth")
        if (
            isinstance(raw_depth, int | float)
            and not isinstance(raw_depth, bool)
            and raw_depth >= 0
        ):
            depth_value = int(raw_depth)
        depth_role = _role(depth.get("role"))
    return CharacterFields(
        id=character.id,
        name=data.nickname or data.name or character.name,
        description=data.description,
        personality=data.personality,
        scenario=data.scenario,
        message_example=data.message_example,
        system_prompt=data.system_prompt,
        post_history_instructions=data.post_history_instructions,
        greeting=_greeting(character, options.greeting_index),
        depth_prompt=depth_prompt,
        depth_prompt_depth=depth_value,
        depth_prompt_role=depth_role,
    )


def profile_seed(session_id: str | None, clock: int) -> int:
    """The seed of the profile's random choices: stable for one session at one chat length."""
    digest = hashlib.blake2b(f"{session_id or ''}|{clock}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big")


def with_group_greetings(activation: ActivationInput, group: GroupView) -> ActivationInput:
    """The activation input with every member's greeting first, as a SillyTavern group chat
    opens (each greeting is a message of that member)."""
    firsts = tuple(
        ActivationMessage(id=f"{GREETING_MESSAGE_ID}-{i}", role="assistant", text=g.text)
        for i, g in enumerate(group.greetings)
        if g.text.strip()
    )
    return _opened_with(activation, firsts) if firsts else activation


def group_fields(fields: CharacterFields, group: GroupView, user: str) -> CharacterFields:
    """The speaker's fields for a group turn: join mode replaces the four joined fields and
    sends every member's depth prompt (macros read ``user`` as ``{{user}}``); the greeting is
    the group's (never the card's alone)."""
    if group.join is None:
        return replace(fields, greeting="")
    joined = group.join(user)
    return replace(
        fields,
        description=joined.description,
        personality=joined.personality,
        scenario=joined.scenario,
        message_example=joined.message_example,
        greeting="",
        depth_prompt="",
        depth_prompts=tuple((d.text, d.depth, d.role) for d in joined.depth_prompts),
    )


def macro_env(
    *,
    session_id: str | None,
    selection: Selection,
    character: ResolvedCharacter | None,
    fields: CharacterFields | None,
    user: UserFields | None,
    history: ChatHistory,
    now: datetime,
    group: str | None = None,
) -> MacroEnv:
    """The macro environment (``{{char}}``, ``{{user}}``, ``{{description}}``, ...): the card's
    fields as the selection's switches let them through, the user, and the history's last
    messages."""
    options = selection.character
    prefer_system = options.prefer_character_system_prompt is not False
    prefer_phi = options.prefer_character_post_history is not False
    return MacroEnv(
        char=fields.name if fields else DEFAULT_CHARACTER_NAME,
        user=user.name if user is not None else DEFAULT_USER_NAME,
        # A description placed in the chat or nowhere is not repeated by {{persona}}.
        persona=user.description if user and user.description_position == "inPrompt" else "",
        description=fields.description if fields else "",
        personality=fields.personality if fields else "",
        scenario=fields.scenario if fields else "",
        mes_examples=fields.message_example if fields else "",
        char_prompt=fields.system_prompt if fields and prefer_system else "",
        char_instruction=fields.post_history_instructions if fields and prefer_phi else "",
        char_version=character.card.data.character_version if character else "",
        char_depth_prompt=fields.depth_prompt if fields else "",
        creator_notes=character.card.data.creator_notes if character else "",
        input=history.last_user,
        last_message=history.last_message,
        last_message_id=history.message_count - 1 if history.message_count else None,
        last_user_message=history.last_user,
        last_char_message=history.last_char,
        chat_id=session_id or "",
        now=now,
        group=group,
    )


def activation_settings(preset: Preset | None) -> ActivationSettings:
    """The lore scan's settings: its token budget is the preset's context less its reply."""
    if preset is not None and preset.sampling.max_context:
        room = preset.sampling.max_context - (preset.sampling.max_tokens or 0)
        return ActivationSettings(max_context_tokens=max(1, room))
    return ActivationSettings()


def resource_summaries(
    *,
    preset_meta: dict[str, Any] | None,
    character: ResolvedCharacter | None,
    user: UserFields | None,
    user_updated: str | None,
    world_books: tuple[Any, ...],
) -> dict[str, Any]:
    """The body-free summary of every resource the profile used (``resources`` of the audit
    and of ``/active``)."""
    return {
        "preset": preset_meta,
        "characterCard": (
            {"id": character.id, "name": character.name, "updatedAt": character.updated_at}
            if character
            else None
        ),
        "user": ({"id": user.id, "name": user.name, "updatedAt": user_updated} if user else None),
        "worldBooks": [dict(r) for r in world_books],
    }
