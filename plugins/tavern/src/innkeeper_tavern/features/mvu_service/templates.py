"""Templates discovered from character cards.

docs/contract/mvu.md#identity: a card with ``[initvar]`` entries or a schema is an
initialization template, identified by ``characterMvuId(characterId)``, never editable state. A
card is a template when its embedded ``character_book`` or a world book linked to it
holds `[initvar]` entries, or its card data declares an MVU schema (a card script calling
``registerMvuSchema``). Discovery only reads: it never executes card scripts and never grants
access. "Parsing errors remain visible as ``sourceError`` and prevent execution."

Everything here is pure and blocking (the service runs it in a thread).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from innkeeper_tavern.features.mvu_vm import Declaration
from innkeeper_tavern.features.mvu_vm.vm import MAX_SOURCE_UNITS, utf16_units
from innkeeper_tavern.pure.formats.card import CharacterCard
from innkeeper_tavern.pure.formats.worldbook import (
    WorldBook,
    WorldBookFormatError,
    parse_character_book,
)
from innkeeper_tavern.pure.mvu import (
    Budget,
    InitEntry,
    MvuError,
    apply_greeting,
    descriptor_for,
    initialize_variables,
    initialize_with_schema,
    load_initvar,
)
from innkeeper_tavern.pure.mvu.initvar import is_initvar_entry
from innkeeper_tavern.pure.mvu.textparse import ParseError, parse_string

#: Prefix of template ids, ``characterMvuId(characterId)`` (docs/contract/mvu.md#identity).
TEMPLATE_PREFIX: Final = "mvu:character:"
#: The registration call that marks a card script as a schema declaration
#: (docs/contract/mvu-dsl.md#schema-confirmation).
SCHEMA_MARKER: Final = "registerMvuSchema"
#: What a command-processor declaration registers (docs/contract/mvu-vm.md#command-processors).
PROCESSOR_MARKER: Final = "COMMAND_PARSED"
INITIALIZED_MARKERS: Final = ("global_Mvu_initialized", "waitGlobalInitialized")

_ENCODER: Final = msgspec.json.Encoder(order="sorted")


def character_mvu_id(character_id: str) -> str:
    """``characterMvuId(characterId)``: the template id of a card."""
    return TEMPLATE_PREFIX + character_id


@dataclass(frozen=True, slots=True)
class Template:
    """A card's initialization template.

    ``initial`` is the variables object before any greeting (``None`` with ``source_error``);
    ``version_key`` digests every input, so a changed card source is visible.
    """

    id: str
    character_id: str | None
    version_key: str
    initial: dict[str, Any] | None
    greetings: tuple[str, ...]
    source_error: str | None = None
    #: A configured ``sharing:'shared'`` resource: one state, its configured id, for every
    #: matching session (docs/contract/mvu.md#identity).
    shared: bool = False
    #: The stored preference a new template starts with (configured resources may say).
    management_mode: str = "native"
    #: The card's enabled command-processor declaration (run in
    #: :mod:`innkeeper_tavern.features.mvu_vm`).
    processor: Declaration | None = None
    #: Why the card's declarations cannot run (``MVU_PROCESSOR_CONFLICT``: more than one).
    processor_error: str | None = None


def _enabled_scripts(extensions: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(name, content)`` of the card's enabled scripts (TavernHelper layouts), in order."""
    found: list[tuple[str, str]] = []
    containers: list[Any] = []
    helper = extensions.get("tavern_helper")
    if isinstance(helper, dict):
        containers.append(helper.get("scripts"))
    elif isinstance(helper, list):
        containers.append(helper)
    containers.append(extensions.get("TavernHelper_scripts"))
    for container in containers:
        if not isinstance(container, list):
            continue
        for script in container:
            if isinstance(script, dict):
                content = script.get("content")
                enabled = script.get("enabled", True) is not False
                if isinstance(content, str) and enabled:
                    name = script.get("name") or script.get("id") or str(len(found))
                    found.append((str(name), content))
    return found


def _scripts(extensions: Mapping[str, Any]) -> list[str]:
    """Enabled card scripts that register an MVU schema."""
    return [content for _, content in _enabled_scripts(extensions) if SCHEMA_MARKER in content]


def is_processor_declaration(content: str) -> bool:
    """Whether a card script declares a command processor
    (docs/contract/mvu-vm.md#command-processors: it registers ``global_Mvu_initialized`` and
    ``Mvu.events.COMMAND_PARSED``; ``waitGlobalInitialized('Mvu')`` waits for that event)."""
    initialized = any(marker in content for marker in INITIALIZED_MARKERS)
    return initialized and PROCESSOR_MARKER in content


def _processor(
    card_id: str, extensions: Mapping[str, Any]
) -> tuple[Declaration | None, str | None]:
    """The card's one processor declaration, or the reason there is none usable."""
    found = {
        content: name
        for name, content in _enabled_scripts(extensions)
        if is_processor_declaration(content)
    }
    if not found:
        return None, None
    if len(found) > 1:
        return None, "MVU_PROCESSOR_CONFLICT"
    ((content, name),) = found.items()
    if utf16_units(content) > MAX_SOURCE_UNITS:
        return None, "MVU_PROCESSOR_INVALID"
    return Declaration(f"character:{card_id}/script:{name}", content), None


def _entries(book: WorldBook) -> list[InitEntry]:
    return [InitEntry(e.comment, e.content, not e.disable) for e in book.entries]


def build_template(
    card_id: str, card: CharacterCard, linked: Sequence[tuple[str, WorldBook]]
) -> Template | None:
    """The template of ``card`` (with its linked standalone books), or ``None`` when the card
    carries no MVU data. Blocking; never raises for bad card data (``source_error``)."""
    books: list[tuple[str, list[InitEntry]]] = []
    error: str | None = None
    raw_book = card.data.character_book
    if isinstance(raw_book, dict):
        try:
            embedded = parse_character_book(raw_book)
            books.append((embedded.name or card.name or card_id, _entries(embedded)))
        except WorldBookFormatError as exc:
            error = f"embedded world book: {exc}"
    for name, book in linked:
        books.append((name, _entries(book)))
    has_initvar = any(is_initvar_entry(e) for _, entries in books for e in entries)
    scripts = _scripts(card.data.extensions)
    if not has_initvar and not scripts:
        return None
    greetings = (card.data.first_message, *card.data.alternate_greetings)
    processor, processor_error = _processor(card_id, card.data.extensions)
    keyed: list[Any] = [
        [n, [[e.comment, e.content, e.enabled] for e in entries]] for n, entries in books
    ]
    keyed += [scripts, list(greetings)]
    if processor is not None or processor_error is not None:
        # Only cards with a declaration key it (the keys of other cards stay as they were).
        keyed.append([processor.sha256 if processor else None, processor_error])
    version_key = hashlib.sha256(_ENCODER.encode(keyed)).hexdigest()
    template_id = character_mvu_id(card_id)
    if error is None and len(set(scripts)) > 1:
        error = "the card declares more than one MVU schema"
    initial: dict[str, Any] | None = None
    if error is None:
        try:
            loaded = load_initvar(books)
            if scripts:
                initial = initialize_with_schema(loaded.stat_data, descriptor_for(scripts[0]))
                initial["initialized_lorebooks"] = loaded.initialized_lorebooks
            else:
                initial = initialize_variables(
                    loaded.stat_data, initialized_lorebooks=loaded.initialized_lorebooks
                )
        except MvuError as exc:
            error = f"{exc.code}: {exc.message}"
    return Template(
        template_id,
        card_id,
        version_key,
        initial,
        greetings,
        error,
        processor=processor,
        processor_error=processor_error,
    )


def opening(template: Template, greeting_index: int) -> dict[str, Any]:
    """The opening variables of a new playthrough: the template's initial state with the
    selected greeting's update envelopes applied once; an invalid path or a schema violation
    refuses the opening (docs/contract/mvu-cards.md#opening-snapshot). Raises :class:`MvuError`
    when the template has a source error or the opening is rejected."""
    if template.initial is None:
        raise MvuError(template.source_error or "template unavailable", code="MVU_SOURCE_ERROR")
    index = greeting_index if 0 <= greeting_index < len(template.greetings) else 0
    text = template.greetings[index] if template.greetings else ""
    if not text:
        return dict(template.initial)
    result = apply_greeting(template.initial, text, mathjs=True)  # a new instance: version 3
    if result.fatal is not None:
        raise result.fatal
    return result.variables


#: Keys of one explicit resource (docs/contract/mvu.md#identity).
EXPLICIT_KEYS: Final = frozenset(
    {"id", "sessionIds", "initial", "characterId", "managementMode", "sharing"}
)
#: Explicit resources accepted from the configuration.
MAX_EXPLICIT_RESOURCES: Final = 256
#: Characters of a configured resource id.
MAX_EXPLICIT_ID_CHARS: Final = 200
_RESERVED_PREFIXES: Final = ("mvu:instance-", TEMPLATE_PREFIX)


@dataclass(frozen=True, slots=True)
class ExplicitResource:
    """One ``mvu.resources[]`` entry of the host configuration.

    ``session_ids`` lists the sessions it applies to (``('*',)``: every session, each with its
    own instance unless ``shared``); ``initial`` is the whole variables object (``stat_data``
    and the rest) or ``None`` with ``character_id`` (the card's `[initvar]` entries).
    """

    id: str
    session_ids: tuple[str, ...]
    initial: dict[str, Any] | None
    character_id: str | None
    management_mode: str
    shared: bool

    def matches(self, session_id: str) -> bool:
        """Whether this resource applies to ``session_id``."""
        return "*" in self.session_ids or session_id in self.session_ids


def parse_explicit(config: Any) -> list[ExplicitResource]:
    """Validate ``{resources: [...]}`` (``[plugins.tavern] mvu``). Raises ``ValueError``
    naming the entry: a bad configuration fails setup instead of silently dropping state."""
    if config is None:
        return []
    if not isinstance(config, Mapping) or set(config) - {"resources"}:
        raise ValueError("mvu configuration must be {resources = [...]}")
    raw = config.get("resources", [])
    if not isinstance(raw, list) or len(raw) > MAX_EXPLICIT_RESOURCES:
        raise ValueError(f"mvu.resources must be a list of at most {MAX_EXPLICIT_RESOURCES}")
    out: list[ExplicitResource] = []
    seen: set[str] = set()
    for index, item in enumerate(raw):
        where = f"mvu.resources[{index}]"
        if not isinstance(item, Mapping) or set(item) - EXPLICIT_KEYS:
            raise ValueError(f"{where} must be an object with {sorted(EXPLICIT_KEYS)}")
        rid = item.get("id")
        if not isinstance(rid, str) or not 0 < len(rid) <= MAX_EXPLICIT_ID_CHARS:
            raise ValueError(f"{where}.id must be 1-{MAX_EXPLICIT_ID_CHARS} characters")
        if rid.startswith(_RESERVED_PREFIXES) or rid in seen:
            raise ValueError(f"{where}.id {rid!r} is reserved or repeated")
        seen.add(rid)
        sessions = item.get("sessionIds")
        if (
            not isinstance(sessions, list)
            or not sessions
            or not all(isinstance(s, str) and s for s in sessions)
        ):
            raise ValueError(f"{where}.sessionIds must be a non-empty list of session ids")
        initial = item.get("initial")
        if isinstance(initial, str):
            try:
                initial = parse_string(initial, Budget())
            except (ParseError, MvuError) as exc:
                raise ValueError(f"{where}.initial is not YAML/JSON5: {exc}") from None
        character_id = item.get("characterId")
        if character_id is not None and not isinstance(character_id, str):
            raise ValueError(f"{where}.characterId must be a string")
        if initial is None and character_id is None:
            raise ValueError(f"{where} needs initial or characterId")
        if initial is not None and (
            not isinstance(initial, dict) or not isinstance(initial.get("stat_data"), dict)
        ):
            raise ValueError(f"{where}.initial must be a variables object with stat_data")
        mode = item.get("managementMode", "native")
        if mode not in ("native", "managed"):
            raise ValueError(f"{where}.managementMode must be native or managed")
        sharing = item.get("sharing")
        if sharing not in (None, "shared"):
            raise ValueError(f"{where}.sharing must be 'shared' when set")
        out.append(
            ExplicitResource(
                id=rid,
                session_ids=tuple(sessions),
                initial=initial,
                character_id=character_id,
                management_mode=mode,
                shared=sharing == "shared",
            )
        )
    return out


def explicit_template(resource: ExplicitResource, card: Template | None) -> Template:
    """The template of an explicit resource (``card``: its ``characterId``'s template)."""
    version_key = hashlib.sha256(
        _ENCODER.encode(
            [
                resource.id,
                resource.initial,
                resource.character_id,
                card.version_key if card else None,
            ]
        )
    ).hexdigest()
    greetings = card.greetings if card is not None else ()
    mode = resource.management_mode
    if resource.initial is None:
        if card is None:
            return Template(
                resource.id,
                resource.character_id,
                version_key,
                None,
                greetings,
                "the configured characterId has no MVU data",
                resource.shared,
                mode,
            )
        return Template(
            resource.id,
            resource.character_id,
            version_key,
            card.initial,
            greetings,
            card.source_error,
            resource.shared,
            mode,
        )
    try:
        stat = resource.initial["stat_data"]
        variables = initialize_variables(stat)
        extra = {k: v for k, v in resource.initial.items() if k not in variables}
        initial: dict[str, Any] | None = {**variables, **extra}
        error = None
    except MvuError as exc:
        initial, error = None, f"{exc.code}: {exc.message}"
    return Template(
        resource.id,
        resource.character_id,
        version_key,
        initial,
        greetings,
        error,
        resource.shared,
        mode,
    )


__all__ = [
    "TEMPLATE_PREFIX",
    "ExplicitResource",
    "Template",
    "build_template",
    "character_mvu_id",
    "explicit_template",
    "opening",
    "parse_explicit",
]
