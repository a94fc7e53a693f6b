"""The no-strategy compatibility renderer: a preset, a card, a user and activated lore → profile.

`docs/contract/loader.md#compatibility-renderer` (the retained compatibility renderer, not an
Assembler strategy), `docs/contract/loader.md#markers`, `docs/contract/loader.md#honest-degradation`
and `docs/contract/world-info.md#profile-budget`;
SillyTavern's order is `docs/prompt-assembly.md#st-message-order` and
`docs/prompt-assembly.md#st-in-chat-order`.

The preset's live order is walked once. Relative prompts become parts in that order; markers are
filled from the card, the user and the lore (each field at most once); the ``chatHistory``
marker is where the chat begins, so the greeting (first generation only) and every in-chat
prompt land there, *before* the host's durable history, in the chronological order SillyTavern
would give them inside the chat (deeper first; lower ``injection_order`` first; assistant, user,
then system). That placement is an approximation and is reported as one. Fields whose marker is
missing fall back, in SillyTavern's default order, just before that point.

No names, ids or wrappers are added to model-visible text: a part's text is its body. Prompt
identifiers, requested roles and provenance are metadata (:class:`ProfilePart`), for the audit.
Pure: no I/O, no host import.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal

import msgspec

from innkeeper_tavern.pure.formats.macros import MacroEnv, MacroSession, VariableValue
from innkeeper_tavern.pure.formats.preset import Preset, PresetPrompt, blank_preset

__all__ = [
    "PART_PREFIX",
    "PROFILE_SECTION",
    "CharacterFields",
    "Diagnostic",
    "LoreEntry",
    "ProfileOutcome",
    "ProfilePart",
    "RenderRequest",
    "Rendered",
    "UserFields",
    "render",
    "render_profile",
]

#: The host section the compatibility profile is delivered as (`docs/contract/loader.md#ownership`:
#: the order-10 anchor).
PROFILE_SECTION: Final = "pmp-dsh-tavern:profile"
#: Names of the parts the anchor expands into (metadata; see :class:`ProfilePart`).
PART_PREFIX: Final = "pmp-dsh-tavern:part:"
#: How the host joins sections, and how parts are joined inside the profile section.
PART_JOINER: Final = "\n\n"

# Diagnostic codes (stable; shown by /active and the audit).
TAVERN_PROFILE_LORE_LIMITED: Final = "TAVERN_PROFILE_LORE_LIMITED"
TAVERN_PROFILE_TOO_LARGE: Final = "TAVERN_PROFILE_TOO_LARGE"
TAVERN_PROFILE_DEPTH_APPROXIMATE: Final = "TAVERN_PROFILE_DEPTH_APPROXIMATE"
TAVERN_PROFILE_ROLE_APPROXIMATE: Final = "TAVERN_PROFILE_ROLE_APPROXIMATE"
TAVERN_LORE_AUTHORS_NOTE_APPROXIMATE: Final = "TAVERN_LORE_AUTHORS_NOTE_APPROXIMATE"
TAVERN_LORE_MARKER_FALLBACK: Final = "TAVERN_LORE_MARKER_FALLBACK"
CHARACTER_FIELD_MARKER_FALLBACK: Final = "CHARACTER_FIELD_MARKER_FALLBACK"
USER_PERSONA_MARKER_FALLBACK: Final = "USER_PERSONA_MARKER_FALLBACK"
CHARACTER_SYSTEM_OVERRIDE_FORBIDDEN: Final = "CHARACTER_SYSTEM_OVERRIDE_FORBIDDEN"
CHARACTER_PHI_OVERRIDE_FORBIDDEN: Final = "CHARACTER_PHI_OVERRIDE_FORBIDDEN"
CHARACTER_SYSTEM_PROMPT_UNUSED: Final = "CHARACTER_SYSTEM_PROMPT_UNUSED"
CHARACTER_PHI_UNUSED: Final = "CHARACTER_PHI_UNUSED"
CHARACTER_PHI_APPROXIMATE: Final = "CHARACTER_PHI_APPROXIMATE"
CHARACTER_GREETING_REFERENCE: Final = "CHARACTER_GREETING_REFERENCE"
CHARACTER_DEPTH_APPROXIMATE: Final = "CHARACTER_DEPTH_APPROXIMATE"
PRESET_NOT_SELECTED: Final = "PRESET_NOT_SELECTED"

PromptRole = Literal["system", "user", "assistant"]
LorePosition = Literal[
    "before", "after", "an_top", "an_bottom", "em_top", "em_bottom", "at_depth", "outlet"
]
PartKind = Literal["prompt", "marker", "fallback", "greeting", "in-chat"]
Severity = Literal["info", "warning", "error"]

#: `docs/prompt-assembly.md#st-in-chat-order`: inside one (depth, order) group the chat reads
#: assistant, user, then system (system closest to the end).
_ROLE_RANK: Final[dict[str, int]] = {"assistant": 0, "user": 1, "system": 2}
#: Extension prompts join the 100 group only (same section).
_EXTENSION_ORDER: Final = 100
#: Same section: extension prompts of one depth and role concatenate in alphabetical key order:
#: ``2_floating_prompt`` (Author's Note) < ``DEPTH_PROMPT`` < ``customDepthWI-…``.
_EXT_AUTHORS_NOTE: Final = "2_floating_prompt"
_EXT_DEPTH_PROMPT: Final = "DEPTH_PROMPT"
#: The persona description placed in the chat (``descriptionPosition: atDepth``).
_EXT_PERSONA_DEPTH: Final = "PERSONA_DESCRIPTION"
_EXT_WORLD_INFO: Final = "customDepthWI"
#: ST's Author's Note default placement (in-chat, depth 4, system) used for AN-positioned lore.
_AUTHORS_NOTE_DEPTH: Final = 4

_PERSONA_MACRO: Final = re.compile(r"\{\{\s*persona\s*\}\}", re.IGNORECASE)
_ORIGINAL_MACRO: Final = re.compile(r"\{\{\s*original\s*\}\}", re.IGNORECASE)
#: Card-field macros that place a field explicitly: a preset that writes ``{{description}}`` in
#: an enabled prompt (and disables the marker, as large community presets do) has placed it, so
#: it neither falls back nor is emitted a second time by a marker.
_FIELD_MACROS: Final = re.compile(
    r"\{\{\s*(description|personality|scenario|mesexamples|mesexamplesraw)\s*\}\}", re.IGNORECASE
)
_FIELD_OF_MACRO: Final[dict[str, str]] = {
    "description": "description",
    "personality": "personality",
    "scenario": "scenario",
    "mesexamples": "messageExample",
    "mesexamplesraw": "messageExample",
}
_PERSONA_MARKERS: Final = frozenset({"personaDescription", "userDescription", "userPersona"})
_FIELD_MARKERS: Final[dict[str, str]] = {
    "charDescription": "description",
    "charPersonality": "personality",
    "scenario": "scenario",
}
_KNOWN_MARKERS: Final = frozenset(
    {
        "worldInfoBefore",
        "worldInfoAfter",
        "dialogueExamples",
        "chatHistory",
        *_FIELD_MARKERS,
        *_PERSONA_MARKERS,
    }
)
_DEFAULT_PRESET: Final = blank_preset("Default")


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """A problem or an approximation, body-free: ``code`` is stable, ``details`` are counts/ids."""

    code: str
    message: str
    severity: Severity = "warning"
    details: Mapping[str, Any] = field(default_factory=dict)

    def wire(self) -> dict[str, Any]:
        """JSON builtins (camelCase)."""
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        out["severity"] = self.severity
        if self.details:
            out["details"] = dict(self.details)
        return out


@dataclass(frozen=True, slots=True)
class LoreEntry:
    """One activated lore entry as the renderer needs it.

    ``rank`` is its place in the activation's rank order (the budget keeps the lowest ranks);
    ``slot`` its place inside its position bucket (SillyTavern's ascending ``order``). An
    adapter that only knows before/after may leave the rest at their defaults.
    """

    lore_id: str
    content: str
    position: LorePosition = "before"
    rank: int = 0
    slot: int = 0
    depth: int = 4
    role: PromptRole = "system"
    outlet: str = ""
    resource_id: str = ""


@dataclass(frozen=True, slots=True)
class CharacterFields:
    """The card fields the renderer consumes (creator notes are never rendered)."""

    id: str
    name: str
    description: str = ""
    personality: str = ""
    scenario: str = ""
    message_example: str = ""
    system_prompt: str = ""
    post_history_instructions: str = ""
    greeting: str = ""
    depth_prompt: str = ""
    depth_prompt_depth: int = 4
    depth_prompt_role: PromptRole = "system"
    #: A group in join mode: every member's depth prompt ``(text, depth, role)``, in member
    #: order, each placed as an extension prompt of its own (``DEPTH_PROMPT_<i>``, SillyTavern's
    #: keys; docs/groups.md "Prompt assembly"). ``depth_prompt`` is then empty.
    depth_prompts: tuple[tuple[str, int, PromptRole], ...] = ()


@dataclass(frozen=True, slots=True)
class UserFields:
    """The bound user, strictly ``{id, name, description}`` (`docs/contract/loader.md#adapters`)."""

    id: str
    name: str
    description: str = ""
    #: ``inPrompt`` (the persona marker / ``{{persona}}``), ``atDepth`` or ``none``.
    description_position: str = "inPrompt"
    description_depth: int = 2
    description_role: PromptRole = "system"


@dataclass(frozen=True, slots=True)
class AuthorsNoteText:
    """The chat's Author's Note for this request (its frequency already applied): ``text``
    placed ``depth`` messages before the end of the chat as ``role`` (docs/prompt-assembly.md
    "Author's Note")."""

    text: str
    depth: int = 4
    role: str = "system"


@dataclass(frozen=True, slots=True)
class RenderRequest:
    """Everything one render depends on (macro state included, so it is reproducible)."""

    preset: Preset | None
    character: CharacterFields | None = None
    user: UserFields | None = None
    lore: tuple[LoreEntry, ...] = ()
    prefer_system_prompt: bool = True
    prefer_post_history: bool = True
    include_greeting: bool = False
    env: MacroEnv = field(default_factory=MacroEnv)
    local_variables: Mapping[str, VariableValue] = field(default_factory=dict)
    seed: int = 0
    generation_type: str = "normal"
    authors_note: AuthorsNoteText | None = None


@dataclass(frozen=True, slots=True)
class ProfilePart:
    """One ``pmp-dsh-tavern:part:*`` of the profile: its text plus audit metadata."""

    name: str
    identifier: str
    kind: PartKind
    role: str
    text: str
    sources: tuple[str, ...] = ()

    def metadata(self) -> dict[str, Any]:
        """Body-free description of the part (name, provenance, size)."""
        return {
            "name": self.name,
            "identifier": self.identifier,
            "kind": self.kind,
            "role": self.role,
            "bytes": len(self.text.encode()),
            "sources": list(self.sources),
        }


@dataclass(frozen=True, slots=True)
class Rendered:
    """A rendered profile."""

    parts: tuple[ProfilePart, ...]
    text: str
    bytes: int
    diagnostics: tuple[Diagnostic, ...]
    path: Literal["preset-only", "unified"]
    user_injection: Mapping[str, Any]
    lore_ids: tuple[str, ...]
    local_variables: Mapping[str, VariableValue]


@dataclass(frozen=True, slots=True)
class ProfileOutcome:
    """The budgeted result: ``rendered`` is ``None`` when nothing fits (``too_large``)."""

    rendered: Rendered | None
    max_bytes: int
    too_large: bool
    retained_lore: int
    omitted_lore: int
    diagnostics: tuple[Diagnostic, ...]


# ---------------------------------------------------------------- helpers


def _utf8_len(text: str) -> int:
    return len(text.encode())


def _wi_format(template: Any, value: str) -> str:
    """SillyTavern's ``wi_format`` (``{0}``): a blank or missing format keeps the raw text."""
    if not value:
        return ""
    if not isinstance(template, str) or not template.strip() or "{0}" not in template:
        return value
    return template.replace("{0}", value)


def _field_format(template: Any, raw: str, session: MacroSession) -> str:
    """``scenario_format`` / ``personality_format``: a macro template (only for non-empty
    fields); without one the field itself is expanded."""
    if not raw.strip():
        return ""
    if isinstance(template, str) and template.strip():
        return session.expand(template).strip()
    return session.expand(raw).strip()


def _triggered(prompt: PresetPrompt, generation_type: str) -> bool:
    return not prompt.injection_trigger or generation_type in prompt.injection_trigger


@dataclass(slots=True)
class _InChat:
    depth: int
    order: int
    role: str
    seq: int
    texts: list[str]
    sources: list[str]
    extensions: list[tuple[str, str, tuple[str, ...]]] = field(default_factory=list)


class _Walk:
    """One render pass: mutable state of the walk over the live order."""

    def __init__(self, request: RenderRequest, lore: tuple[LoreEntry, ...]) -> None:
        self.request = request
        self.lore = lore
        self.preset = request.preset or _DEFAULT_PRESET
        raw = self.preset.source.raw
        self.wi_format = raw.get("wi_format", "{0}")
        self.scenario_format = raw.get("scenario_format")
        self.personality_format = raw.get("personality_format")
        outlets: dict[str, list[LoreEntry]] = {}
        for entry in sorted(lore, key=lambda e: e.slot):
            if entry.position == "outlet" and entry.outlet:
                outlets.setdefault(entry.outlet, []).append(entry)
        self.used_outlets: set[str] = set()

        def outlet(args: list[str]) -> str:
            name = args[0] if args else ""
            found = outlets.get(name, [])
            self.used_outlets.update(e.lore_id for e in found)
            return "\n".join(e.content for e in found)

        env = replace(request.env, extra={**request.env.extra, "outlet": outlet})
        self.session = MacroSession(
            env, local_variables=request.local_variables, rng=random.Random(request.seed)
        )
        self.parts: list[ProfilePart] = []
        self.diagnostics: list[Diagnostic] = []
        self.consumed: set[str] = set()
        self.in_chat: dict[tuple[int, int, str], _InChat] = {}
        self.history_at: int | None = None
        self.role_approximated = 0
        self.rendered_lore: list[str] = []
        self.persona_placement = "none"

    # -- lore ------------------------------------------------------------------------------
    def bucket(self, position: LorePosition) -> list[LoreEntry]:
        return sorted((e for e in self.lore if e.position == position), key=lambda e: e.slot)

    def lore_text(self, position: LorePosition) -> tuple[str, tuple[str, ...]]:
        entries = [e for e in self.bucket(position) if e.content.strip()]
        return "\n".join(e.content for e in entries), tuple(e.lore_id for e in entries)

    # -- output ----------------------------------------------------------------------------
    def add(
        self,
        identifier: str,
        kind: PartKind,
        role: str,
        text: str,
        sources: Iterable[str],
        *,
        at: int | None = None,
    ) -> bool:
        text = text.strip()
        if not text:
            return False
        sources = tuple(sources)
        part = ProfilePart(PART_PREFIX + identifier, identifier, kind, role, text, sources)
        if at is None:
            self.parts.append(part)
        else:
            self.parts.insert(at, part)
        self.rendered_lore.extend(s[5:] for s in sources if s.startswith("lore:"))
        return True

    def in_chat_add(
        self, depth: int, order: int, role: str, seq: int, text: str, sources: Iterable[str]
    ) -> None:
        text = text.strip()
        if not text:
            return
        group = self.in_chat.setdefault(
            (depth, order, role), _InChat(depth, order, role, seq, [], [])
        )
        group.texts.append(text)
        group.sources.extend(sources)

    def extension(
        self, key: str, depth: int, role: str, text: str, sources: tuple[str, ...]
    ) -> None:
        text = text.strip()
        if not text:
            return
        group = self.in_chat.setdefault(
            (depth, _EXTENSION_ORDER, role),
            _InChat(depth, _EXTENSION_ORDER, role, 1 << 30, [], []),
        )
        group.extensions.append((key, text, sources))

    # -- the walk --------------------------------------------------------------------------
    def run(self) -> Rendered:
        request = self.request
        character = request.character
        user = request.user
        expand = self.session.expand
        if request.preset is None:
            self.diagnostics.append(
                Diagnostic(
                    PRESET_NOT_SELECTED,
                    "no preset is selected: SillyTavern's default prompt order is used",
                    "info",
                )
            )
        overrides_main = (
            character is not None
            and bool(character.system_prompt.strip())
            and request.prefer_system_prompt
        )
        # SillyTavern keeps a disabled main prompt in its place with no text, so a card's system
        # prompt still replaces it there (a disabled post-history prompt is simply left out).
        enabled = [
            p if p.enabled else msgspec.structs.replace(p, content="")
            for p in self.preset.prompts
            if (p.enabled or (p.identifier == "main" and overrides_main))
            and _triggered(p, request.generation_type)
        ]
        persona_by_macro = next(
            (p.identifier for p in enabled if not p.marker and _PERSONA_MACRO.search(p.content)),
            None,
        )
        if character is not None:
            for prompt in enabled:
                if not prompt.marker:
                    for found in _FIELD_MACROS.findall(prompt.content):
                        self.consumed.add(_FIELD_OF_MACRO[found.lower()])
        if user is not None and user.description_position != "inPrompt":
            # Placed in the chat (below) or not at all: never by a marker or the fallback.
            self.consumed.add("persona")
            self.persona_placement = (
                "at-depth" if user.description_position == "atDepth" else "none"
            )
        if user is not None and user.description.strip() and persona_by_macro is not None:
            self.consumed.add("persona")
            self.persona_placement = f"preset-macro:{persona_by_macro}"

        for seq, prompt in enumerate(enabled):
            identifier = prompt.identifier
            if prompt.marker or identifier in _KNOWN_MARKERS:
                self.marker(prompt, seq)
                continue
            content = prompt.content
            sources = [f"preset:{identifier}"]
            original: str | None = None
            if identifier == "main" and character is not None and character.system_prompt.strip():
                if not request.prefer_system_prompt:
                    pass  # the switch truly suppresses the field (Marker ownership)
                elif prompt.forbid_overrides:
                    self.diagnostics.append(
                        Diagnostic(
                            CHARACTER_SYSTEM_OVERRIDE_FORBIDDEN,
                            "the preset's main prompt forbids overrides: the card's system "
                            "prompt is not sent (as in SillyTavern)",
                            "info",
                        )
                    )
                else:
                    original, content = content, character.system_prompt
                    sources = ["character:systemPrompt", f"preset:{identifier}"]
                self.consumed.add("systemPrompt")
            elif (
                identifier == "jailbreak"
                and character is not None
                and character.post_history_instructions.strip()
            ):
                if not request.prefer_post_history:
                    pass
                elif prompt.forbid_overrides:
                    self.diagnostics.append(
                        Diagnostic(
                            CHARACTER_PHI_OVERRIDE_FORBIDDEN,
                            "the preset's post-history prompt forbids overrides: the card's "
                            "post-history instructions are not sent (as in SillyTavern)",
                            "info",
                        )
                    )
                else:
                    original, content = content, character.post_history_instructions
                    sources = ["character:postHistoryInstructions", f"preset:{identifier}"]
                    self.diagnostics.append(
                        Diagnostic(
                            CHARACTER_PHI_APPROXIMATE,
                            "post-history instructions are system text in the profile, not "
                            "placed after the chat history",
                        )
                    )
                self.consumed.add("postHistoryInstructions")
            if original is not None and _ORIGINAL_MACRO.search(content):
                # SillyTavern replaces {{original}} before the names and card fields, so the
                # preset text it brings in has those expanded too.
                original = expand(original)
            text = expand(content, original=original)
            if prompt.injection_position == 1:
                self.in_chat_add(
                    prompt.injection_depth, prompt.injection_order, prompt.role, seq, text, sources
                )
                continue
            if self.add(identifier, "prompt", prompt.role, text, sources) and (
                prompt.role != "system"
            ):
                self.role_approximated += 1

        self.unused_overrides()
        self.fallbacks()
        self.chat_start()
        self.report_in_chat()
        if self.role_approximated:
            self.diagnostics.append(
                Diagnostic(
                    TAVERN_PROFILE_ROLE_APPROXIMATE,
                    f"{self.role_approximated} preset prompts with a user/assistant role are "
                    "sent as system text (their role is kept in the audit)",
                    "info",
                    {"prompts": self.role_approximated},
                )
            )
        lore_ids = tuple(dict.fromkeys([*self.rendered_lore, *sorted(self.used_outlets)]))
        text = PART_JOINER.join(p.text for p in self.parts)
        unified = character is not None or user is not None or bool(self.lore)
        return Rendered(
            parts=tuple(self.parts),
            text=text,
            bytes=_utf8_len(text),
            diagnostics=tuple(self.diagnostics),
            path="unified" if unified else "preset-only",
            user_injection=self.user_injection(),
            lore_ids=lore_ids,
            local_variables=dict(self.session.local_variables),
        )

    def marker(self, prompt: PresetPrompt, seq: int) -> None:
        identifier = prompt.identifier
        character = self.request.character
        user = self.request.user
        text = ""
        sources: tuple[str, ...] = ()
        if identifier == "chatHistory":
            if self.history_at is None:
                self.history_at = len(self.parts)
            return
        if identifier in ("worldInfoBefore", "worldInfoAfter"):
            key = identifier
            if key in self.consumed:
                return
            self.consumed.add(key)
            raw, ids = self.lore_text("before" if key == "worldInfoBefore" else "after")
            text = _wi_format(self.wi_format, raw)
            sources = tuple(f"lore:{i}" for i in ids)
        elif identifier in _FIELD_MARKERS:
            name = _FIELD_MARKERS[identifier]
            if character is None or name in self.consumed:
                return
            self.consumed.add(name)
            raw = getattr(character, name)
            if name == "personality":
                text = _field_format(self.personality_format, raw, self.session)
            elif name == "scenario":
                text = _field_format(self.scenario_format, raw, self.session)
            else:
                text = self.session.expand(raw)
            sources = (f"character:{name}",)
        elif identifier in _PERSONA_MARKERS:
            if user is None or "persona" in self.consumed:
                return
            self.consumed.add("persona")
            text = self.session.expand(user.description)
            if text.strip():
                self.persona_placement = f"preset-marker:{identifier}"
            sources = ("user:description",)
        elif identifier == "dialogueExamples":
            if "messageExample" in self.consumed:
                return
            self.consumed.add("messageExample")
            text, sources = self.examples()
        else:
            return  # markers of extensions this host does not have emit nothing
        if prompt.injection_position == 1:
            self.in_chat_add(
                prompt.injection_depth, prompt.injection_order, prompt.role, seq, text, sources
            )
        else:
            self.add(identifier, "marker", prompt.role, text, sources)

    def examples(self) -> tuple[str, tuple[str, ...]]:
        """Example dialogue with EM-positioned lore around it (docs/worldbook.md#wi-positions)."""
        character = self.request.character
        top, top_ids = self.lore_text("em_top")
        bottom, bottom_ids = self.lore_text("em_bottom")
        body = self.session.expand(character.message_example) if character else ""
        pieces = [p for p in (top, body.strip(), bottom) if p]
        sources = (
            *(f"lore:{i}" for i in top_ids),
            *(("character:messageExample",) if body.strip() else ()),
            *(f"lore:{i}" for i in bottom_ids),
        )
        return "\n".join(pieces), sources

    def unused_overrides(self) -> None:
        """A card override needs its preset slot, as in SillyTavern (a disabled main prompt
        still is one; a disabled post-history prompt is not); say so."""
        character = self.request.character
        if character is None:
            return
        if (
            character.system_prompt.strip()
            and self.request.prefer_system_prompt
            and "systemPrompt" not in self.consumed
        ):
            self.diagnostics.append(
                Diagnostic(
                    CHARACTER_SYSTEM_PROMPT_UNUSED,
                    "the preset has no main prompt: the card's system prompt is not sent",
                    "info",
                )
            )
        if (
            character.post_history_instructions.strip()
            and self.request.prefer_post_history
            and "postHistoryInstructions" not in self.consumed
        ):
            self.diagnostics.append(
                Diagnostic(
                    CHARACTER_PHI_UNUSED,
                    "the preset's post-history prompt is disabled: the card's post-history "
                    "instructions are not sent",
                    "info",
                )
            )

    def fallbacks(self) -> None:
        """Fields whose marker is missing, in SillyTavern's default order, before the chat."""
        at = self.history_at if self.history_at is not None else len(self.parts)
        character = self.request.character
        user = self.request.user
        added: list[ProfilePart] = []
        start = len(self.parts)

        def fallback(identifier: str, text: str, sources: tuple[str, ...]) -> bool:
            return self.add(identifier, "fallback", "system", text, sources)

        def lore_fallback(position: Literal["before", "after"], marker: str) -> None:
            if marker in self.consumed:
                return
            raw, ids = self.lore_text(position)
            text = _wi_format(self.wi_format, raw)
            if fallback(marker, text, tuple(f"lore:{i}" for i in ids)):
                self.diagnostics.append(
                    Diagnostic(
                        TAVERN_LORE_MARKER_FALLBACK,
                        f"the preset has no enabled {marker} marker: {position}-lore is "
                        "placed at the stable fallback position",
                        details={"marker": marker},
                    )
                )

        lore_fallback("before", "worldInfoBefore")
        if user is not None and "persona" not in self.consumed and user.description.strip():
            if fallback(
                "personaDescription", self.session.expand(user.description), ("user:description",)
            ):
                self.persona_placement = "fallback"
                self.diagnostics.append(
                    Diagnostic(
                        USER_PERSONA_MARKER_FALLBACK,
                        "the preset has no personaDescription marker or {{persona}} macro: the "
                        "user description is placed at the stable fallback position",
                    )
                )
            self.consumed.add("persona")
        if character is not None:
            for marker, name in _FIELD_MARKERS.items():
                if name in self.consumed:
                    continue
                raw = getattr(character, name)
                if name == "personality":
                    text = _field_format(self.personality_format, raw, self.session)
                elif name == "scenario":
                    text = _field_format(self.scenario_format, raw, self.session)
                else:
                    text = self.session.expand(raw)
                if fallback(marker, text, (f"character:{name}",)):
                    self.diagnostics.append(
                        Diagnostic(
                            CHARACTER_FIELD_MARKER_FALLBACK,
                            f"the preset has no enabled {marker} marker: the card's {name} is "
                            "placed at the stable fallback position",
                            details={"marker": marker},
                        )
                    )
                self.consumed.add(name)
        lore_fallback("after", "worldInfoAfter")
        if "messageExample" not in self.consumed:
            text, sources = self.examples()
            if fallback("dialogueExamples", text, sources):
                self.diagnostics.append(
                    Diagnostic(
                        CHARACTER_FIELD_MARKER_FALLBACK,
                        "the preset has no enabled dialogueExamples marker: example dialogue is "
                        "placed at the stable fallback position",
                        details={"marker": "dialogueExamples"},
                    )
                )
        added = self.parts[start:]
        del self.parts[start:]
        self.parts[at:at] = added
        if self.history_at is not None:
            self.history_at += len(added)

    def chat_start(self) -> None:
        """Greeting and in-chat prompts where the chat begins (the ``chatHistory`` marker)."""
        request = self.request
        character = request.character
        at = self.history_at if self.history_at is not None else len(self.parts)
        start = len(self.parts)
        if (
            character is not None
            and request.include_greeting
            and character.greeting.strip()
            and self.add(
                "greeting",
                "greeting",
                "assistant",
                self.session.expand(character.greeting),
                ("character:greeting",),
            )
        ):
            self.diagnostics.append(
                Diagnostic(
                    CHARACTER_GREETING_REFERENCE,
                    "the greeting is sent as system text on the first generation only; it "
                    "is not assistant history",
                    "info",
                )
            )
        # Extension prompts (docs/prompt-assembly.md#st-in-chat-order): Author's Note lore, the
        # card's depth prompt, @depth lore.
        an_top, top_ids = self.lore_text("an_top")
        an_bottom, bottom_ids = self.lore_text("an_bottom")
        authors_note = request.authors_note
        if authors_note is not None:
            # SillyTavern's floating prompt: the Author's-Note lore around the note's own text.
            own = self.session.expand(authors_note.text)
            text = "\n".join(p for p in (an_top, own, an_bottom) if p)
            lore_ids = (*top_ids, *bottom_ids)
            self.extension(
                _EXT_AUTHORS_NOTE,
                authors_note.depth,
                authors_note.role,
                text,
                ("session:authorsNote", *(f"lore:{i}" for i in lore_ids)),
            )
        elif an_top or an_bottom:
            note = "\n".join(p for p in (an_top, an_bottom) if p)
            self.extension(
                _EXT_AUTHORS_NOTE,
                _AUTHORS_NOTE_DEPTH,
                "system",
                note,
                tuple(f"lore:{i}" for i in (*top_ids, *bottom_ids)),
            )
            self.diagnostics.append(
                Diagnostic(
                    TAVERN_LORE_AUTHORS_NOTE_APPROXIMATE,
                    "lore positioned around the Author's Note is placed where SillyTavern's "
                    "default Author's Note goes (in-chat, depth 4, system)",
                    "info",
                    {"entries": len(top_ids) + len(bottom_ids)},
                )
            )
        user = self.request.user
        if user is not None and user.description_position == "atDepth":
            self.extension(
                _EXT_PERSONA_DEPTH,
                user.description_depth,
                user.description_role,
                self.session.expand(user.description),
                ("user:description",),
            )
        if character is not None and character.depth_prompt.strip():
            self.extension(
                _EXT_DEPTH_PROMPT,
                character.depth_prompt_depth,
                character.depth_prompt_role,
                self.session.expand(character.depth_prompt),
                ("character:depthPrompt",),
            )
            self.diagnostics.append(
                Diagnostic(
                    CHARACTER_DEPTH_APPROXIMATE,
                    "the card's depth prompt is system text before the chat history; its depth "
                    "and role were not executed",
                    details={
                        "depth": character.depth_prompt_depth,
                        "role": character.depth_prompt_role,
                    },
                )
            )
        joined = character.depth_prompts if character else ()
        for index, (joined_text, joined_depth, joined_role) in enumerate(joined):
            self.extension(
                f"{_EXT_DEPTH_PROMPT}_{index}",
                joined_depth,
                joined_role,
                self.session.expand(joined_text),
                ("character:depthPrompt",),
            )
        depth_groups: dict[tuple[int, str], list[LoreEntry]] = {}
        for entry in self.bucket("at_depth"):
            if entry.content.strip():
                depth_groups.setdefault((entry.depth, entry.role), []).append(entry)
        for (depth, role), entries in depth_groups.items():
            self.extension(
                f"{_EXT_WORLD_INFO}-{depth}-{role}",
                depth,
                role,
                "\n".join(e.content for e in entries),
                tuple(f"lore:{e.lore_id}" for e in entries),
            )
        # Chronological order inside the chat: deeper first, lower order first, then
        # assistant, user, system.
        groups = sorted(
            self.in_chat.values(), key=lambda g: (-g.depth, g.order, _ROLE_RANK.get(g.role, 2))
        )
        for group in groups:
            texts = list(group.texts)
            sources = list(group.sources)
            for _key, text, ext_sources in sorted(group.extensions, key=lambda x: x[0]):
                texts.append(text)
                sources.extend(ext_sources)
            self.add(
                f"in-chat:d{group.depth}:o{group.order}:{group.role}",
                "in-chat",
                group.role,
                "\n".join(texts),
                sources,
            )
        added = self.parts[start:]
        del self.parts[start:]
        self.parts[at:at] = added

    def report_in_chat(self) -> None:
        parts = [p for p in self.parts if p.kind == "in-chat"]
        if not parts:
            return
        self.diagnostics.append(
            Diagnostic(
                TAVERN_PROFILE_DEPTH_APPROXIMATE,
                f"{len(parts)} in-chat groups (depth/order/role) are system text before the chat "
                "history, in SillyTavern's chronological order; their depth and role were not "
                "executed",
                details={
                    "groups": len(parts),
                    "depths": sorted({int(p.identifier.split(":")[1][1:]) for p in parts}),
                },
            )
        )

    def user_injection(self) -> dict[str, Any]:
        user = self.request.user
        available = user is not None and bool(user.description.strip())
        return {
            "selected": user is not None,
            "descriptionAvailable": available,
            "descriptionCharacters": len(user.description) if user is not None else 0,
            "descriptionInsertions": 1 if available and self.persona_placement != "none" else 0,
            "descriptionPlacement": self.persona_placement if available else "none",
        }


def render(request: RenderRequest, lore: tuple[LoreEntry, ...] | None = None) -> Rendered:
    """Render ``request`` with ``lore`` (default: all of ``request.lore``), unbounded."""
    return _Walk(request, request.lore if lore is None else lore).run()


def render_profile(request: RenderRequest, max_bytes: int) -> ProfileOutcome:
    """Render within ``max_bytes`` UTF-8 bytes (`docs/contract/world-info.md#profile-budget`).

    If everything fits it is returned as is. Otherwise the longest prefix of the lore in rank
    order that still fits is kept (``TAVERN_PROFILE_LORE_LIMITED``); if the profile is too large
    even without lore, nothing is returned (``TAVERN_PROFILE_TOO_LARGE``). Preset text, card
    fields and the user description are never cut in the middle.
    """
    lore = tuple(sorted(request.lore, key=lambda e: e.rank))
    full = render(request, lore)
    if full.bytes <= max_bytes:
        return ProfileOutcome(full, max_bytes, False, len(lore), 0, full.diagnostics)
    static = render(request, ()) if lore else full
    if static.bytes > max_bytes:
        diagnostic = Diagnostic(
            TAVERN_PROFILE_TOO_LARGE,
            f"the Tavern profile is {static.bytes} bytes without any lore, over the "
            f"{max_bytes}-byte limit: it is not sent this turn",
            "error",
            {"actualBytes": static.bytes, "maxBytes": max_bytes},
        )
        return ProfileOutcome(None, max_bytes, True, 0, len(lore), (diagnostic,))
    low, high = 0, len(lore) - 1  # the largest fitting prefix length is in [low, high]
    best = static
    while low < high:
        middle = (low + high + 1) // 2
        attempt = render(request, lore[:middle])
        if attempt.bytes <= max_bytes:
            low, best = middle, attempt
        else:
            high = middle - 1
    if best is static and low > 0:
        best = render(request, lore[:low])
    diagnostic = Diagnostic(
        TAVERN_PROFILE_LORE_LIMITED,
        f"lore was trimmed by rank to fit the {max_bytes}-byte profile limit: "
        f"{low} of {len(lore)} entries kept",
        "warning",
        {
            "maxProfileBytes": max_bytes,
            "fullBytes": full.bytes,
            "retainedLoreEntries": low,
            "omittedLoreEntries": len(lore) - low,
            "omittedLoreIds": [e.lore_id for e in lore[low:]][:32],
        },
    )
    return ProfileOutcome(
        best, max_bytes, False, low, len(lore) - low, (*best.diagnostics, diagnostic)
    )
