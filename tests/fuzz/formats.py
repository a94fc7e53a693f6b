"""Field-level mutation of the formats a file can bring in (issue 33).

A *case* is one valid base document (a corpus file by relative path, or a small synthetic one)
with exactly one field changed by one *mutation*: every other JSON type, empty and huge values,
deep nesting, prototype-named keys, a duplicate key or invalid UTF-8 (the last two exist only as
raw JSON text, so a case is encoded to bytes here). The fields are every field of the base (a walk
of the document) plus every field the format's own parser reads (its msgspec Structs, dataclasses
and field tables, looked up at import time), so a field added to a parser is mutated without
touching this file, even when no base document carries it yet.

The strategies (:func:`cases`) draw a base, a field and a mutation; :func:`every_case` enumerates
them all (the long tier).
"""

from __future__ import annotations

import base64
import dataclasses
import itertools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import msgspec
from hypothesis import strategies as st

from innkeeper_tavern.pure.formats import card as card_format
from innkeeper_tavern.pure.formats import preset as preset_format
from innkeeper_tavern.pure.formats import regex_script, user, worldbook
from innkeeper_tavern.pure.formats.png import CCV3, CHARA, placeholder_png, read_card_text

SHARED: Final = Path(__file__).resolve().parents[3] / "shared"
ST_CORPUS: Final = SHARED / "sillytavern-corpus"
MVU_EXAMPLE: Final = SHARED / "mvu-corpus" / "upstream" / "magvarupdate-example"

Segment = str | int
FieldPath = tuple[Segment, ...]

#: A JSON value encoded in place of a field's value.
_MARK: Final = "@@fuzz-field@@"
_MARK_RAW: Final = msgspec.json.encode(_MARK)
#: Over the structure guard's 1 MiB per string: a 413 where the guard runs.
HUGE_STRING_BYTES: Final = (1 << 20) + 1
PROTOTYPE_KEYS: Final = ("__proto__", "constructor", "prototype")


def _deep(depth: int, as_object: bool) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = {"d": value} if as_object else [value]
    return value


#: Mutations that replace the value: name → new value (from the old one).
VALUE_MUTATIONS: Final[dict[str, Callable[[Any], Any]]] = {
    "null": lambda _: None,
    "true": lambda _: True,
    "false": lambda _: False,
    "int": lambda _: 7,
    "negative-int": lambda _: -1,
    "float": lambda _: 1.5,
    "string": lambda _: "fz",
    "array": lambda old: [old, "fz", 1],
    "object": lambda old: {"fz": old},
    "empty-string": lambda _: "",
    "blank-string": lambda _: " \t\n",
    "empty-array": lambda _: [],
    "empty-object": lambda _: {},
    "long-string": lambda _: "y" * 100_000,
    "huge-string": lambda _: "x" * HUGE_STRING_BYTES,
    "int-64": lambda _: 2**63,
    "huge-int": lambda _: 10**40,
    "huge-float": lambda _: 1.7e308,
    "tiny-float": lambda _: 5e-324,
    "big-array": lambda _: list(range(20_000)),
    "deep-array-40": lambda _: _deep(40, False),
    "deep-object-40": lambda _: _deep(40, True),
    "deep-array-700": lambda _: _deep(700, False),
    "prototype-object": lambda old: {"__proto__": {"polluted": True}, "constructor": old},
    "prototype-string": lambda _: "__proto__",
}
#: Mutations of the raw text or of the parent object.
RAW_MUTATIONS: Final = (
    "delete",
    "prototype-siblings",  # __proto__/constructor/prototype keys next to the field
    "duplicate-key-other-last",  # "k": original, "k": other type (the last one counts)
    "duplicate-key-other-first",  # "k": other type, "k": original
    "invalid-utf8",  # a string of bytes that are not UTF-8
    "invalid-utf8-inside",  # the original string with a broken sequence in the middle
    "deep-array-5000",  # past Python's recursion limit (json.loads raises RecursionError)
)
MUTATIONS: Final = (*VALUE_MUTATIONS, *RAW_MUTATIONS)


@dataclass(frozen=True, slots=True)
class Case:
    """One mutated document: what was changed, and the bytes to feed."""

    fmt: str
    base: str
    path: FieldPath
    mutation: str
    data: bytes

    @property
    def label(self) -> str:
        return f"{self.fmt}/{self.base} {render_path(self.path)} ← {self.mutation}"


def render_path(path: FieldPath) -> str:
    """``("data", "tags", 0)`` → ``$.data.tags[0]`` (the format layer's notation)."""
    out = "$"
    for seg in path:
        out += f"[{seg}]" if isinstance(seg, int) else f".{seg}"
    return out


_PATH_TOKEN: Final = re.compile(r"\.([^.\[\]]+)|\[([^\]]*)\]")


def parse_path(text: str) -> tuple[str, ...]:
    """A reported JSON path as segments (indices as strings: ``$.entries.0`` = ``$.entries[0]``)."""
    if not text.startswith("$"):
        raise ValueError(text)
    return tuple(a or b for a, b in _PATH_TOKEN.findall(text[1:]))


def related(reported: str, mutated: FieldPath) -> bool:
    """Whether a reported path names the mutated field, an ancestor of it or a value inside it."""
    got = parse_path(reported)
    want = tuple(str(s) for s in mutated)
    shorter = min(len(got), len(want))
    return got[:shorter] == want[:shorter]


# ------------------------------------------------------------------ walking and setting fields


def walk(doc: Any, *, max_depth: int = 6, max_items: int = 2) -> list[FieldPath]:
    """Every field of ``doc`` (object members; the first ``max_items`` of each array)."""
    out: list[FieldPath] = []

    def visit(value: Any, path: FieldPath) -> None:
        if len(path) >= max_depth:
            return
        if isinstance(value, dict):
            for key, child in value.items():
                out.append((*path, key))
                visit(child, (*path, key))
        elif isinstance(value, list):
            for index, child in enumerate(value[:max_items]):
                out.append((*path, index))
                visit(child, (*path, index))

    visit(doc, ())
    return out


def _get(doc: Any, path: FieldPath) -> Any:
    for seg in path:
        if isinstance(doc, dict) and isinstance(seg, str):
            doc = doc.get(seg)
        elif isinstance(doc, list) and isinstance(seg, int) and seg < len(doc):
            doc = doc[seg]
        else:
            return None
    return doc


def _copy(value: Any) -> Any:
    return msgspec.json.decode(msgspec.json.encode(value))


def _parent(doc: Any, path: FieldPath) -> Any:
    """The container of ``path`` in ``doc``, created as objects where missing."""
    node = doc
    for seg in path[:-1]:
        if isinstance(node, dict) and isinstance(seg, str):
            if not isinstance(node.get(seg), dict | list):
                node[seg] = {}
            node = node[seg]
        elif isinstance(node, list) and isinstance(seg, int) and seg < len(node):
            if not isinstance(node[seg], dict | list):
                node[seg] = {}
            node = node[seg]
        else:
            return None
    return node


def _set(doc: Any, path: FieldPath, value: Any) -> bool:
    parent = _parent(doc, path)
    key = path[-1]
    if isinstance(parent, dict) and isinstance(key, str):
        parent[key] = value
        return True
    if isinstance(parent, list) and isinstance(key, int) and key < len(parent):
        parent[key] = value
        return True
    return False


def _other(value: Any) -> Any:
    """A value of another JSON type than ``value``."""
    return 7 if isinstance(value, str) else "fz"


Encoder = Callable[[Any], bytes]


def encode_json(doc: Any) -> bytes:
    return msgspec.json.encode(doc)


def encode_jsonl(lines: Any) -> bytes:
    """A chat: one JSON document per line (the base is the list of lines)."""
    return b"\n".join(msgspec.json.encode(line) for line in lines) + b"\n"


def mutate(doc: Any, path: FieldPath, mutation: str, encode: Encoder = encode_json) -> bytes | None:
    """``doc`` with the field at ``path`` mutated, encoded; ``None`` when it does not apply."""
    work = _copy(doc)
    old = _get(work, path)
    key = path[-1]
    if mutation in VALUE_MUTATIONS:
        return encode(work) if _set(work, path, VALUE_MUTATIONS[mutation](old)) else None
    parent = _parent(work, path)
    if mutation == "delete":
        if isinstance(parent, dict) and key in parent:
            del parent[key]
            return encode(work)
        if isinstance(parent, list) and isinstance(key, int) and key < len(parent):
            del parent[key]
            return encode(work)
        return None
    if mutation == "prototype-siblings":
        if not isinstance(parent, dict):
            return None
        parent.update({"__proto__": {"isAdmin": True}, "constructor": {"prototype": {}}})
        parent["prototype"] = old
        return encode(work)
    if not _set(work, path, _MARK):
        return None
    text = encode(work)
    if text.count(_MARK_RAW) != 1:
        return None
    original = msgspec.json.encode(old)
    if mutation.startswith("duplicate-key"):
        if not isinstance(key, str):
            return None
        name = msgspec.json.encode(key)
        other = msgspec.json.encode(_other(old))
        first, last = (original, other) if mutation.endswith("other-last") else (other, original)
        return text.replace(_MARK_RAW, first + b"," + name + b":" + last)
    if mutation == "deep-array-5000":  # raw: no encoder nests this deep either
        return text.replace(_MARK_RAW, b"[" * 5000 + b"]" * 5000)
    if mutation == "invalid-utf8":
        return text.replace(_MARK_RAW, b'"\xff\xfe\xc3\x28"')
    # invalid-utf8-inside: a truncated multi-byte sequence in the middle of the original text.
    inner = (old if isinstance(old, str) else "fz").encode()
    cut = len(inner) // 2
    return text.replace(_MARK_RAW, b'"' + inner[:cut] + b"\xe2\x82" + inner[cut:] + b'"')


# ------------------------------------------------------------------ schema-derived fields


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def struct_fields(cls: type) -> tuple[str, ...]:
    """The field names of a msgspec Struct or a dataclass (the parser's own model)."""
    if isinstance(cls, type) and issubclass(cls, msgspec.Struct):
        return tuple(f.name for f in msgspec.structs.fields(cls))
    return tuple(f.name for f in dataclasses.fields(cls))


def card_fields(doc: Any) -> list[FieldPath]:
    """Every card field the parser reads (``card._FIELDS``), where this card's version has it."""
    header: list[FieldPath] = [("spec",), ("spec_version",), ("data",)]
    if isinstance(doc, dict) and isinstance(doc.get("data"), dict):
        fields = [("data", v2) for _attr, v2, _kind, _v1 in card_format._FIELDS]
        mirrors = [(m,) for ms in card_format._MIRRORS.values() for m in ms if m in doc]
        return header + fields + mirrors
    return header + [(k,) for _a, _v2, _k, v1 in card_format._FIELDS for k in v1]


def preset_fields(doc: Any) -> list[FieldPath]:
    """Sampling keys (``Sampling``; two carry ST's ``openai_`` prefix), prompt keys
    (``PresetPrompt``), the order and the legacy prompt strings."""
    renamed = {"max_tokens": "openai_max_tokens", "max_context": "openai_max_context"}
    sampling = [(renamed.get(n, n),) for n in struct_fields(preset_format.Sampling)]
    prompt = [("prompts", 0, n) for n in struct_fields(preset_format.PresetPrompt)]
    order = [("prompt_order", 0, "character_id"), ("prompt_order", 0, "order", 0, "identifier")]
    legacy = [(k,) for k in preset_format._LEGACY_KEYS]
    return [("prompts",), ("prompt_order",), *sampling, *prompt, *order, *legacy]


def world_book_fields(doc: Any) -> list[FieldPath]:
    """Entry keys the parser knows: ST's camelCase set, or ``character_book``'s snake_case top
    level plus its ``extensions``."""
    entries = doc.get("entries") if isinstance(doc, dict) else None
    if isinstance(entries, dict) and entries:
        first = next(iter(entries))
        return [("entries",), *(("entries", first, k) for k in sorted(worldbook._ST_KNOWN))]
    cb = [("entries", 0, k) for k in sorted(worldbook._CB_TOP)]
    ext = [("entries", 0, "extensions", e) for _a, _st, e, _k in worldbook._FIELDS]
    return [("entries",), ("scan_depth",), ("token_budget",), ("recursive_scanning",), *cb, *ext]


def user_fields(doc: Any) -> list[FieldPath]:
    """The envelope and the ``UserData`` fields (camelCase on the wire)."""
    envelope = [("format",), ("version",), ("resourceType",), ("data",)]
    return envelope + [("data", _camel(n)) for n in struct_fields(user.UserData)]


def regex_fields(doc: Any) -> list[FieldPath]:
    """``RegexScript``'s fields as ST writes them (camelCase), in the first script."""
    return [(0,), *((0, _camel(n)) for n in struct_fields(regex_script.RegexScript))]


def persona_fields(doc: Any) -> list[FieldPath]:
    """What a SillyTavern ``settings.json`` carries for personas and global regex."""
    power = ("power_user",)
    return [
        power,
        (*power, "personas"),
        (*power, "persona_descriptions"),
        (*power, "default_persona"),
        ("extension_settings", "regex"),
    ]


def chat_fields(doc: Any) -> list[FieldPath]:
    """Header keys and message keys the chat reader uses (``migration/chats.py``)."""
    header = [(0, k) for k in ("user_name", "character_name", "create_date", "chat_metadata")]
    keys = ("name", "is_user", "is_system", "mes", "swipes", "swipe_id", "send_date", "extra")
    return header + [(i, k) for i in (1, 2) for k in keys]


def initvar_fields(doc: Any) -> list[FieldPath]:
    """MVU metadata (``$meta`` switches and the extensible marker) at the root and one level."""
    flags = ("extensible", "recursiveExtensible", "strictSet", "strictTemplate", "template")
    first = next((k for k, v in doc.items() if isinstance(v, dict)), None)
    out: list[FieldPath] = [("$meta",), *(("$meta", f) for f in flags)]
    if first is not None:
        out += [(first, "$meta"), *((first, "$meta", f) for f in flags)]
    return out


# ------------------------------------------------------------------ base documents


def _json(rel: str) -> Any:
    return msgspec.json.decode((ST_CORPUS / rel).read_bytes())


def _png_card(rel: str) -> Any:
    text = read_card_text((ST_CORPUS / rel).read_bytes())
    payload = text.payloads.get(CCV3) or text.payloads[CHARA]
    return msgspec.json.decode(payload)


SCRIPT: Final = {
    "id": "4f1d7b0e-0000-4000-8000-000000000001",
    "scriptName": "Fuzz",
    "findRegex": "/hello/gi",
    "replaceString": "bye",
    "trimStrings": ["x"],
    "placement": [1, 2],
    "disabled": False,
    "markdownOnly": False,
    "promptOnly": False,
    "runOnEdit": True,
    "substituteRegex": 0,
    "minDepth": None,
    "maxDepth": 4,
}
CHARACTER_BOOK: Final = {
    "name": "Book",
    "scan_depth": 2,
    "entries": [
        {
            "id": 1,
            "keys": ["hello"],
            "secondary_keys": [],
            "comment": "c",
            "content": "Hello there.",
            "constant": False,
            "selective": True,
            "insertion_order": 100,
            "enabled": True,
            "position": "before_char",
            "extensions": {"depth": 4, "probability": 100, "group": "", "role": 0},
        }
    ],
}


def card_bases() -> list[tuple[str, Any]]:
    """The corpus cards (PNG Seraphina, JSON Pxansatu) and one synthetic card per version."""
    return [
        ("seraphina", _png_card("sillytavern-repo/staging-1ac6780/default_Seraphina.png")),
        ("pxansatu", _json("prolix-oc-st-presets/cards/Pxansatu.json")),
        (
            "v1",
            {
                "name": "Ada",
                "description": "d",
                "personality": "p",
                "scenario": "s",
                "first_mes": "Hello.",
                "mes_example": "<START>",
                "creatorcomment": "c",
                "tags": ["a"],
                "talkativeness": "0.5",
            },
        ),
        (
            "v2",
            {
                "spec": "chara_card_v2",
                "spec_version": "2.0",
                "name": "Bea",
                "first_mes": "Hi.",
                "data": {
                    "name": "Bea",
                    "first_mes": "Hi.",
                    "alternate_greetings": ["Yo."],
                    "tags": ["t"],
                    "character_book": CHARACTER_BOOK,
                    "extensions": {"talkativeness": "0.5", "regex_scripts": [SCRIPT]},
                },
            },
        ),
        (
            "v3",
            {
                "spec": "chara_card_v3",
                "spec_version": "3.0",
                "data": {
                    "name": "Cy",
                    "nickname": "C",
                    "first_mes": "Hey.",
                    "group_only_greetings": ["All."],
                    "assets": [{"type": "icon", "uri": "ccdefault:", "name": "main", "ext": "png"}],
                    "creator_notes": "n",
                },
            },
        ),
    ]


def preset_bases() -> list[tuple[str, Any]]:
    return [
        ("openai-default", _json("sillytavern-repo/staging-1ac6780/presets_openai_Default.json")),
        ("legacy-1.9.7", _json("sillytavern-repo/tag-1.9.7/OpenAI_Default.settings.json")),
        (
            "synthetic",
            {
                "temperature": 0.8,
                "openai_max_tokens": 300,
                "stop": ["\n\n"],
                "reasoning_effort": "medium",
                "verbosity": "low",
                "prompts": [
                    {"identifier": "main", "name": "Main", "role": "system", "content": "Be."},
                    {
                        "identifier": "custom",
                        "name": "Depth",
                        "content": "x",
                        "injection_position": 1,
                        "injection_depth": 2,
                        "injection_trigger": ["normal"],
                    },
                ],
                "prompt_order": [
                    {
                        "character_id": 100001,
                        "order": [
                            {"identifier": "main", "enabled": True},
                            {"identifier": "custom", "enabled": True},
                        ],
                    }
                ],
                "extensions": {"regex_scripts": [SCRIPT]},
            },
        ),
    ]


def world_book_bases() -> list[tuple[str, Any]]:
    initvar = (MVU_EXAMPLE / "initvar_2.yaml").read_text(encoding="utf-8")
    return [
        ("eldoria", _json("sillytavern-repo/staging-1ac6780/Eldoria.json")),
        ("toaru", _json("sillytavern-repo/tag-1.0.0/Toaru.json")),
        ("character-book", CHARACTER_BOOK),
        (
            "initvar",
            {
                "entries": {
                    "0": {
                        "uid": 0,
                        "key": [],
                        "comment": "[initvar] start",
                        "content": initvar,
                        "constant": False,
                        "disable": True,
                        "order": 100,
                        "position": 0,
                    }
                }
            },
        ),
    ]


def user_bases() -> list[tuple[str, Any]]:
    png = "data:image/png;base64," + base64.b64encode(placeholder_png()).decode()
    return [
        (
            "envelope",
            {
                "format": "pmp-dsh-tavern",
                "version": 1,
                "resourceType": "user",
                "data": {"name": "Mira", "description": "A traveller.", "avatar": png},
            },
        )
    ]


def regex_bases() -> list[tuple[str, Any]]:
    second = {**SCRIPT, "id": "4f1d7b0e-0000-4000-8000-000000000002", "findRegex": "plain"}
    return [("two-scripts", [SCRIPT, second])]


def persona_bases() -> list[tuple[str, Any]]:
    return [
        (
            "settings",
            {
                "power_user": {
                    "personas": {"mira.png": "Mira", "kay.png": "Kay"},
                    "persona_descriptions": {
                        "mira.png": {"description": "A traveller.", "position": 0},
                        "kay.png": {"description": "A guard.", "position": 0},
                    },
                    "default_persona": "mira.png",
                },
                "extension_settings": {"regex": [SCRIPT]},
            },
        )
    ]


def chat_bases() -> list[tuple[str, Any]]:
    return [
        (
            "chat",
            [
                {
                    "user_name": "Mira",
                    "character_name": "Ada",
                    "create_date": "2024-05-01@10h00m00s",
                    "chat_metadata": {"note_prompt": ""},
                },
                {
                    "name": "Ada",
                    "is_user": False,
                    "mes": "Welcome.",
                    "swipes": ["Welcome.", "Hello."],
                    "swipe_id": 0,
                },
                {"name": "Mira", "is_user": True, "mes": "Hi!", "send_date": "x"},
                {"name": "Ada", "is_user": False, "mes": "Sit down.", "extra": {"k": 1}},
            ],
        )
    ]


def initvar_bases() -> list[tuple[str, Any]]:
    return [
        ("example-1", msgspec.json.decode((MVU_EXAMPLE / "initvar_1.yaml").read_bytes())),
        (
            "meta",
            {
                "$meta": {"extensible": False, "strictSet": True},
                "hp": [10, "health"],
                "bag": {"$meta": {"extensible": True}, "items": ["$__META_EXTENSIBLE__$"]},
                "npcs": {"$meta": {"template": {"mood": "calm"}, "extensible": True}},
            },
        ),
    ]


@dataclass(frozen=True, slots=True)
class Format:
    """A format: its base documents, the fields its parser reads, how it is written."""

    name: str
    bases: Callable[[], list[tuple[str, Any]]]
    schema: Callable[[Any], list[FieldPath]]
    encode: Encoder = encode_json
    max_depth: int = 6


FORMATS: Final[dict[str, Format]] = {
    f.name: f
    for f in (
        Format("card", card_bases, card_fields),
        Format("preset", preset_bases, preset_fields),
        Format("world-book", world_book_bases, world_book_fields),
        Format("user", user_bases, user_fields),
        Format("regex", regex_bases, regex_fields),
        Format("persona", persona_bases, persona_fields),
        Format("chat", chat_bases, chat_fields, encode_jsonl, max_depth=3),
        Format("initvar", initvar_bases, initvar_fields, max_depth=4),
    )
}
_BASES: dict[str, list[tuple[str, Any]]] = {}


def bases(fmt: str) -> list[tuple[str, Any]]:
    """The base documents of ``fmt`` (read once)."""
    if fmt not in _BASES:
        _BASES[fmt] = FORMATS[fmt].bases()
    return _BASES[fmt]


_FIELDS: dict[tuple[str, int], list[FieldPath]] = {}


def fields(fmt: str, doc: Any) -> list[FieldPath]:
    """The fields of one base: its walk, then the schema's fields it lacks (no duplicates), each
    one a value can be set at (a schema field under an array the base lacks has no place)."""
    key = (fmt, id(doc))
    if key not in _FIELDS:
        spec = FORMATS[fmt]
        seen: dict[FieldPath, None] = dict.fromkeys(walk(doc, max_depth=spec.max_depth))
        for path in spec.schema(doc):
            seen.setdefault(path, None)
        _FIELDS[key] = [p for p in seen if _set(_copy(doc), p, None)]
    return _FIELDS[key]


def build(fmt: str, base: str, doc: Any, path: FieldPath, mutation: str) -> Case | None:
    data = mutate(doc, path, mutation, FORMATS[fmt].encode)
    return None if data is None else Case(fmt, base, path, mutation, data)


def product_size(fmt: str, mutations: tuple[str, ...] = MUTATIONS) -> int:
    """How many (base, field, mutation) triples :func:`every_case` walks for ``fmt``."""
    return sum(len(fields(fmt, doc)) for _base, doc in bases(fmt)) * len(mutations)


def every_case(
    fmt: str, mutations: tuple[str, ...] = MUTATIONS, *, stride: int = 1
) -> Iterator[Case]:
    """Every field of every base of ``fmt`` under every mutation (the long tier), or every
    ``stride``-th of that product (only the chosen cases are built: a huge value is 1 MiB)."""
    product = (
        (base, doc, path, mutation)
        for base, doc in bases(fmt)
        for path in fields(fmt, doc)
        for mutation in mutations
    )
    for base, doc, path, mutation in itertools.islice(product, 0, None, stride):
        case = build(fmt, base, doc, path, mutation)
        if case is not None:
            yield case


@st.composite
def cases(draw: st.DrawFn, fmt: str, mutations: tuple[str, ...] = MUTATIONS) -> Case:
    """One mutated document of ``fmt``: a base, one of its fields, one mutation."""
    base, doc = draw(st.sampled_from(bases(fmt)))
    path = draw(st.sampled_from(fields(fmt, doc)))
    mutation = draw(st.sampled_from(mutations))
    case = build(fmt, base, doc, path, mutation)
    if case is None:  # e.g. a duplicate key of an array item: use a type change instead
        case = build(fmt, base, doc, path, "null")
    assert case is not None, (fmt, base, path)
    return case
