"""Character cards V1, V2 and V3 (JSON or PNG), normalized on import and overlaid on export.

Formats (`docs/resources.md#card-formats`): V1 is a flat object (``name``, ``description``, …;
Pygmalion/Gradio files use ``char_name``/``char_persona``/…); V2 and V3 wrap the fields in
``data`` under ``spec``/``spec_version``. SillyTavern stores a V1/V2 hybrid: the spec object plus V1
mirror fields at the top level; ``data`` wins when both exist. PNG cards carry the JSON in ``tEXt``
chunks (:mod:`.png`): ``ccv3`` wins over ``chara``; on export both are written, ``chara`` with spec
V2 and ``ccv3`` with spec V3, as SillyTavern's writer does.

Unknown fields are kept losslessly: ``source.raw`` is the whole original, and export writes only
the normalized fields that differ from a fresh parse of it (mirroring them into existing V1
top-level fields of a hybrid). The embedded ``character_book`` is kept as the original object:
raw import only checks that it is an object (`docs/contract/world-info.md#embedded-books`);
:func:`card_world_book` parses it for the loader and fails closed with
``EMBEDDED_WORLD_BOOK_INVALID``; :func:`with_character_book` guards and parses before replacing it.

Decisions: a V1 card exported as PNG becomes a V2/V3 hybrid (V1 has no ``ccv3`` form; this is what
SillyTavern does to V1 cards it imports). If the ``ccv3`` chunk cannot be decoded but ``chara``
can, the card is read from ``chara`` with a warning instead of failing.
"""

from __future__ import annotations

import copy
import hashlib
import re
from typing import Any, Final, Literal

import msgspec

from .errors import FormatError, decode_json
from .guards import MAX_DEPTH, StructureLimitError, StructureLimits
from .png import CCV3, CHARA, check_file_size, is_png, read_card_text, write_card_chunks
from .regex_script import read_regex_scripts, regex_scripts_path, replace_regex_scripts
from .worldbook import WorldBook, WorldBookFormatError, parse_character_book

#: The document is not a character card (or a field has the wrong type).
CHARACTER_CARD_INVALID: Final = "CHARACTER_CARD_INVALID"
#: The card's embedded ``character_book`` cannot be normalized
#: (`docs/contract/world-info.md#embedded-books`).
EMBEDDED_WORLD_BOOK_INVALID: Final = "EMBEDDED_WORLD_BOOK_INVALID"

#: Display names are trimmed to 200 characters (as preset and user names).
MAX_CARD_NAME_CHARS: Final = 200
#: The structure guard of a whole card document (JSON file, PNG chunk, ``PATCH …/world-book``
#: body). Its embedded book gets the spec's own guard (depth 32 from the book, 64-bit integers)
#: when it is normalized, so the card level only bounds what Python walks: the book sits three
#: levels down, a 32 MiB file may hold a large book, and an integer too big for a world-book field
#: still imports with warning ``embedded-world-book-invalid`` (it only has to print as a string).
CARD_LIMITS: Final = StructureLimits(
    max_depth=2 * MAX_DEPTH, max_nodes=2_000_000, max_int_abs=10**4000
)
DEFAULT_CARD_NAME: Final = "Imported character"

FORMAT_V1: Final = "sillytavern-v1"
FORMAT_V2: Final = "sillytavern-v2"
FORMAT_V3: Final = "character-card-v3"
CardFormat = Literal["sillytavern-v1", "sillytavern-v2", "character-card-v3"]

SPEC_V2: Final = ("chara_card_v2", "2.0")
SPEC_V3: Final = ("chara_card_v3", "3.0")

# Warning codes.
WARN_MISSING_NAME: Final = "missing-name"
WARN_NEWER_V3: Final = "newer-v3-version"
WARN_V3_IN_CHARA: Final = "v3-in-legacy-chunk"
WARN_PNG_BOTH: Final = "png-v3-precedence"
WARN_CCV3_UNREADABLE: Final = "png-ccv3-unreadable"
WARN_BOOK_INVALID: Final = "embedded-world-book-invalid"
WARN_UNKNOWN_SPEC: Final = "unknown-spec"


class CardData(msgspec.Struct, rename="camel", kw_only=True):
    """The card fields, camelCase on the wire. ``character_book`` is the original object."""

    name: str = ""
    nickname: str = ""
    description: str = ""
    personality: str = ""
    scenario: str = ""
    first_message: str = ""
    message_example: str = ""
    creator_notes: str = ""
    system_prompt: str = ""
    post_history_instructions: str = ""
    alternate_greetings: list[str] = msgspec.field(default_factory=list)
    group_only_greetings: list[str] = msgspec.field(default_factory=list)
    tags: list[str] = msgspec.field(default_factory=list)
    creator: str = ""
    character_version: str = ""
    character_book: dict[str, Any] | None = None
    assets: list[Any] = msgspec.field(default_factory=list)
    extensions: dict[str, Any] = msgspec.field(default_factory=dict)


class CardSource(msgspec.Struct, rename="camel", kw_only=True):
    """Where the card came from; ``raw`` is the whole original JSON object."""

    format: CardFormat
    spec_version: str | None = None
    container: Literal["json", "png"] = "json"
    png_keyword: str | None = None
    sha256: str | None = None
    byte_length: int | None = None
    raw: dict[str, Any] = msgspec.field(default_factory=dict)


class CharacterCard(msgspec.Struct, rename="camel", kw_only=True):
    """A normalized character card (without the store's id and timestamps)."""

    name: str
    data: CardData
    source: CardSource
    warnings: list[str] = msgspec.field(default_factory=list)


# Field table: attribute, V2 key, kind, V1 keys (read: first present; write: first present or the
# first listed).
_FIELDS: Final[tuple[tuple[str, str, str, tuple[str, ...]], ...]] = (
    ("name", "name", "str", ("name", "char_name")),
    ("nickname", "nickname", "str", ("nickname",)),
    ("description", "description", "str", ("description", "char_persona")),
    ("personality", "personality", "str", ("personality",)),
    ("scenario", "scenario", "str", ("scenario", "world_scenario")),
    ("first_message", "first_mes", "str", ("first_mes", "char_greeting")),
    ("message_example", "mes_example", "str", ("mes_example", "example_dialogue")),
    ("creator_notes", "creator_notes", "str", ("creatorcomment", "creator_notes")),
    ("system_prompt", "system_prompt", "str", ("system_prompt",)),
    (
        "post_history_instructions",
        "post_history_instructions",
        "str",
        ("post_history_instructions",),
    ),
    ("alternate_greetings", "alternate_greetings", "strs", ("alternate_greetings",)),
    ("group_only_greetings", "group_only_greetings", "strs", ("group_only_greetings",)),
    ("tags", "tags", "strs", ("tags",)),
    ("creator", "creator", "str", ("creator",)),
    ("character_version", "character_version", "str", ("character_version",)),
    ("character_book", "character_book", "book", ("character_book",)),
    ("assets", "assets", "list", ("assets",)),
    ("extensions", "extensions", "object", ("extensions",)),
)
# V1 top-level fields SillyTavern mirrors in its stored hybrid (only written if already present).
_MIRRORS: Final[dict[str, tuple[str, ...]]] = {
    "name": ("name",),
    "description": ("description",),
    "personality": ("personality",),
    "scenario": ("scenario",),
    "first_mes": ("first_mes",),
    "mes_example": ("mes_example",),
    "creator_notes": ("creatorcomment",),
    "tags": ("tags",),
}
_MIRRORED_EXTENSIONS: Final = ("talkativeness", "fav")
_V3_VERSION: Final = re.compile(r"^3(\.|$)")
_V2_VERSION: Final = re.compile(r"^2(\.|$)")
_V30_VERSION: Final = re.compile(r"^3\.0(\.|$)")


def _invalid(message: str, path: str) -> FormatError:
    return FormatError(CHARACTER_CARD_INVALID, message, 400, path)


def _js_string(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _convert(kind: str, value: Any, path: str) -> Any:
    """One field value, typed; ``None`` and absence give the default."""
    if kind == "str":
        if value is None:
            return ""
        if isinstance(value, str):
            return value
        if isinstance(value, int | float) and not isinstance(value, bool):
            return _js_string(value)  # "character_version": 1.2 occurs in the wild
        raise _invalid("must be a string", path)
    if kind == "strs":
        if value is None:
            return []
        if not isinstance(value, list):
            raise _invalid("must be an array of strings", path)
        out: list[str] = []
        for index, item in enumerate(value):
            if item is None:
                continue
            if isinstance(item, str):
                out.append(item)
            elif isinstance(item, int | float) and not isinstance(item, bool):
                out.append(_js_string(item))
            else:
                raise _invalid("must be a string", f"{path}[{index}]")
        return out
    if kind == "book":
        if value is None:
            return None
        if not isinstance(value, dict):
            raise _invalid("must be an object or null", path)
        return copy.deepcopy(value)
    if kind == "list":
        if value is None:
            return []
        if not isinstance(value, list):
            raise _invalid("must be an array", path)
        return copy.deepcopy(value)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _invalid("must be an object", path)
    return copy.deepcopy(value)


def _version(raw: dict[str, Any]) -> str | None:
    version = raw.get("spec_version")
    if version is None:
        return None
    return _js_string(version)


_CARD_SPECS: Final = frozenset({SPEC_V2[0], SPEC_V3[0]})
#: A V1 card has no spec: besides a name it must carry one field only a card has.
_V1_CARD_KEYS: Final = frozenset(
    {"first_mes", "mes_example", "char_name", "char_persona", "char_greeting", "example_dialogue"}
)


def is_card_document(doc: Any) -> bool:
    """Whether a decoded JSON document is a character card: the one recognizer of the HTTP
    import and ``innkeeper import`` (a ``package.json`` has a ``name`` too, but is no card).

    A card has a ``chara_card_v2``/``chara_card_v3`` spec, or a ``data`` object with a
    ``spec_version``, or (V1) a name together with one of the V1 card fields (``first_mes``,
    ``mes_example``, or the Pygmalion/Gradio ``char_name``, ``char_persona``, ``char_greeting``,
    ``example_dialogue``).
    """
    if not isinstance(doc, dict):
        return False
    spec = doc.get("spec")
    if isinstance(spec, str) and spec in _CARD_SPECS:
        return True
    if (
        isinstance(spec, str)
        and spec.startswith("chara_card")
        and isinstance(doc.get("data"), dict)
    ):
        return True
    if isinstance(doc.get("data"), dict) and isinstance(doc.get("spec_version"), str):
        return True
    return isinstance(doc.get("name") or doc.get("char_name"), str) and bool(
        _V1_CARD_KEYS & set(doc)
    )


def _check_header(raw: dict[str, Any]) -> None:
    """``spec`` is a string and ``spec_version`` a string or a number (or absent / null).

    Anything else is refused naming the field: read as a version it would print as Python
    (``"[]"``), and as a set member it was a ``TypeError`` (issue 33).
    """
    spec = raw.get("spec")
    if spec is not None and not isinstance(spec, str):
        raise _invalid("must be a string", "$.spec")
    version = raw.get("spec_version")
    if version is not None and (
        isinstance(version, bool) or not isinstance(version, str | int | float)
    ):
        raise _invalid("must be a string or a number", "$.spec_version")


def detect_card_format(raw: dict[str, Any]) -> CardFormat:
    """V3 (``spec`` ``chara_card_v3`` or version 3.x), V2, else V1; raises if it is no card."""
    _check_header(raw)
    spec = raw.get("spec")
    version = _version(raw) or ""
    if spec == SPEC_V3[0] or _V3_VERSION.match(version):
        return FORMAT_V3
    if spec == SPEC_V2[0] or _V2_VERSION.match(version):
        return FORMAT_V2
    if (
        isinstance(spec, str)
        and spec.startswith("chara_card")
        and isinstance(raw.get("data"), dict)
    ):
        return FORMAT_V2  # an unknown future spec: read the V2 fields, keep everything else
    if any(isinstance(raw.get(k), str) for k in ("name", "char_name")):
        return FORMAT_V1
    raise _invalid("not a character card: no spec/data and no name", "$")


def _read_data(raw: dict[str, Any], card_format: CardFormat) -> CardData:
    values: dict[str, Any] = {}
    if card_format == FORMAT_V1:
        for attr, _key, kind, v1_keys in _FIELDS:
            present = next((k for k in v1_keys if k in raw), None)
            values[attr] = _convert(kind, raw.get(present) if present else None, f"$.{present}")
        return CardData(**values)
    data = raw.get("data")
    if not isinstance(data, dict):
        raise _invalid("a V2/V3 card needs a data object", "$.data")
    for attr, key, kind, _v1 in _FIELDS:
        if key in data:
            values[attr] = _convert(kind, data[key], f"$.data.{key}")
            continue
        # A hybrid missing the spec field: fall back to its V1 top-level mirror.
        mirror = next((k for k in _MIRRORS.get(key, ()) if k in raw), None)
        values[attr] = _convert(kind, raw.get(mirror) if mirror else None, f"$.{mirror}")
    return CardData(**values)


def _display_name(data: CardData, fallback: str | None) -> str:
    for candidate in (data.name, fallback):
        if candidate and candidate.strip():
            return candidate.strip()[:MAX_CARD_NAME_CHARS].strip()
    return DEFAULT_CARD_NAME


def _book_problem(book: dict[str, Any]) -> FormatError | None:
    try:
        parse_character_book(book)
    except StructureLimitError as exc:
        return FormatError(
            EMBEDDED_WORLD_BOOK_INVALID, exc.message, _structure_status(exc), exc.path
        )
    except WorldBookFormatError as exc:
        return FormatError(EMBEDDED_WORLD_BOOK_INVALID, str(exc), 400, "$.character_book")
    return None


def _structure_status(exc: StructureLimitError) -> int:
    """HTTP status of a structure-guard failure (413 for size, 400 for shape)."""
    return FormatError.from_structure(exc).status


def parse_card(
    raw: Any,
    *,
    container: Literal["json", "png"] = "json",
    file_name: str | None = None,
    png_keyword: str | None = None,
) -> CharacterCard:
    """Normalize a decoded character card (a JSON object) of any version.

    ``file_name`` (without extension) names a card that has no name. Raises
    ``FormatError(CHARACTER_CARD_INVALID)`` (400) when the object is no card or a field has the
    wrong type; the path names the field.
    """
    if not isinstance(raw, dict):
        raise _invalid("a character card must be a JSON object", "$")
    card_format = detect_card_format(raw)
    data = _read_data(raw, card_format)
    warnings: list[str] = []
    if not data.name.strip():
        warnings.append(WARN_MISSING_NAME)
    version = _version(raw)
    if card_format == FORMAT_V3 and version and not _V30_VERSION.match(version):
        warnings.append(WARN_NEWER_V3)
    spec = raw.get("spec")
    if card_format == FORMAT_V2 and spec not in (None, SPEC_V2[0]):
        warnings.append(WARN_UNKNOWN_SPEC)
    if data.character_book is not None and _book_problem(data.character_book) is not None:
        warnings.append(WARN_BOOK_INVALID)
    return CharacterCard(
        name=_display_name(data, file_name),
        data=data,
        source=CardSource(
            format=card_format,
            spec_version=version,
            container=container,
            png_keyword=png_keyword,
            raw=copy.deepcopy(raw),
        ),
        warnings=warnings,
    )


def _png_card(data: bytes, file_name: str | None) -> CharacterCard:
    text = read_card_text(data)
    warnings: list[str] = []
    if CCV3 in text.keywords and CHARA in text.keywords:
        warnings.append(WARN_PNG_BOTH)
    errors: list[FormatError] = []
    for keyword in (CCV3, CHARA):
        if keyword in text.errors:
            errors.append(text.errors[keyword])
            continue
        payload = text.payloads.get(keyword)
        if payload is None:
            continue
        try:
            raw = decode_json(payload, what=f"{keyword} chunk", limits=CARD_LIMITS)
            card = parse_card(raw, container="png", file_name=file_name, png_keyword=keyword)
        except FormatError as exc:
            if exc.status == 413:
                raise
            errors.append(exc)
            continue
        if errors:
            warnings.append(WARN_CCV3_UNREADABLE)
        if keyword == CHARA and card.source.format == FORMAT_V3:
            warnings.append(WARN_V3_IN_CHARA)
        card.warnings[:0] = warnings
        return card
    raise errors[0]


def parse_card_bytes(data: bytes, *, file_name: str | None = None) -> CharacterCard:
    """Import a card file: PNG (by signature) or UTF-8 JSON, at most 32 MiB.

    Records the SHA-256 and length of the original bytes in ``source``. Raises ``FormatError``:
    ``ARTIFACT_TOO_LARGE`` (413), PNG codes from :mod:`.png`, ``INVALID_JSON``,
    ``CHARACTER_CARD_INVALID`` (400).
    """
    check_file_size(len(data))
    if is_png(data):
        card = _png_card(data, file_name)
    else:
        doc = decode_json(data, what="character card", limits=CARD_LIMITS)
        if not is_card_document(doc):
            raise _invalid(
                "not a character card: no chara_card spec, no data object with spec_version, "
                "and no V1 card field (first_mes, mes_example, char_name, char_persona, …)",
                "$",
            )
        card = parse_card(doc, file_name=file_name)
    card.source.sha256 = hashlib.sha256(data).hexdigest()
    card.source.byte_length = len(data)
    return card


# ---------------------------------------------------------------- export


def _write_key(raw: dict[str, Any], keys: tuple[str, ...], default: str) -> str:
    return next((k for k in keys if k in raw), keys[0] if keys else default)


def export_card(card: CharacterCard) -> dict[str, Any]:
    """The card's JSON: its original with the changed normalized fields written back.

    V2/V3 fields go to ``data`` and to V1 mirror fields that already exist at the top level; V1
    fields go to the top level (``creatorcomment`` for creator notes). A ``character_book`` set to
    ``None`` is removed.
    """
    raw = card.source.raw
    out = copy.deepcopy(raw)
    base = _read_data(raw, card.source.format)
    v1 = card.source.format == FORMAT_V1
    target = out if v1 else out.setdefault("data", {})
    for attr, key, _kind, v1_keys in _FIELDS:
        value = getattr(card.data, attr)
        if value == getattr(base, attr):
            continue
        write_key = _write_key(raw, v1_keys, key) if v1 else key
        if value is None:
            target.pop(write_key, None)
            continue
        target[write_key] = copy.deepcopy(value)
        if v1:
            continue
        for mirror in _MIRRORS.get(key, ()):
            if mirror in out:
                out[mirror] = copy.deepcopy(value)
        if key == "extensions":
            for name in _MIRRORED_EXTENSIONS:
                if name in out and name in value:
                    out[name] = copy.deepcopy(value[name])
    return out


def export_card_json(card: CharacterCard) -> bytes:
    """:func:`export_card` as pretty UTF-8 JSON (2-space indent, trailing newline)."""
    return msgspec.json.format(msgspec.json.encode(export_card(card)), indent=2) + b"\n"


def _spec_object(card: CharacterCard) -> dict[str, Any]:
    """The exported card in spec form; a V1 card becomes SillyTavern's V2 hybrid."""
    doc = export_card(card)
    if card.source.format != FORMAT_V1:
        return doc
    data: dict[str, Any] = {}
    for attr, key, _kind, _v1 in _FIELDS:
        value = getattr(card.data, attr)
        if value is None or (key in ("nickname", "assets") and not value):
            continue
        data[key] = copy.deepcopy(value)
    return {**doc, "spec": SPEC_V2[0], "spec_version": SPEC_V2[1], "data": data}


def export_card_png(card: CharacterCard, image: bytes | None = None) -> bytes:
    """A PNG of ``image`` (the stored cover, or a placeholder) carrying ``chara`` and ``ccv3``.

    ``chara`` holds the exported JSON with spec V2, ``ccv3`` the same JSON with spec V3 (a V3
    card keeps its own ``spec_version``). Old card chunks of ``image`` are replaced. Raises
    ``FormatError(CHARACTER_PNG_METADATA_TOO_LARGE)`` (413) over 16 MiB per chunk and PNG codes
    when ``image`` is not a valid PNG.
    """
    doc = _spec_object(card)
    chara = {**doc, "spec": SPEC_V2[0], "spec_version": SPEC_V2[1]}
    if card.source.format == FORMAT_V3:
        ccv3 = {**doc, "spec": SPEC_V3[0], "spec_version": doc.get("spec_version", SPEC_V3[1])}
    else:
        ccv3 = {**doc, "spec": SPEC_V3[0], "spec_version": SPEC_V3[1]}
    return write_card_chunks(
        image, [(CHARA, msgspec.json.encode(chara)), (CCV3, msgspec.json.encode(ccv3))]
    )


# ---------------------------------------------------------------- embedded book, regex


def card_world_book(card: CharacterCard) -> WorldBook | None:
    """The card's embedded ``character_book`` normalized, or ``None`` without one.

    Runs the shared structure guard first. Raises ``FormatError(EMBEDDED_WORLD_BOOK_INVALID)``
    (400, or 413 for a size limit) when the book cannot be used: the loader skips it, it fails
    closed.
    """
    book = card.data.character_book
    if book is None:
        return None
    try:
        return parse_character_book(book)
    except StructureLimitError as exc:
        raise FormatError(
            EMBEDDED_WORLD_BOOK_INVALID, exc.message, _structure_status(exc), exc.path
        ) from None
    except WorldBookFormatError as exc:
        raise FormatError(EMBEDDED_WORLD_BOOK_INVALID, str(exc), 400, "$.character_book") from None


def with_character_book(card: CharacterCard, book: Any) -> CharacterCard:
    """A copy of ``card`` whose embedded book is ``book`` (an ST ``character_book`` or ``None``).

    ``PATCH /characters/:id/world-book``: the structure guard and the parser run first, so an
    unusable book is rejected (``EMBEDDED_WORLD_BOOK_INVALID`` / ``CHARACTER_CARD_INVALID``) and
    nothing changes. The object is stored as given, unknown fields included.
    """
    if book is not None:
        if not isinstance(book, dict):
            raise _invalid("characterBook must be an object or null", "$.characterBook")
        problem = _book_problem(book)
        if problem is not None:
            raise problem
    data = msgspec.structs.replace(card.data, character_book=copy.deepcopy(book))
    warnings = [w for w in card.warnings if w != WARN_BOOK_INVALID]
    return msgspec.structs.replace(card, data=data, warnings=warnings)


def _regex_kind(card: CharacterCard) -> Literal["card_v1", "card_v2"]:
    return "card_v1" if card.source.format == FORMAT_V1 else "card_v2"


def _extensions_path(card: CharacterCard) -> tuple[str, ...]:
    return ("extensions",) if card.source.format == FORMAT_V1 else ("data", "extensions")


def card_regex_scripts(card: CharacterCard) -> list[dict[str, Any]]:
    """The card's native regex scripts, from where they live in its original."""
    kind = _regex_kind(card)
    if regex_scripts_path(card.source.raw, kind)[:-1] == _extensions_path(card):
        scripts = card.data.extensions.get("regex_scripts")
        if not isinstance(scripts, list):
            return []
        return [copy.deepcopy(s) for s in scripts if isinstance(s, dict)]
    return read_regex_scripts(card.source.raw, kind)


def with_card_regex_scripts(card: CharacterCard, scripts: list[dict[str, Any]]) -> CharacterCard:
    """A copy of ``card`` carrying ``scripts`` (full ordered replace) on their native path.

    Presets and V1 cards default to ``extensions.regex_scripts``, V2/V3 cards to
    ``data.extensions.regex_scripts`` (`docs/contract/resources.md#native-regex`).
    """
    kind = _regex_kind(card)
    path = regex_scripts_path(card.source.raw, kind)
    raw = replace_regex_scripts(card.source.raw, scripts, kind)
    data = card.data
    if path[:-1] == _extensions_path(card):
        extensions = {**card.data.extensions, "regex_scripts": copy.deepcopy(scripts)}
        data = msgspec.structs.replace(card.data, extensions=extensions)
    source = msgspec.structs.replace(card.source, raw=raw)
    return msgspec.structs.replace(card, data=data, source=source)


# ---------------------------------------------------------------- edits (PATCH /characters/:id)

#: Patchable card fields: wire name → (attribute, kind).
_PATCHABLE: Final[dict[str, tuple[str, str]]] = {
    "name": ("name", "str"),
    "nickname": ("nickname", "str"),
    "description": ("description", "str"),
    "personality": ("personality", "str"),
    "scenario": ("scenario", "str"),
    "firstMessage": ("first_message", "str"),
    "messageExample": ("message_example", "str"),
    "creatorNotes": ("creator_notes", "str"),
    "systemPrompt": ("system_prompt", "str"),
    "postHistoryInstructions": ("post_history_instructions", "str"),
    "creator": ("creator", "str"),
    "characterVersion": ("character_version", "str"),
    "alternateGreetings": ("alternate_greetings", "strs"),
    "groupOnlyGreetings": ("group_only_greetings", "strs"),
    "tags": ("tags", "strs"),
}


#: SillyTavern's depth prompt ("Character's Note"): ``data.extensions.depth_prompt``.
DEPTH_PROMPT_KEY: Final = "depth_prompt"
#: Deepest depth a depth prompt may ask for (SillyTavern's field allows 0–9999).
MAX_DEPTH_PROMPT_DEPTH: Final = 9999
_DEPTH_ROLES: Final = ("system", "user", "assistant")


def _depth_prompt(value: Any) -> dict[str, Any]:
    """A ``depthPrompt`` edit ``{prompt, depth, role}`` checked, as ST writes it."""
    if not isinstance(value, dict) or set(value) != {"prompt", "depth", "role"}:
        raise _invalid("depthPrompt must be {prompt, depth, role}", "$.depthPrompt")
    prompt, depth, role = value["prompt"], value["depth"], value["role"]
    if not isinstance(prompt, str):
        raise _invalid("must be a string", "$.depthPrompt.prompt")
    if (
        not isinstance(depth, int)
        or isinstance(depth, bool)
        or not 0 <= depth <= MAX_DEPTH_PROMPT_DEPTH
    ):
        raise _invalid(
            f"must be an integer from 0 to {MAX_DEPTH_PROMPT_DEPTH}", "$.depthPrompt.depth"
        )
    if role not in _DEPTH_ROLES:
        raise _invalid("must be system, user or assistant", "$.depthPrompt.role")
    return {"prompt": prompt, "depth": depth, "role": role}


def with_cover(card: CharacterCard) -> CharacterCard:
    """The card once it has a picture of its own (an uploaded avatar): its container is PNG."""
    return msgspec.structs.replace(
        card, source=msgspec.structs.replace(card.source, container="png")
    )


def edit_card(card: CharacterCard, patch: Any) -> CharacterCard:
    """Apply a ``PATCH /characters/:id`` body (camelCase card fields) and return the copy.

    Only the text fields, greetings, tags and ``depthPrompt`` (``{prompt, depth, role}``, written
    to ``extensions.depth_prompt``) are patchable; the embedded book has its own route
    (:func:`with_character_book`) and native regex theirs (:func:`with_card_regex_scripts`).
    Omitted fields are kept; strings must be strings, lists arrays of strings. Any other key is
    rejected with ``CHARACTER_CARD_INVALID`` (400) and ``card`` is unchanged.
    """
    if not isinstance(patch, dict):
        raise _invalid("card edit must be a JSON object", "$")
    changes: dict[str, Any] = {}
    for key, value in patch.items():
        if key == "depthPrompt":
            extensions = {**card.data.extensions, DEPTH_PROMPT_KEY: _depth_prompt(value)}
            changes["extensions"] = extensions
            continue
        if key not in _PATCHABLE:
            raise _invalid(f"field {key!r} cannot be edited", f"$.{key}")
        attr, kind = _PATCHABLE[key]
        if kind == "str" and not isinstance(value, str):
            raise _invalid("must be a string", f"$.{key}")
        if kind == "strs" and not (
            isinstance(value, list) and all(isinstance(s, str) for s in value)
        ):
            raise _invalid("must be an array of strings", f"$.{key}")
        changes[attr] = copy.copy(value)
    data = msgspec.structs.replace(card.data, **changes)
    warnings = [w for w in card.warnings if w != WARN_MISSING_NAME or not data.name.strip()]
    return msgspec.structs.replace(
        card, name=_display_name(data, card.name), data=data, warnings=warnings
    )
