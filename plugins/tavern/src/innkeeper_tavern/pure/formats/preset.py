"""SillyTavern Chat Completion presets: normalize on import, overlay edits on export.

Facts from `docs/resources.md#preset-format`: a preset is one JSON object with ``prompts[]``
(definitions) and ``prompt_order[]`` (per "character" lists of ``{identifier, enabled}``). The
live list is the one whose ``character_id`` is 100001 compared as a string; without it
SillyTavern builds its default order. A prompt takes part only if its order item is enabled;
definitions missing from the live order do not take part. Built-in identifiers referenced by the
order are added with defaults when their definition is missing; order references to unknown
identifiers are dropped. Pre-prompt-manager (≤ 1.9) presets carry ``main_prompt``/
``nsfw_prompt``/``jailbreak_prompt`` instead and are migrated.

Decisions (against the original implementation, `docs/resources.md#original-decisions`):

- a prompt without ``role`` is ``system`` (as in SillyTavern), not ``user``;
- without a 100001 list the default order applies (SillyTavern), not "the list naming most prompts";
- prompts absent from the live order are disabled, whatever their own ``enabled`` says;
- ``reasoningEffort`` keeps provider-specific values
  (`docs/contract/resources.md#sampling-overrides`); SillyTavern's ``auto`` means "no override" and
  is read as ``None``.

Export (`docs/contract/resources.md#preset-export`) starts from the stored original and writes only
what differs between the current model and a fresh parse of that original: unknown top-level fields,
unknown prompt fields, other ``prompt_order`` lists, ``extensions`` (native regex included) and
untouched values stay byte-for-byte as imported. Tavern-only ``systemPromptMode`` is never written.
"""

from __future__ import annotations

import copy
import math
from typing import Any, Final, Literal

import msgspec

from .errors import FormatError, decode_json, expect_object
from .guards import StructureLimitError, check_structure
from .preset_ranges import MAX_INJECTION_DEPTH, range_problem
from .regex_script import read_regex_scripts, replace_regex_scripts

#: The import body is not a Chat Completion preset.
PRESET_INVALID: Final = "PRESET_INVALID"
#: A sampling value given in an edit is invalid.
PRESET_SAMPLING_INVALID: Final = "PRESET_SAMPLING_INVALID"

#: `docs/contract/resources.md#preset-export` / original preset store: names are trimmed to 200
#: characters.
MAX_PRESET_NAME_CHARS: Final = 200
#: Prompt names, same bound.
MAX_PROMPT_NAME_CHARS: Final = 200
#: `docs/contract/resources.md#sampling-overrides`: provider effort IDs ≤ 100
#: characters, not whitespace-only, no control characters.
MAX_REASONING_EFFORT_CHARS: Final = 100
#: Stop sequences kept per preset (as the original did: `docs/resources.md#original-data`).
MAX_STOP_SEQUENCES: Final = 16

#: The prompt manager's global dummy character id (`docs/resources.md#preset-format`).
LIVE_ORDER_CHARACTER_ID: Final = "100001"
#: ``reasoning_effort`` value meaning "do not send" in SillyTavern.
REASONING_EFFORT_AUTO: Final = "auto"
#: Common Tavern values (`docs/contract/resources.md#sampling-overrides`); any other valid
#: provider ID is kept too.
COMMON_REASONING_EFFORTS: Final = ("off", "low", "medium", "high", "xhigh", "max")

FORMAT_ST: Final = "sillytavern-chat-completion"
DEFAULT_PRESET_NAME: Final = "Imported preset"

PromptRole = Literal["system", "user", "assistant"]
_ROLES: Final = frozenset({"system", "user", "assistant"})

#: Built-in prompts: identifier → (display name, is marker).
BUILTIN_PROMPTS: Final[dict[str, tuple[str, bool]]] = {
    "main": ("Main Prompt", False),
    "nsfw": ("Auxiliary Prompt", False),
    "jailbreak": ("Post-History Instructions", False),
    "enhanceDefinitions": ("Enhance Definitions", False),
    "chatHistory": ("Chat History", True),
    "dialogueExamples": ("Chat Examples", True),
    "worldInfoBefore": ("World Info (before)", True),
    "worldInfoAfter": ("World Info (after)", True),
    "charDescription": ("Char Description", True),
    "charPersonality": ("Char Personality", True),
    "scenario": ("Scenario", True),
    "personaDescription": ("Persona Description", True),
}
#: SillyTavern's default live order (the 100001 list of its Default preset).
DEFAULT_PROMPT_ORDER: Final[tuple[tuple[str, bool], ...]] = (
    ("main", True),
    ("worldInfoBefore", True),
    ("personaDescription", True),
    ("charDescription", True),
    ("charPersonality", True),
    ("scenario", True),
    ("enhanceDefinitions", False),
    ("nsfw", True),
    ("worldInfoAfter", True),
    ("dialogueExamples", True),
    ("chatHistory", True),
    ("jailbreak", True),
)
_ENHANCE_DEFINITIONS_TEXT: Final = (
    "If you have more knowledge of {{char}}, add to the character's lore and personality to "
    "enhance them but keep the Character Sheet's definitions absolute."
)
_LEGACY_KEYS: Final = ("main_prompt", "nsfw_prompt", "jailbreak_prompt")


class PresetPrompt(msgspec.Struct, rename="camel", kw_only=True):
    """One prompt of the live order (or a disabled definition outside it).

    ``injection_position`` 0 = relative (where it sits in the order), 1 = in-chat at
    ``injection_depth`` with ``injection_order``; ``injection_trigger`` lists generation types
    (empty = all). ``system_prompt`` marks a built-in, not "sent as system".
    """

    identifier: str
    name: str
    role: PromptRole = "system"
    content: str = ""
    enabled: bool = False
    marker: bool = False
    system_prompt: bool = False
    injection_position: int = 0
    injection_depth: int = 4
    injection_order: int = 100
    injection_trigger: list[str] = msgspec.field(default_factory=list)
    forbid_overrides: bool = False


class Sampling(msgspec.Struct, rename="camel", kw_only=True):
    """Sampling fields, ``None`` = not set by the preset. ``max_tokens`` is ``openai_max_tokens``,
    ``max_context`` is ``openai_max_context``."""

    temperature: float | None = None
    max_tokens: int | None = None
    reasoning_effort: str | None = None
    stop: list[str] | None = None
    top_p: float | None = None
    top_k: float | None = None
    top_a: float | None = None
    min_p: float | None = None
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    repetition_penalty: float | None = None
    max_context: int | None = None
    seed: int | None = None
    #: ``verbosity`` (OpenAI GPT-5 text verbosity: low, medium or high).
    verbosity: str | None = None


class PresetSource(msgspec.Struct, rename="camel", kw_only=True):
    """Where the preset came from. ``raw`` is the stored original (after legacy migration)."""

    format: str = FORMAT_ST
    migrated_from: Literal["legacy-prompts"] | None = None
    selected_order_character_id: str | None = None
    raw: dict[str, Any] = msgspec.field(default_factory=dict)


class Preset(msgspec.Struct, rename="camel", kw_only=True):
    """A normalized Chat Completion preset (without the store's id and timestamps)."""

    name: str
    prompts: list[PresetPrompt]
    sampling: Sampling = msgspec.field(default_factory=Sampling)
    system_prompt_mode: Literal["append", "replace"] = "append"
    source: PresetSource = msgspec.field(default_factory=PresetSource)


# Sampling field → preset key (preset keys, not settings.json names:
# docs/resources.md#preset-format).
_SAMPLING_KEYS: Final[dict[str, str]] = {
    "temperature": "temperature",
    "max_tokens": "openai_max_tokens",
    "reasoning_effort": "reasoning_effort",
    "stop": "stop",
    "top_p": "top_p",
    "top_k": "top_k",
    "top_a": "top_a",
    "min_p": "min_p",
    "frequency_penalty": "frequency_penalty",
    "presence_penalty": "presence_penalty",
    "repetition_penalty": "repetition_penalty",
    "max_context": "openai_max_context",
    "seed": "seed",
    "verbosity": "verbosity",
}
_PROMPT_KEYS: Final[dict[str, str]] = {
    "identifier": "identifier",
    "name": "name",
    "role": "role",
    "content": "content",
    "marker": "marker",
    "system_prompt": "system_prompt",
    "injection_position": "injection_position",
    "injection_depth": "injection_depth",
    "injection_order": "injection_order",
    "injection_trigger": "injection_trigger",
    "forbid_overrides": "forbid_overrides",
}


# ---------------------------------------------------------------- value readers


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _integer(value: Any) -> int | None:
    number = _number(value)
    if number is None or not number.is_integer():
        return None
    return int(number)


def _positive_int(value: Any) -> int | None:
    number = _integer(value)
    return number if number is not None and number > 0 else None


def _clip(text: str, limit: int) -> str:
    return text.strip()[:limit].strip()


def reasoning_effort_problem(value: str) -> str | None:
    """Why ``value`` is not a storable reasoning effort, or ``None`` when it is."""
    if len(value) > MAX_REASONING_EFFORT_CHARS:
        return f"longer than {MAX_REASONING_EFFORT_CHARS} characters"
    if not value.strip():
        return "empty or whitespace-only"
    if any(ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F for ch in value):
        return "contains control characters"
    return None


def validate_reasoning_effort(value: Any) -> str | None:
    """Check an edited ``sampling.reasoningEffort``: ``None`` clears, a valid ID is kept as is.

    Raises ``FormatError(PRESET_SAMPLING_INVALID)`` for anything else.
    """
    if value is None:
        return None
    if not isinstance(value, str):
        raise FormatError(
            PRESET_SAMPLING_INVALID,
            "reasoningEffort must be a string or null",
            400,
            "$.sampling.reasoningEffort",
        )
    problem = reasoning_effort_problem(value)
    if problem is not None:
        raise FormatError(
            PRESET_SAMPLING_INVALID,
            f"reasoningEffort is {problem}",
            400,
            "$.sampling.reasoningEffort",
        )
    return value


def _reasoning_effort(value: Any) -> str | None:
    if not isinstance(value, str) or value == REASONING_EFFORT_AUTO:
        return None
    return value if reasoning_effort_problem(value) is None else None


def _stop(value: Any) -> list[str] | None:
    if not isinstance(value, list):
        return None
    return [s for s in value if isinstance(s, str) and s][:MAX_STOP_SEQUENCES]


def _parse_sampling(raw: dict[str, Any]) -> Sampling:
    max_tokens = _positive_int(raw.get("openai_max_tokens"))
    if max_tokens is None:
        max_tokens = _positive_int(raw.get("max_tokens"))
    return Sampling(
        temperature=_number(raw.get("temperature")),
        max_tokens=max_tokens,
        reasoning_effort=_reasoning_effort(raw.get("reasoning_effort")),
        stop=_stop(raw.get("stop")),
        top_p=_number(raw.get("top_p")),
        top_k=_number(raw.get("top_k")),
        top_a=_number(raw.get("top_a")),
        min_p=_number(raw.get("min_p")),
        frequency_penalty=_number(raw.get("frequency_penalty")),
        presence_penalty=_number(raw.get("presence_penalty")),
        repetition_penalty=_number(raw.get("repetition_penalty")),
        max_context=_positive_int(raw.get("openai_max_context")),
        seed=_integer(raw.get("seed")),
        verbosity=_verbosity(raw.get("verbosity")),
    )


VERBOSITY_VALUES: Final = ("low", "medium", "high")


def _verbosity(value: Any) -> str | None:
    return value if isinstance(value, str) and value in VERBOSITY_VALUES else None


def _identifier(raw_prompt: dict[str, Any], index: int) -> str:
    value = raw_prompt.get("identifier")
    text = value.strip() if isinstance(value, str) else ""
    return text or f"prompt-{index + 1}"


def _parse_prompt(raw_prompt: dict[str, Any], identifier: str, enabled: bool) -> PresetPrompt:
    name = raw_prompt.get("name")
    role = raw_prompt.get("role")
    content = raw_prompt.get("content")
    depth = _integer(raw_prompt.get("injection_depth"))
    order = _integer(raw_prompt.get("injection_order"))
    trigger = raw_prompt.get("injection_trigger")
    return PresetPrompt(
        identifier=identifier,
        name=(_clip(name, MAX_PROMPT_NAME_CHARS) if isinstance(name, str) else "") or identifier,
        role=role if isinstance(role, str) and role in _ROLES else "system",  # type: ignore[arg-type]
        content=content if isinstance(content, str) else "",
        enabled=enabled,
        marker=raw_prompt.get("marker") is True,
        system_prompt=raw_prompt.get("system_prompt") is True,
        injection_position=1 if _integer(raw_prompt.get("injection_position")) == 1 else 0,
        injection_depth=depth if depth is not None and depth >= 0 else 4,
        injection_order=order if order is not None else 100,
        injection_trigger=[t for t in trigger if isinstance(t, str)]
        if isinstance(trigger, list)
        else [],
        forbid_overrides=raw_prompt.get("forbid_overrides") is True,
    )


def _builtin_prompt(identifier: str, enabled: bool) -> PresetPrompt:
    name, marker = BUILTIN_PROMPTS[identifier]
    return PresetPrompt(
        identifier=identifier, name=name, enabled=enabled, marker=marker, system_prompt=True
    )


def _character_id(value: Any) -> str:
    # JavaScript's String(100001.0) is "100001": mirror that for whole floats.
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _live_order(raw: dict[str, Any]) -> tuple[str | None, list[tuple[str, bool]]]:
    orders = raw.get("prompt_order")
    if isinstance(orders, list):
        for entry in orders:
            if (
                isinstance(entry, dict)
                and isinstance(entry.get("order"), list)
                and _character_id(entry.get("character_id")) == LIVE_ORDER_CHARACTER_ID
            ):
                items = [
                    (item["identifier"].strip(), item.get("enabled") is True)
                    for item in entry["order"]
                    if isinstance(item, dict) and isinstance(item.get("identifier"), str)
                ]
                return LIVE_ORDER_CHARACTER_ID, items
    return None, list(DEFAULT_PROMPT_ORDER)


def _definitions(raw: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """First definition of each identifier, in file order."""
    found: dict[str, dict[str, Any]] = {}
    for index, item in enumerate(raw["prompts"]):
        if isinstance(item, dict):
            found.setdefault(_identifier(item, index), item)
    return found


def is_legacy_preset(raw: dict[str, Any]) -> bool:
    """A pre-prompt-manager (≤ 1.9) preset: no ``prompts`` but legacy prompt strings."""
    return "prompts" not in raw and any(isinstance(raw.get(k), str) for k in _LEGACY_KEYS)


def migrate_legacy_preset(raw: dict[str, Any]) -> dict[str, Any]:
    """Turn a ≤ 1.9 preset into a prompt-manager preset, keeping every original key.

    ``main``/``nsfw``/``jailbreak`` take ``main_prompt``/``nsfw_prompt``/``jailbreak_prompt``;
    ``nsfw`` is enabled by ``nsfw_toggle`` (default on) and moves before ``main`` with
    ``nsfw_first``; ``enhanceDefinitions`` is enabled by ``enhance_definitions``; ``jailbreak`` is
    enabled when it has text. The live (100001) order is SillyTavern's default order.
    """
    out = copy.deepcopy(raw)
    texts = {
        "main": raw.get("main_prompt"),
        "nsfw": raw.get("nsfw_prompt"),
        "jailbreak": raw.get("jailbreak_prompt"),
        "enhanceDefinitions": _ENHANCE_DEFINITIONS_TEXT,
    }
    prompts: list[dict[str, Any]] = []
    for identifier, (name, marker) in BUILTIN_PROMPTS.items():
        prompt: dict[str, Any] = {"identifier": identifier, "name": name, "system_prompt": True}
        if marker:
            prompt["marker"] = True
        else:
            text = texts.get(identifier)
            prompt.update(role="system", content=text if isinstance(text, str) else "")
        prompts.append(prompt)
    enabled = dict(DEFAULT_PROMPT_ORDER)
    enabled["nsfw"] = raw.get("nsfw_toggle", True) is not False
    enabled["enhanceDefinitions"] = raw.get("enhance_definitions") is True
    jailbreak = texts["jailbreak"]
    enabled["jailbreak"] = isinstance(jailbreak, str) and bool(jailbreak.strip())
    sequence = [identifier for identifier, _ in DEFAULT_PROMPT_ORDER]
    if raw.get("nsfw_first") is True:
        sequence.remove("nsfw")
        sequence.insert(sequence.index("main"), "nsfw")
    out["prompts"] = prompts
    out["prompt_order"] = [
        {
            "character_id": int(LIVE_ORDER_CHARACTER_ID),
            "order": [{"identifier": i, "enabled": enabled[i]} for i in sequence],
        }
    ]
    return out


# ---------------------------------------------------------------- import


def _normalize(raw: dict[str, Any], name: str, migrated: bool) -> Preset:
    if not isinstance(raw.get("prompts"), list):
        raise FormatError(PRESET_INVALID, "preset prompts must be an array", 400, "$.prompts")
    definitions = _definitions(raw)
    order_id, order = _live_order(raw)
    prompts: list[PresetPrompt] = []
    seen: set[str] = set()
    for identifier, enabled in order:
        if identifier in seen:
            continue
        if identifier in definitions:
            prompts.append(_parse_prompt(definitions[identifier], identifier, enabled))
        elif identifier in BUILTIN_PROMPTS:
            prompts.append(_builtin_prompt(identifier, enabled))
        else:
            continue  # SillyTavern drops order references to unknown identifiers
        seen.add(identifier)
    for identifier, definition in definitions.items():
        if identifier not in seen:
            prompts.append(_parse_prompt(definition, identifier, False))
    return Preset(
        name=name,
        prompts=prompts,
        sampling=_parse_sampling(raw),
        source=PresetSource(
            migrated_from="legacy-prompts" if migrated else None,
            selected_order_character_id=order_id,
            raw=raw,
        ),
    )


def _display_name(name: str | None, raw: dict[str, Any]) -> str:
    for candidate in (name, raw.get("name")):
        if isinstance(candidate, str) and candidate.strip():
            return _clip(candidate, MAX_PRESET_NAME_CHARS)
    return DEFAULT_PRESET_NAME


def parse_preset(raw: Any, *, name: str | None = None) -> Preset:
    """Normalize a decoded SillyTavern Chat Completion preset (a JSON object).

    ``name`` (e.g. from the file name or the import body) wins over the preset's own ``name``.
    A legacy preset is migrated first (``source.migratedFrom == "legacy-prompts"``). Raises
    ``FormatError``: ``PRESET_INVALID`` (400) when the object has neither ``prompts`` nor legacy
    prompt strings, or ``prompts`` is not an array; structure-guard codes (400/413).
    """
    doc = expect_object(raw, PRESET_INVALID, "preset")
    try:
        check_structure(doc)
    except StructureLimitError as exc:
        raise FormatError.from_structure(exc) from None
    migrated = is_legacy_preset(doc)
    if migrated:
        doc = migrate_legacy_preset(doc)
    elif "prompts" not in doc:
        raise FormatError(
            PRESET_INVALID,
            "not a Chat Completion preset: no prompts array and no legacy main_prompt",
            400,
            "$.prompts",
        )
    else:
        doc = copy.deepcopy(doc)
    return _normalize(doc, _display_name(name, doc), migrated)


def parse_preset_json(data: bytes | str, *, name: str | None = None) -> Preset:
    """:func:`parse_preset` on JSON text (``POST /import`` sends ``{content: "<json>"}``)."""
    return parse_preset(decode_json(data, what="preset"), name=name)


def blank_preset(name: str) -> Preset:
    """A new preset as SillyTavern would create it: built-ins, default order, temperature 1."""
    raw: dict[str, Any] = {
        "temperature": 1,
        "prompts": [
            {"identifier": i, "name": n, "system_prompt": True, "marker": True}
            if marker
            else {
                "identifier": i,
                "name": n,
                "system_prompt": True,
                "role": "system",
                "content": "",
            }
            for i, (n, marker) in BUILTIN_PROMPTS.items()
        ],
        "prompt_order": [
            {
                "character_id": int(LIVE_ORDER_CHARACTER_ID),
                "order": [{"identifier": i, "enabled": e} for i, e in DEFAULT_PROMPT_ORDER],
            }
        ],
    }
    return _normalize(raw, _clip(name, MAX_PRESET_NAME_CHARS) or DEFAULT_PRESET_NAME, False)


# ---------------------------------------------------------------- export


def _json_number(value: float | int) -> float | int:
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _overlay_sampling(out: dict[str, Any], current: Sampling, base: Sampling) -> None:
    for field_name, key in _SAMPLING_KEYS.items():
        value = getattr(current, field_name)
        if value == getattr(base, field_name):
            continue
        if field_name == "reasoning_effort":
            # SillyTavern keeps its current setting when the key is missing: "auto" clears it.
            out[key] = REASONING_EFFORT_AUTO if value is None else value
        elif value is None:
            out.pop(key, None)
        elif isinstance(value, list):
            out[key] = list(value)
        else:
            out[key] = _json_number(value)
        if field_name == "max_tokens":
            out.pop("max_tokens", None)


def _prompt_dict(prompt: PresetPrompt) -> dict[str, Any]:
    out = {key: copy.deepcopy(getattr(prompt, f)) for f, key in _PROMPT_KEYS.items()}
    out["enabled"] = prompt.enabled
    return out


def _overlay_prompt(raw_prompt: dict[str, Any], current: PresetPrompt, base: PresetPrompt) -> Any:
    out = copy.deepcopy(raw_prompt)
    for field_name, key in _PROMPT_KEYS.items():
        value = getattr(current, field_name)
        if value != getattr(base, field_name):
            out[key] = copy.deepcopy(value)
    if current.enabled != base.enabled and "enabled" in raw_prompt:
        out["enabled"] = current.enabled
    return out


def _overlay_prompts(out: dict[str, Any], preset: Preset, base: Preset) -> None:
    current = {p.identifier: p for p in preset.prompts}
    based = {p.identifier: p for p in base.prompts}
    written: set[str] = set()
    prompts: list[Any] = []
    raw_prompts = out.get("prompts")
    for index, item in enumerate(raw_prompts if isinstance(raw_prompts, list) else []):
        if not isinstance(item, dict):
            prompts.append(item)
            continue
        identifier = _identifier(item, index)
        if identifier not in current:
            continue  # deleted
        if identifier in written:
            prompts.append(item)  # an ignored duplicate definition: keep it as it was
            continue
        overlaid = _overlay_prompt(item, current[identifier], based[identifier])
        if overlaid.get("identifier") != identifier:
            overlaid["identifier"] = identifier
        prompts.append(overlaid)
        written.add(identifier)
    for prompt in preset.prompts:
        if prompt.identifier in written:
            continue
        if based.get(prompt.identifier) == prompt:
            continue  # a built-in SillyTavern adds by itself, untouched
        prompts.append(_prompt_dict(prompt))
    out["prompts"] = prompts


def _overlay_order(out: dict[str, Any], preset: Preset, base: Preset) -> None:
    sequence = [(p.identifier, p.enabled) for p in preset.prompts]
    if sequence == [(p.identifier, p.enabled) for p in base.prompts]:
        return
    target = preset.source.selected_order_character_id or LIVE_ORDER_CHARACTER_ID
    orders = out.get("prompt_order")
    if not isinstance(orders, list):
        orders = []
        out["prompt_order"] = orders
    entry = next(
        (
            o
            for o in orders
            if isinstance(o, dict) and _character_id(o.get("character_id")) == target
        ),
        None,
    )
    if entry is None:
        entry = {"character_id": int(LIVE_ORDER_CHARACTER_ID)}
        orders.append(entry)
    old_order = entry.get("order")
    old_items = {
        item.get("identifier"): item
        for item in (old_order if isinstance(old_order, list) else [])
        if isinstance(item, dict)
    }
    entry["order"] = [
        {**old_items.get(identifier, {}), "identifier": identifier, "enabled": enabled}
        for identifier, enabled in sequence
    ]


def export_preset(preset: Preset) -> dict[str, Any]:
    """The SillyTavern JSON of ``preset``: its stored original with current edits overlaid.

    Sets ``name``; writes each sampling value, prompt field, prompt enablement and the live order
    only where the current model differs from a fresh parse of the original. A sampling value
    cleared to ``None`` removes its key (``reasoning_effort`` becomes ``"auto"``).
    """
    raw = preset.source.raw
    out = copy.deepcopy(raw)
    base = (
        _normalize(raw, preset.name, False)
        if isinstance(raw.get("prompts"), list)
        else Preset(name=preset.name, prompts=[])
    )
    out["name"] = preset.name
    _overlay_sampling(out, preset.sampling, base.sampling)
    _overlay_prompts(out, preset, base)
    _overlay_order(out, preset, base)
    return out


def export_preset_json(preset: Preset) -> bytes:
    """:func:`export_preset` as pretty UTF-8 JSON (2-space indent, trailing newline)."""
    return msgspec.json.format(msgspec.json.encode(export_preset(preset)), indent=2) + b"\n"


# ---------------------------------------------------------------- native regex


def preset_regex_scripts(preset: Preset) -> list[dict[str, Any]]:
    """The preset's native regex scripts (``extensions.regex_scripts`` or where they live)."""
    return read_regex_scripts(preset.source.raw, "preset")


def with_preset_regex_scripts(preset: Preset, scripts: list[dict[str, Any]]) -> Preset:
    """A copy of ``preset`` whose original carries ``scripts`` (full ordered replace)."""
    raw = replace_regex_scripts(preset.source.raw, scripts, "preset")
    return msgspec.structs.replace(preset, source=msgspec.structs.replace(preset.source, raw=raw))


# ---------------------------------------------------------------- edits (PUT /presets/:id)

#: Keys a preset edit may change.
_EDIT_KEYS: Final = frozenset({"name", "systemPromptMode", "sampling", "prompts"})
#: Keys of a preset document that are read-only: sent back by clients, ignored.
_READ_ONLY_KEYS: Final = frozenset(
    {"id", "createdAt", "updatedAt", "source", "schemaVersion", "revision"}
)
_SAMPLING_WIRE: Final[dict[str, str]] = {
    "temperature": "temperature",
    "maxTokens": "max_tokens",
    "reasoningEffort": "reasoning_effort",
    "stop": "stop",
    "topP": "top_p",
    "topK": "top_k",
    "topA": "top_a",
    "minP": "min_p",
    "frequencyPenalty": "frequency_penalty",
    "presencePenalty": "presence_penalty",
    "repetitionPenalty": "repetition_penalty",
    "maxContext": "max_context",
    "seed": "seed",
    "verbosity": "verbosity",
}


def _edit_error(message: str, path: str) -> FormatError:
    return FormatError(PRESET_INVALID, message, 400, path)


def _sampling_value(wire: str, value: Any) -> Any:
    path = f"$.sampling.{wire}"
    if value is None:
        return None
    if wire == "reasoningEffort":
        return validate_reasoning_effort(value)
    if wire == "verbosity":
        if value not in VERBOSITY_VALUES:
            raise FormatError(
                PRESET_SAMPLING_INVALID, "verbosity must be low, medium, high or null", 400, path
            )
        return value
    if wire == "stop":
        if not isinstance(value, list) or not all(isinstance(s, str) and s for s in value):
            raise FormatError(
                PRESET_SAMPLING_INVALID, "stop must be an array of non-empty strings", 400, path
            )
        if len(value) > MAX_STOP_SEQUENCES:
            raise FormatError(
                PRESET_SAMPLING_INVALID, f"at most {MAX_STOP_SEQUENCES} stop sequences", 400, path
            )
        return list(value)
    if wire in ("maxTokens", "maxContext"):
        number: float | int | None = _positive_int(value)
        kind = "a positive integer"
    elif wire == "seed":
        number = _integer(value)
        kind = "an integer"
    else:
        number = _number(value)
        kind = "a finite number"
    if number is None:
        raise FormatError(PRESET_SAMPLING_INVALID, f"{wire} must be {kind} or null", 400, path)
    problem = range_problem(wire, number)
    if problem is not None:
        raise FormatError(PRESET_SAMPLING_INVALID, problem, 400, path)
    return number


def _edited_sampling(current: Sampling, patch: Any) -> Sampling:
    if not isinstance(patch, dict):
        raise _edit_error("sampling must be an object", "$.sampling")
    changes: dict[str, Any] = {}
    for wire, value in patch.items():
        if wire not in _SAMPLING_WIRE:
            raise _edit_error(f"unknown sampling field {wire!r}", f"$.sampling.{wire}")
        changes[_SAMPLING_WIRE[wire]] = _sampling_value(wire, value)
    return msgspec.structs.replace(current, **changes)


def _edited_prompts(value: Any) -> list[PresetPrompt]:
    if not isinstance(value, list):
        raise _edit_error("prompts must be an array", "$.prompts")
    prompts: list[PresetPrompt] = []
    seen: set[str] = set()
    for index, item in enumerate(value):
        path = f"$.prompts[{index}]"
        try:
            prompt = msgspec.convert(item, PresetPrompt)
        except msgspec.ValidationError as exc:
            raise _edit_error(f"invalid prompt: {exc}", path) from None
        identifier = prompt.identifier.strip()
        if not identifier or identifier in seen:
            raise _edit_error("prompt identifiers must be non-empty and unique", path)
        name = _clip(prompt.name, MAX_PROMPT_NAME_CHARS) or identifier
        if prompt.injection_position not in (0, 1):
            raise _edit_error("injectionPosition must be 0 or 1", f"{path}.injectionPosition")
        if not 0 <= prompt.injection_depth <= MAX_INJECTION_DEPTH:
            raise _edit_error(
                f"injectionDepth must be 0 to {MAX_INJECTION_DEPTH}", f"{path}.injectionDepth"
            )
        seen.add(identifier)
        prompts.append(msgspec.structs.replace(prompt, identifier=identifier, name=name))
    return prompts


def edit_preset(preset: Preset, patch: Any) -> Preset:
    """Apply a ``PUT /presets/:id`` body to ``preset`` and return the edited copy.

    ``name`` (non-empty), ``systemPromptMode`` (``append``/``replace``), ``sampling`` (a partial
    object: omitted fields keep their value, ``null`` clears one —
    `docs/contract/resources.md#sampling-overrides`) and ``prompts`` (the full ordered list, each in
    the wire shape of :class:`PresetPrompt`). Read-only document keys (``id``, timestamps,
    ``source``) are ignored; any other key is rejected. Raises ``FormatError`` (``PRESET_INVALID``
    or ``PRESET_SAMPLING_INVALID``, 400) and leaves ``preset`` unchanged.
    """
    if not isinstance(patch, dict):
        raise _edit_error("preset edit must be a JSON object", "$")
    for key in patch:
        if key not in _EDIT_KEYS and key not in _READ_ONLY_KEYS:
            raise _edit_error(f"unknown field {key!r}", f"$.{key}")
    changes: dict[str, Any] = {}
    if "name" in patch:
        name = patch["name"]
        if not isinstance(name, str) or not name.strip():
            raise _edit_error("name must be a non-empty string", "$.name")
        changes["name"] = _clip(name, MAX_PRESET_NAME_CHARS)
    if "systemPromptMode" in patch:
        if patch["systemPromptMode"] not in ("append", "replace"):
            raise _edit_error("systemPromptMode must be append or replace", "$.systemPromptMode")
        changes["system_prompt_mode"] = patch["systemPromptMode"]
    if "sampling" in patch:
        changes["sampling"] = _edited_sampling(preset.sampling, patch["sampling"])
    if "prompts" in patch:
        changes["prompts"] = _edited_prompts(patch["prompts"])
    return msgspec.structs.replace(preset, **changes)
