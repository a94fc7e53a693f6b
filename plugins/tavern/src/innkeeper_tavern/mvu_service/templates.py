"""Templates discovered from character cards.

spec/MVU.md "Discovery, configuration and identity": "Imported cards with InitVar/schema are
initialization templates. ``characterMvuId(characterId)`` identifies the template, not editable
state." A card is a template when its embedded ``character_book`` or a world book linked to it
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

from innkeeper_tavern.formats.card import CharacterCard
from innkeeper_tavern.formats.worldbook import WorldBook, WorldBookFormatError, parse_character_book
from innkeeper_tavern.mvu import (
    InitEntry,
    MvuError,
    apply_greeting,
    descriptor_for,
    initialize_variables,
    initialize_with_schema,
    load_initvar,
)
from innkeeper_tavern.mvu.initvar import is_initvar_entry

#: Prefix of template ids (spec/MVU.md ``characterMvuId(characterId)``).
TEMPLATE_PREFIX: Final = "mvu:character:"
#: The registration call that marks a card script as a schema declaration (spec/MVU.md
#: "Schema confirmation for explicit built-in adapters").
SCHEMA_MARKER: Final = "registerMvuSchema"

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
    character_id: str
    version_key: str
    initial: dict[str, Any] | None
    greetings: tuple[str, ...]
    source_error: str | None = None


def _scripts(extensions: Mapping[str, Any]) -> list[str]:
    """Enabled card scripts that register an MVU schema (TavernHelper layouts)."""
    found: list[str] = []
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
                if isinstance(content, str) and enabled and SCHEMA_MARKER in content:
                    found.append(content)
    return found


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
    version_key = hashlib.sha256(
        _ENCODER.encode(
            [[n, [[e.comment, e.content, e.enabled] for e in entries]] for n, entries in books]
            + [scripts, list(greetings)]
        )
    ).hexdigest()
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
    return Template(template_id, card_id, version_key, initial, greetings, error)


def opening(template: Template, greeting_index: int) -> dict[str, Any]:
    """The opening variables of a new playthrough: the template's initial state with the
    selected greeting's update envelopes applied once (spec/MVU.md "Read-only opening variable
    snapshot": "Invalid paths or schema violations reject opening initialization"). Raises
    :class:`MvuError` when the template has a source error or the opening is rejected."""
    if template.initial is None:
        raise MvuError(template.source_error or "template unavailable", code="MVU_SOURCE_ERROR")
    index = greeting_index if 0 <= greeting_index < len(template.greetings) else 0
    text = template.greetings[index] if template.greetings else ""
    if not text:
        return dict(template.initial)
    result = apply_greeting(template.initial, text)
    if result.fatal is not None:
        raise result.fatal
    return result.variables


__all__ = ["TEMPLATE_PREFIX", "Template", "build_template", "character_mvu_id", "opening"]
