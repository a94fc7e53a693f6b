"""The macro engine for prompts, lore, keys and greetings (SillyTavern ``{{macros}}``).

`docs/worldbook.md#macros` describes ST's two engines. This one follows the newer engine's
*syntax* (nesting resolved inside-out, ``{{name::a::b}}``, ``{{name:arg}}``, ``{{name arg}}``,
case-insensitive names, unknown macros kept as written with their nested macros still resolved,
``{{if cond}}…{{else}}…{{/if}}`` evaluating only the chosen branch, comments whose nested macros
never run, ``\\{\\{`` escapes) and the legacy engine's *macro set and values* that cards and
presets rely on.

Pure: the clock, the random source and the variables come in through :class:`MacroEnv` and
:class:`MacroSession`; nothing is read from the environment. Expansion is bounded
(:data:`MAX_MACRO_EVALUATIONS`, :data:`MAX_MACRO_OUTPUT_CHARS`, :data:`MAX_MACRO_NESTING`,
:data:`MAX_FIELD_DEPTH`), so nested or self-referencing input cannot blow up: a macro that would
exceed a bound is left as written and counted in :attr:`MacroSession.limited`.
"""

from __future__ import annotations

import json
import math
import random
import re
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from functools import lru_cache
from typing import Final

__all__ = [
    "MAX_DICE",
    "MAX_DICE_SIDES",
    "MAX_FIELD_DEPTH",
    "MAX_MACRO_EVALUATIONS",
    "MAX_MACRO_NESTING",
    "MAX_MACRO_OUTPUT_CHARS",
    "MAX_VARIABLE_CHARS",
    "MacroEnv",
    "MacroSession",
    "SeedRandom",
    "VariableValue",
    "expand_macros",
    "js_string_hash",
]

#: Macro resolutions per :meth:`MacroSession.expand` call. Host bound against blow-up, sized far
#: above real presets (the 253-prompt corpus preset uses a few hundred macros in total).
MAX_MACRO_EVALUATIONS: Final = 20_000
#: Characters one expansion may produce; matches the 2 MiB hard profile cap
#: (`docs/contract/world-info.md#profile-budget`).
MAX_MACRO_OUTPUT_CHARS: Final = 2 * 1024 * 1024
#: ``{{`` nesting depth; deeper openers are literal text.
MAX_MACRO_NESTING: Final = 32
#: Depth of card-field macros (``{{description}}`` inside ``{{persona}}`` ...) expanded inside
#: each other; deeper field macros expand to their raw text.
MAX_FIELD_DEPTH: Final = 3
#: Characters of one variable value (``setvar``/``addvar`` beyond it are refused).
MAX_VARIABLE_CHARS: Final = 256 * 1024
#: ``{{roll}}``: at most this many dice ...
MAX_DICE: Final = 1_000
#: ... with at most this many sides.
MAX_DICE_SIDES: Final = 1_000_000

VariableValue = str | int | float

_TRIM: Final = "\ue000trim\ue000"
_ESC_OPEN: Final = "\ue001"
_ESC_CLOSE: Final = "\ue002"
# An opener followed by another brace is literal: `{{{user}}}` is `{` + user + `}`.
_TOKEN: Final = re.compile(r"\{\{(?!\{)|\}\}")
_LEGACY: Final = re.compile(r"<(USER|BOT|CHAR|CHARIFNOTGROUP|GROUP)>", re.IGNORECASE)
_NAME: Final = re.compile(r"^\s*([^\s:]+|//|/)(.*)$", re.DOTALL)
_DICE: Final = re.compile(r"^\s*(\d*)\s*(?:d\s*(\d+))?\s*(?:([+-])\s*(\d+))?\s*$", re.IGNORECASE)
_UTC_OFFSET: Final = re.compile(r"^time_utc([+-]\d{1,2})$", re.IGNORECASE)
_NUMBER: Final = re.compile(r"^\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*$")


@dataclass(frozen=True, slots=True, kw_only=True)
class MacroEnv:
    """Values macros read. ``now`` is the injected clock (an aware datetime).

    ``group`` defaults to ``char`` (solo chat). ``chat_id`` seeds ``{{pick}}`` so picks are
    stable per chat. ``extra`` maps lower-case macro names to values or to functions of the
    argument list (plugins' and extensions' macros, e.g. ``outlet``).
    """

    char: str = ""
    user: str = ""
    persona: str = ""
    description: str = ""
    personality: str = ""
    scenario: str = ""
    mes_examples: str = ""
    char_prompt: str = ""
    char_instruction: str = ""
    char_version: str = ""
    char_depth_prompt: str = ""
    creator_notes: str = ""
    group: str | None = None
    model: str = ""
    input: str = ""
    last_message: str = ""
    last_message_id: int | None = None
    last_user_message: str = ""
    last_char_message: str = ""
    chat_id: str = ""
    pick_reroll_seed: int | None = None
    now: datetime = datetime(1970, 1, 1, tzinfo=UTC)
    extra: Mapping[str, str | Callable[[list[str]], str]] = field(default_factory=dict)


def _imul(a: int, b: int) -> int:
    """JavaScript ``Math.imul``: 32-bit multiplication, as a signed 32-bit result."""
    product = ((a & 0xFFFFFFFF) * (b & 0xFFFFFFFF)) & 0xFFFFFFFF
    return product - 0x100000000 if product & 0x80000000 else product


def js_string_hash(text: str, seed: int = 0) -> int:
    """ST's ``getStringHash``: cyrb53 (public domain) over UTF-16 code units."""
    h1 = 0xDEADBEEF ^ seed
    h2 = 0x41C6CE57 ^ seed
    data = text.encode("utf-16-le", "surrogatepass")
    for index in range(0, len(data), 2):
        unit = data[index] | (data[index + 1] << 8)
        h1 = _imul(h1 ^ unit, 2654435761)
        h2 = _imul(h2 ^ unit, 1597334677)
    h1 = _imul(h1 ^ ((h1 & 0xFFFFFFFF) >> 16), 2246822507) ^ _imul(
        h2 ^ ((h2 & 0xFFFFFFFF) >> 13), 3266489909
    )
    h2 = _imul(h2 ^ ((h2 & 0xFFFFFFFF) >> 16), 2246822507) ^ _imul(
        h1 ^ ((h1 & 0xFFFFFFFF) >> 13), 3266489909
    )
    return 4294967296 * (2097151 & h2) + (h1 & 0xFFFFFFFF)


class SeedRandom:
    """seedrandom's default ARC4 generator for a string seed (what ST's ``{{pick}}`` uses)."""

    _WIDTH: Final = 256
    _SIGNIFICANCE: Final = 2**52
    _OVERFLOW: Final = 2**53

    def __init__(self, seed: str) -> None:
        key: list[int] = []
        smear = 0
        units = seed.encode("utf-16-le", "surrogatepass")
        for j in range(len(units) // 2):
            code = units[2 * j] | (units[2 * j + 1] << 8)
            slot = j & 255
            if slot < len(key):
                smear ^= key[slot] * 19
                key[slot] = 255 & (smear + code)
            else:
                key.append(255 & (smear + code))
        if not key:
            key = [0]
        state = list(range(256))
        j = 0
        for i in range(256):
            t = state[i]
            j = 255 & (j + key[i % len(key)] + t)
            state[i] = state[j]
            state[j] = t
        self._s = state
        self._i = 0
        self._j = 0
        self._bytes(256)  # ARC4-drop[256]

    def _bytes(self, count: int) -> int:
        s, i, j = self._s, self._i, self._j
        r = 0
        for _ in range(count):
            i = 255 & (i + 1)
            t = s[i]
            j = 255 & (j + t)
            s[i] = s[j]
            s[j] = t
            r = r * 256 + s[255 & (s[i] + t)]
        self._i, self._j = i, j
        return r

    def __call__(self) -> float:
        """A float in [0, 1) with 52 bits of randomness, exactly as seedrandom computes it."""
        n = self._bytes(6)
        d = 256**6
        x = 0
        while n < self._SIGNIFICANCE:
            n = (n + x) * 256
            d *= 256
            x = self._bytes(1)
        while n >= self._OVERFLOW:
            n //= 2
            d //= 2
            x >>= 1
        return (n + x) / d


def _js_number(value: float) -> str:
    """Format a number as JavaScript's ``String(n)`` would for ordinary values."""
    if math.isfinite(value) and value == int(value) and abs(value) < 1e21:
        return str(int(value))
    text = repr(value)
    return {"inf": "Infinity", "-inf": "-Infinity", "nan": "NaN"}.get(text, text)


def _as_number(value: VariableValue) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if _NUMBER.match(value):
        return float(value)
    return None


def _show(value: VariableValue) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return _js_number(float(value))
    return value


class MacroSession:
    """One request's macro state: variables, the RNG and the bounds.

    ``local_variables`` (chat-scoped) and ``global_variables`` are copied in and mutated by
    ``setvar``/``addvar``/...; read them back after expansion to persist them. ``rng`` drives
    ``{{random}}`` and ``{{roll}}`` (inject a seeded ``random.Random`` for reproducibility).
    """

    def __init__(
        self,
        env: MacroEnv,
        *,
        local_variables: Mapping[str, VariableValue] | None = None,
        global_variables: Mapping[str, VariableValue] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.env = env
        self.local_variables: dict[str, VariableValue] = dict(local_variables or {})
        self.global_variables: dict[str, VariableValue] = dict(global_variables or {})
        self.rng = rng if rng is not None else random.Random(0)
        #: Macros left as written because a bound was reached (all calls so far).
        self.limited = 0
        self._evaluations = 0
        self._output = 0
        self._field_depth = 0
        self._original: str | None = None
        self._source = ""

    # ------------------------------------------------------------------ public

    def expand(self, text: str, *, original: str | None = None) -> str:
        """Expand every macro in ``text``.

        ``original`` is what ``{{original}}`` stands for in this text (a card's system prompt
        overriding the preset's); it is substituted once, later occurrences become empty.
        """
        if "{{" not in text and "<" not in text and "\\{" not in text:
            return text
        self._evaluations = 0
        self._output = 0
        self._original = original
        return self._expand(text)

    __call__ = expand

    # ------------------------------------------------------------------ engine

    def _expand(self, text: str) -> str:
        saved_source = self._source
        self._source = text
        try:
            text = text.replace("\\{\\{", _ESC_OPEN).replace("\\}\\}", _ESC_CLOSE)
            text = _LEGACY.sub(self._legacy, text)
            result = self._walk(text)
            if _TRIM in result:
                result = re.sub(f"\n*{_TRIM}\n*", "", result)
            return result.replace(_ESC_OPEN, "{{").replace(_ESC_CLOSE, "}}")
        finally:
            self._source = saved_source

    def _legacy(self, found: re.Match[str]) -> str:
        tag = found.group(1).lower()
        if tag == "user":
            return self.env.user
        if tag in ("bot", "char"):
            return self.env.char
        return self._group()

    def _walk(self, text: str) -> str:
        """Parse ``{{...}}`` into a tree (unclosed openers stay literal) and evaluate it."""
        return self._sequence(self._parse(text))

    def _parse(self, text: str) -> list[_Node]:
        nodes, limited = _parse_tree(text)
        self.limited += limited
        return nodes

    def _sequence(self, nodes: list[_Node]) -> str:
        """Evaluate sibling nodes inside-out; ``{{if}}`` blocks evaluate only the chosen branch."""
        out: list[str] = []
        index = 0
        while index < len(nodes):
            node = nodes[index]
            index += 1
            if isinstance(node, str):
                out.append(node)
                continue
            head = node.head()
            if head.startswith("//"):
                out.append("")  # a comment: nested macros inside it are not run
                continue
            if head == "if":
                block = _find_if_block(nodes, index - 1)
                if block is not None:
                    else_at, end = block
                    chosen = self._condition(self._sequence(node.children).strip()[2:])
                    branch = nodes[index:else_at] if chosen else nodes[else_at + 1 : end]
                    if else_at == end and not chosen:
                        branch = []
                    out.append(textwrap.dedent(self._sequence(branch)).strip())
                    index = end + 1
                    continue
            out.append(self._resolve(self._sequence(node.children), node.start))
        return "".join(out)

    def _condition(self, text: str) -> bool:
        """Macros 2.0 ``{{if}}``: a macro name, ``.local``/``$global`` variable, or plain text."""
        text = text.strip()
        negate = text.startswith("!")
        if negate:
            text = text[1:].strip()
        if text.startswith("."):
            value = _show(self.local_variables.get(text[1:].strip(), ""))
        elif text.startswith("$"):
            value = _show(self.global_variables.get(text[1:].strip(), ""))
        elif text.lower() in _HANDLERS or text.lower() in self.env.extra:
            resolved = self._evaluate(text, 0)
            value = resolved if resolved is not None else text
        else:
            value = text
        truthy = value.strip().lower() not in _FALSY
        return truthy != negate

    def _resolve(self, body: str, offset: int) -> str:
        written = "{{" + body + "}}"
        if self._evaluations >= MAX_MACRO_EVALUATIONS:
            self.limited += 1
            return written
        self._evaluations += 1
        value = self._evaluate(body, offset)
        if value is None:
            return written
        self._output += max(0, len(value) - len(written))
        if self._output > MAX_MACRO_OUTPUT_CHARS:
            self.limited += 1
            return written
        return value

    def _evaluate(self, body: str, offset: int) -> str | None:
        """The value of one macro body, or ``None`` when the macro is unknown."""
        stripped = body.strip()
        if stripped.startswith("//"):
            return ""
        found = _NAME.match(stripped)
        if found is None:
            return None
        name, rest = found.group(1).lower(), found.group(2)
        if rest.startswith("::"):
            args = [a.strip() for a in rest[2:].split("::")]
        elif rest.startswith(":"):
            args = [rest[1:].strip()]
        elif rest.strip():
            args = [rest.strip()]
        else:
            args = []
        handler = _HANDLERS.get(name)
        if handler is not None:
            return handler(self, args, rest, offset)
        extra = self.env.extra.get(name)
        if extra is not None:
            return extra if isinstance(extra, str) else extra(args)
        utc = _UTC_OFFSET.match(name)
        if utc is not None:
            moment = self.env.now.astimezone(timezone(timedelta(hours=int(utc.group(1)))))
            return _moment(moment, "LT")
        return None

    # ------------------------------------------------------------------ helpers

    def _group(self) -> str:
        return self.env.group if self.env.group is not None else self.env.char

    def _field(self, value: str) -> str:
        """Card fields are macro-expanded where inserted, to a bounded depth."""
        if self._field_depth >= MAX_FIELD_DEPTH or ("{{" not in value and "<" not in value):
            return value
        self._field_depth += 1
        try:
            return self._expand(value)
        finally:
            self._field_depth -= 1

    def _vars(self, scope: str) -> dict[str, VariableValue]:
        return self.global_variables if scope == "global" else self.local_variables

    def _set(self, scope: str, name: str, value: VariableValue) -> bool:
        if isinstance(value, str) and len(value) > MAX_VARIABLE_CHARS:
            self.limited += 1
            return False
        self._vars(scope)[name] = value
        return True


_FALSY: Final = frozenset({"", "false", "0", "off", "no"})
_HEAD: Final = re.compile(r"^\s*(//|/?[^\s:]+)")


class _Macro:
    """A parsed ``{{...}}``: its children (text and nested macros) and where it started."""

    __slots__ = ("children", "start")

    def __init__(self, children: list[_Node], start: int) -> None:
        self.children = children
        self.start = start

    def head(self) -> str:
        """The lower-case macro name as written (before nested macros are resolved)."""
        first = self.children[0] if self.children else ""
        if not isinstance(first, str):
            return ""
        found = _HEAD.match(first)
        return found.group(1).lower() if found else ""


_Node = str | _Macro


#: Parsed templates kept by text: a preset's prompts, a card's fields and the lore are the same
#: text turn after turn.
PARSE_CACHE_SIZE: Final = 512


@lru_cache(maxsize=PARSE_CACHE_SIZE)
def _parse_tree(text: str) -> tuple[list[_Node], int]:
    """``text`` parsed into a tree (unclosed openers stay literal) and how many openers the
    nesting bound left as text. The tree is shared by every caller: evaluation only reads it."""
    limited = 0
    stack: list[tuple[int, list[_Node]]] = [(0, [])]
    position = 0
    for token in _TOKEN.finditer(text):
        start = token.start()
        if start > position:
            stack[-1][1].append(text[position:start])
        position = token.end()
        if token.group() == "{{":
            if len(stack) > MAX_MACRO_NESTING:
                limited += 1
                stack[-1][1].append("{{")
            else:
                stack.append((start, []))
        elif len(stack) > 1:
            opened, children = stack.pop()
            stack[-1][1].append(_Macro(children, opened))
        else:
            stack[-1][1].append("}}")
    if position < len(text):
        stack[-1][1].append(text[position:])
    while len(stack) > 1:
        _, children = stack.pop()
        stack[-1][1].append("{{")
        stack[-1][1].extend(children)
    return stack[0][1], limited


def _find_if_block(nodes: list[_Node], at: int) -> tuple[int, int] | None:
    """Indices of the matching ``{{else}}`` (== end when absent) and ``{{/if}}`` after ``at``."""
    depth = 0
    else_at: int | None = None
    for index in range(at + 1, len(nodes)):
        node = nodes[index]
        if isinstance(node, str):
            continue
        head = node.head()
        if head == "if":
            depth += 1
        elif head == "/if":
            if depth == 0:
                return (else_at if else_at is not None else index), index
            depth -= 1
        elif head == "else" and depth == 0 and else_at is None:
            else_at = index
    return None


def _moment(moment: datetime, fmt: str) -> str:
    """A subset of moment.js formatting (en locale): LT, LL and the common tokens."""
    if fmt == "LT":
        return (
            f"{(moment.hour % 12) or 12}:{moment.minute:02d} {'AM' if moment.hour < 12 else 'PM'}"
        )
    if fmt == "LL":
        return f"{moment.strftime('%B')} {moment.day}, {moment.year}"
    tokens = {
        "YYYY": f"{moment.year:04d}",
        "YY": f"{moment.year % 100:02d}",
        "MMMM": moment.strftime("%B"),
        "MMM": moment.strftime("%b"),
        "MM": f"{moment.month:02d}",
        "M": str(moment.month),
        "DD": f"{moment.day:02d}",
        "D": str(moment.day),
        "dddd": moment.strftime("%A"),
        "ddd": moment.strftime("%a"),
        "HH": f"{moment.hour:02d}",
        "H": str(moment.hour),
        "hh": f"{(moment.hour % 12) or 12:02d}",
        "h": str((moment.hour % 12) or 12),
        "mm": f"{moment.minute:02d}",
        "m": str(moment.minute),
        "ss": f"{moment.second:02d}",
        "s": str(moment.second),
        "A": "AM" if moment.hour < 12 else "PM",
        "a": "am" if moment.hour < 12 else "pm",
    }
    pattern = re.compile(r"\[([^\]]*)\]|" + "|".join(sorted(tokens, key=len, reverse=True)))
    return pattern.sub(lambda m: m.group(1) if m.group(1) is not None else tokens[m.group()], fmt)


def _list_items(args: list[str], rest: str) -> list[str]:
    """``random``/``pick`` items: ``::``-separated, or one comma list with ``\\,`` escapes."""
    if rest.startswith("::"):
        return args
    raw = rest[1:] if rest.startswith(":") else rest
    if not raw.strip():
        return []
    items = [
        part.replace("\ue003", ",").strip() for part in raw.replace("\\,", "\ue003").split(",")
    ]
    return items


def _roll_dice(session: MacroSession, spec: str) -> str:
    found = _DICE.match(spec)
    if found is None or not spec.strip():
        return ""
    count_text, sides_text, sign, modifier = found.groups()
    if sides_text is None:
        # Bare digits mean one die of that many sides (docs/worldbook.md#macros).
        if not count_text:
            return ""
        count, sides = 1, int(count_text)
    else:
        count, sides = int(count_text or 1), int(sides_text)
    if not (1 <= count <= MAX_DICE and 1 <= sides <= MAX_DICE_SIDES):
        return ""
    total = sum(session.rng.randint(1, sides) for _ in range(count))
    if sign is not None:
        total += int(modifier) if sign == "+" else -int(modifier)
    return str(total)


Handler = Callable[[MacroSession, list[str], str, int], str | None]


def _value(getter: Callable[[MacroEnv], str]) -> Handler:
    return lambda session, _args, _rest, _offset: getter(session.env)


def _field(getter: Callable[[MacroEnv], str]) -> Handler:
    return lambda session, _args, _rest, _offset: session._field(getter(session.env))


def _original(session: MacroSession, _args: list[str], _rest: str, _offset: int) -> str:
    value = session._original or ""
    session._original = None  # given once (docs/worldbook.md#macros)
    return value


def _newline(session: MacroSession, args: list[str], _rest: str, _offset: int) -> str:
    count = int(args[0]) if args and args[0].isdigit() else 1
    return "\n" * min(count, 100)


def _space(session: MacroSession, args: list[str], _rest: str, _offset: int) -> str:
    count = int(args[0]) if args and args[0].isdigit() else 1
    return " " * min(count, 100)


def _random(session: MacroSession, args: list[str], rest: str, _offset: int) -> str | None:
    items = _list_items(args, rest)
    if not items:
        return None
    return items[session.rng.randrange(len(items))]


def _pick(session: MacroSession, args: list[str], rest: str, offset: int) -> str | None:
    items = _list_items(args, rest)
    if not items:
        return None
    # As ST's newer engine seeds it (docs/worldbook.md#macros): cyrb53 of
    # "<chat hash>-<text hash>-<offset>"
    # (plus the reroll seed), fed as a string to seedrandom's ARC4; stable across regenerations.
    parts = [
        str(js_string_hash(session.env.chat_id)),
        str(js_string_hash(session._source)),
        str(offset),
    ]
    if session.env.pick_reroll_seed is not None:
        parts.append(str(session.env.pick_reroll_seed))
    rng = SeedRandom(str(js_string_hash("-".join(parts))))
    return items[math.floor(rng() * len(items))]


def _roll(session: MacroSession, args: list[str], rest: str, _offset: int) -> str:
    spec = rest[1:] if rest.startswith(":") else rest.removeprefix("::")
    return _roll_dice(session, spec)


def _getvar(scope: str) -> Handler:
    def handler(session: MacroSession, args: list[str], _rest: str, _offset: int) -> str:
        if not args:
            return ""
        value = session._vars(scope).get(args[0].strip())
        return "" if value is None else _show(value)

    return handler


def _setvar(scope: str) -> Handler:
    def handler(session: MacroSession, args: list[str], _rest: str, _offset: int) -> str | None:
        if len(args) < 2 or not args[0]:
            return None
        session._set(scope, args[0].strip(), "::".join(args[1:]))
        return ""

    return handler


def _addvar(scope: str) -> Handler:
    def handler(session: MacroSession, args: list[str], _rest: str, _offset: int) -> str | None:
        if len(args) < 2 or not args[0]:
            return None
        name = args[0].strip()
        addend = "::".join(args[1:])
        current = session._vars(scope).get(name, 0)
        if isinstance(current, str):
            try:
                parsed = json.loads(current)
            except ValueError:
                parsed = None
            if isinstance(parsed, list):
                try:
                    parsed.append(json.loads(addend))
                except ValueError:
                    parsed.append(addend)
                session._set(
                    scope, name, json.dumps(parsed, ensure_ascii=False, separators=(",", ":"))
                )
                return ""
        left, right = _as_number(current), _as_number(addend)
        if left is None or right is None:
            session._set(scope, name, _show(current) + addend)
        else:
            total = left + right
            session._set(scope, name, int(total) if total == int(total) else total)
        return ""

    return handler


def _stepvar(scope: str, step: int) -> Handler:
    def handler(session: MacroSession, args: list[str], _rest: str, _offset: int) -> str | None:
        if not args or not args[0]:
            return None
        name = args[0].strip()
        current = _as_number(session._vars(scope).get(name, 0))
        total = (current if current is not None else 0.0) + step
        value: VariableValue = int(total) if total == int(total) else total
        session._set(scope, name, value)
        return _show(value)

    return handler


def _hasvar(scope: str) -> Handler:
    def handler(session: MacroSession, args: list[str], _rest: str, _offset: int) -> str:
        return "true" if args and args[0].strip() in session._vars(scope) else "false"

    return handler


def _deletevar(scope: str) -> Handler:
    def handler(session: MacroSession, args: list[str], _rest: str, _offset: int) -> str:
        if args:
            session._vars(scope).pop(args[0].strip(), None)
        return ""

    return handler


def _datetimeformat(session: MacroSession, args: list[str], rest: str, _offset: int) -> str:
    fmt = rest[1:] if rest.startswith(":") else rest.removeprefix("::")
    return _moment(session.env.now, fmt.strip())


def _reverse(session: MacroSession, args: list[str], rest: str, _offset: int) -> str:
    text = rest[1:] if rest.startswith(":") else rest.removeprefix("::")
    return text[::-1]


_HANDLERS: Final[dict[str, Handler]] = {
    "char": _value(lambda e: e.char),
    "user": _value(lambda e: e.user),
    "group": lambda s, _a, _r, _o: s._group(),
    "charifnotgroup": lambda s, _a, _r, _o: s._group(),
    "persona": _field(lambda e: e.persona),
    "description": _field(lambda e: e.description),
    "personality": _field(lambda e: e.personality),
    "scenario": _field(lambda e: e.scenario),
    "mesexamples": _field(lambda e: e.mes_examples),
    "mesexamplesraw": _value(lambda e: e.mes_examples),
    "charprompt": _field(lambda e: e.char_prompt),
    "charjailbreak": _field(lambda e: e.char_instruction),
    "charinstruction": _field(lambda e: e.char_instruction),
    "chardepthprompt": _field(lambda e: e.char_depth_prompt),
    "charcreatornotes": _field(lambda e: e.creator_notes),
    "creatornotes": _field(lambda e: e.creator_notes),
    "charversion": _value(lambda e: e.char_version),
    "char_version": _value(lambda e: e.char_version),
    "model": _value(lambda e: e.model),
    "input": _value(lambda e: e.input),
    "original": _original,
    "lastmessage": _value(lambda e: e.last_message),
    "lastmessageid": _value(lambda e: "" if e.last_message_id is None else str(e.last_message_id)),
    "lastusermessage": _value(lambda e: e.last_user_message),
    "lastcharmessage": _value(lambda e: e.last_char_message),
    "newline": _newline,
    "space": _space,
    "noop": lambda _s, _a, _r, _o: "",
    "trim": lambda _s, _a, _r, _o: _TRIM,
    "banned": lambda _s, _a, _r, _o: "",
    "random": _random,
    "pick": _pick,
    "roll": _roll,
    "time": lambda s, _a, _r, _o: _moment(s.env.now, "LT"),
    "date": lambda s, _a, _r, _o: _moment(s.env.now, "LL"),
    "weekday": lambda s, _a, _r, _o: s.env.now.strftime("%A"),
    "isotime": lambda s, _a, _r, _o: _moment(s.env.now, "HH:mm"),
    "isodate": lambda s, _a, _r, _o: _moment(s.env.now, "YYYY-MM-DD"),
    "datetimeformat": _datetimeformat,
    "reverse": _reverse,
    "getvar": _getvar("local"),
    "setvar": _setvar("local"),
    "addvar": _addvar("local"),
    "incvar": _stepvar("local", 1),
    "decvar": _stepvar("local", -1),
    "hasvar": _hasvar("local"),
    "deletevar": _deletevar("local"),
    "getglobalvar": _getvar("global"),
    "setglobalvar": _setvar("global"),
    "addglobalvar": _addvar("global"),
    "incglobalvar": _stepvar("global", 1),
    "decglobalvar": _stepvar("global", -1),
    "hasglobalvar": _hasvar("global"),
    "deleteglobalvar": _deletevar("global"),
}


def expand_macros(
    text: str,
    env: MacroEnv,
    *,
    local_variables: Mapping[str, VariableValue] | None = None,
    original: str | None = None,
    seed: int = 0,
) -> str:
    """One-shot expansion with a fresh session (variables are not kept; use a session for that)."""
    session = MacroSession(env, local_variables=local_variables, rng=random.Random(seed))
    return session.expand(text, original=original)
