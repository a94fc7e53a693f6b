"""JavaScript ``/pattern/flags`` world-book keys, translated to the ``regex`` module.

`docs/worldbook.md#wi-key-matching`: a key is a regex key when it looks like ``/body/flags``
with flags from ``gimsuy`` and no unescaped ``/`` in the body; the first ``\\/`` is unescaped; if
JavaScript cannot compile it the key is plain text. The regex is tested against the raw haystack
(no case folding, no whole-word rule).

The translation keeps JavaScript semantics where Python's differ:

* ``\\d \\w \\b`` (and their negations) are ASCII-only in JavaScript; ``\\s`` is Unicode-wide;
* ``.`` excludes ``\\n \\r \\u2028 \\u2029`` unless ``s``; ``$`` never matches before a trailing
  newline; with ``m`` the anchors see all four line terminators;
* ``(?<name>…)``/``\\k<name>`` named groups, ``\\u{…}``, ``[^]`` and ``[]``, identity escapes
  such as ``\\e`` or ``\\A`` (literal letters in JavaScript);
* ``y`` (sticky) anchors at the start; ``g`` does not matter for a single test.

Python-only syntax that JavaScript rejects (inline flags ``(?i)``, possessive quantifiers, atomic
groups, ``\\Z``-style anchors as escapes) makes the key plain, as a JavaScript compile error does
in ST. Every search runs with a timeout so a catastrophic pattern is cut off, never hangs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

import regex

#: Longest regex body accepted (characters). Larger bodies are diagnosed and become plain keys.
#: Host bound, `docs/contract/world-info.md#profile-budget` (no match amplification).
MAX_REGEX_KEY_CHARS: Final = 1_024

#: Estimated compiled size (atoms × bounded repeats, nesting multiplied) a regex key may reach.
#: ``(?:x{65535}){65535}`` is valid JavaScript but would take the compiler minutes and gigabytes.
MAX_REGEX_PROGRAM_SIZE: Final = 50_000

_QUANTIFIER: Final = re.compile(r"\{(\d+)(?:,(\d*))?\}")
_KEY_SHAPE: Final = re.compile(r"^/(.+?)/([gimsuy]*)$", re.DOTALL)

_WORD: Final = "A-Za-z0-9_"
# JavaScript \s: ASCII whitespace plus Unicode space separators, line terminators and BOM.
_SPACE: Final = (
    "\\t\\n\\v\\f\\r \\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff"
)
_LINE_TERMS: Final = "\\n\\r\\u2028\\u2029"
_BOUNDARY: Final = f"(?:(?<=[{_WORD}])(?![{_WORD}])|(?<![{_WORD}])(?=[{_WORD}]))"
_NON_BOUNDARY: Final = f"(?:(?<=[{_WORD}])(?=[{_WORD}])|(?<![{_WORD}])(?![{_WORD}]))"

_CLASS_ESCAPES: Final = {
    "d": "0-9",
    "w": _WORD,
    "s": _SPACE,
}
_OUTSIDE_ESCAPES: Final = {
    "d": "[0-9]",
    "D": "[^0-9]",
    "w": f"[{_WORD}]",
    "W": f"[^{_WORD}]",
    "s": f"[{_SPACE}]",
    "S": f"[^{_SPACE}]",
    "b": _BOUNDARY,
    "B": _NON_BOUNDARY,
}
_SIMPLE: Final = {"n": "\\n", "r": "\\r", "t": "\\t", "v": "\\v", "f": "\\f", "0": "\\x00"}


class JsRegexError(ValueError):
    """The pattern is not valid JavaScript (or uses syntax we cannot translate faithfully)."""


@dataclass(frozen=True, slots=True)
class JsRegex:
    """A compiled regex key. ``search`` raises ``TimeoutError`` when the budget runs out."""

    source: str
    flags: str
    compiled: regex.Pattern[str]
    sticky: bool

    def search(self, text: str, timeout: float) -> bool:
        """True if the pattern matches ``text`` (anchored at 0 for the ``y`` flag)."""
        if self.sticky:
            return self.compiled.match(text, timeout=timeout) is not None
        return self.compiled.search(text, timeout=timeout) is not None


def split_regex_key(key: str) -> tuple[str, str] | None:
    """``(body, flags)`` if ``key`` has ST's regex-key shape, else ``None``.

    docs/worldbook.md#wi-key-matching.
    """
    found = _KEY_SHAPE.match(key)
    if found is None:
        return None
    body, flags = found.group(1), found.group(2)
    if len(set(flags)) != len(flags):
        return None
    # No unescaped '/' inside the body.
    escaped = False
    for char in body:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == "/":
            return None
    # A JS string-replace quirk: only the first `\/` is unescaped; a further `\/` stays an
    # (identity) escape, which matches '/' anyway.
    return body.replace("\\/", "/", 1), flags


def _hex(text: str, start: int, count: int) -> str | None:
    chunk = text[start : start + count]
    if len(chunk) == count and all(c in "0123456789abcdefABCDEF" for c in chunk):
        return chunk
    return None


def _escape(body: str, i: int, in_class: bool, unicode: bool) -> tuple[str, int]:
    """Translate the escape starting at ``body[i] == '\\\\'``; return (python, next index)."""
    if i + 1 >= len(body):
        raise JsRegexError("trailing backslash")
    c = body[i + 1]
    nxt = i + 2
    if c in _SIMPLE:
        if c == "0" and nxt < len(body) and body[nxt].isdigit():
            raise JsRegexError("octal escapes are not supported")
        return _SIMPLE[c], nxt
    if in_class:
        if c in _CLASS_ESCAPES:
            return _CLASS_ESCAPES[c], nxt
        if c == "b":
            return "\\x08", nxt
    elif c in _OUTSIDE_ESCAPES:
        return _OUTSIDE_ESCAPES[c], nxt
    if c == "x":
        digits = _hex(body, nxt, 2)
        if digits is None:
            return "x", nxt
        return f"\\x{digits}", nxt + 2
    if c == "u":
        if unicode and nxt < len(body) and body[nxt] == "{":
            end = body.find("}", nxt)
            digits = body[nxt + 1 : end] if end > 0 else ""
            if not digits or _hex(digits, 0, len(digits)) is None or int(digits, 16) > 0x10FFFF:
                raise JsRegexError("bad \\u{...} escape")
            return f"\\U{int(digits, 16):08x}", end + 1
        digits = _hex(body, nxt, 4)
        if digits is None:
            if unicode:
                raise JsRegexError("bad \\u escape")
            return "u", nxt
        return f"\\u{digits}", nxt + 4
    if c == "c" and nxt < len(body) and body[nxt].isascii() and body[nxt].isalpha():
        return f"\\x{ord(body[nxt]) % 32:02x}", nxt + 1
    if c == "k" and not in_class:
        if nxt < len(body) and body[nxt] == "<":
            end = body.find(">", nxt)
            if end < 0:
                raise JsRegexError("bad \\k<name>")
            return f"(?P={body[nxt + 1 : end]})", end + 1
        return "k", nxt
    if c in "pP" and unicode:
        if nxt < len(body) and body[nxt] == "{":
            end = body.find("}", nxt)
            if end < 0:
                raise JsRegexError("bad \\p{...}")
            return f"\\{c}{{{body[nxt + 1 : end]}}}", end + 1
        raise JsRegexError("bad \\p escape")
    if c.isdigit():
        if in_class:
            raise JsRegexError("octal escapes are not supported")
        j = nxt
        while j < len(body) and body[j].isdigit():
            j += 1
        return f"(?:\\{body[i + 1 : j]})", j
    if c.isascii() and c.isalnum():
        if unicode:
            raise JsRegexError(f"invalid escape \\{c}")
        # JavaScript identity escape: the letter itself.
        return c, nxt
    return regex.escape(c), nxt


_NEGATED_IN_CLASS: Final = {"D": "0-9", "W": _WORD, "S": _SPACE}


def _char_class(body: str, i: int, unicode: bool) -> tuple[str, int]:
    """Translate the class starting at ``body[i] == '['``; return (python, next index).

    ``\\D \\W \\S`` inside a class cannot be inlined with JavaScript's ASCII meaning, so such a
    class becomes an alternation: ``[a\\S]`` → ``(?:[a]|[^<js space>])``.
    """
    i += 1
    negated = i < len(body) and body[i] == "^"
    if negated:
        i += 1
    positive: list[str] = []
    complements: list[str] = []
    while True:
        if i >= len(body):
            raise JsRegexError("unterminated character class")
        c = body[i]
        if c == "]":
            i += 1
            break
        if c == "\\":
            letter = body[i + 1] if i + 1 < len(body) else ""
            if letter in _NEGATED_IN_CLASS:
                complements.append(_NEGATED_IN_CLASS[letter])
                i += 2
                continue
            piece, i = _escape(body, i, True, unicode)
            positive.append(piece)
            continue
        if c == "[":
            positive.append("\\[")
        elif c in "&~|-" and i + 1 < len(body) and body[i + 1] == c:
            positive.append("\\" + c)
        else:
            positive.append(c)
        i += 1
    members = "".join(positive)
    if not complements:
        return f"[{'^' if negated else ''}{members}]", i
    if not negated:
        options = ([f"[{members}]"] if members else []) + [f"[^{b}]" for b in complements]
        return "(?:" + "|".join(options) + ")", i
    # Not in `members` and in every complement's base set.
    guards = (f"(?![{members}])" if members else "") + "".join(
        f"(?=[{b}])" for b in complements[1:]
    )
    return f"(?:{guards}[{complements[0]}])", i


def program_size(body: str) -> int:
    """Upper estimate of the compiled size of a JavaScript regex body.

    Every atom (character, escape, class) counts 1; a group counts its contents; a bounded
    quantifier ``{n}``/``{n,m}`` multiplies the preceding atom or group by its largest bound.
    """
    stack: list[list[int]] = [[]]
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\":
            stack[-1].append(1)
            i += 2
            continue
        if c == "[":
            j = i + 1
            if j < len(body) and body[j] == "^":
                j += 1
            while j < len(body) and body[j] != "]":
                j += 2 if body[j] == "\\" else 1
            stack[-1].append(1)
            i = j + 1
            continue
        if c == "(":
            stack.append([])
        elif c == ")" and len(stack) > 1:
            inner = stack.pop()
            stack[-1].append(max(1, sum(inner)))
        elif c == "{":
            found = _QUANTIFIER.match(body, i)
            if found is not None:
                low = int(found.group(1))
                high = int(found.group(2)) if found.group(2) else low
                if stack[-1]:
                    stack[-1][-1] *= max(1, low, high)
                i = found.end()
                continue
            stack[-1].append(1)
        elif c not in "|*+?":
            stack[-1].append(1)
        i += 1
    return sum(sum(level) for level in stack)


def translate(body: str, flags: str) -> str:
    """Translate a JavaScript regex body into ``regex`` syntax (raises :class:`JsRegexError`)."""
    unicode = "u" in flags
    multiline = "m" in flags
    dotall = "s" in flags
    out: list[str] = []
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\":
            piece, i = _escape(body, i, False, unicode)
            out.append(piece)
            continue
        if c == "[":
            if body.startswith("[^]", i):
                out.append("[\\s\\S]")
                i += 3
                continue
            if body.startswith("[]", i):
                out.append("(?!)")
                i += 2
                continue
            piece, i = _char_class(body, i, unicode)
            out.append(piece)
            continue
        if c == "(":
            if body.startswith("(?", i):
                rest = body[i + 2 : i + 4]
                if rest.startswith((":", "=", "!")) or rest in ("<=", "<!"):
                    out.append(body[i : i + 3] if rest[0] != "<" else body[i : i + 4])
                    i += 3 if rest[0] != "<" else 4
                    continue
                if rest.startswith("<"):
                    end = body.find(">", i)
                    name = body[i + 3 : end] if end > 0 else ""
                    if not name.isidentifier():
                        raise JsRegexError("bad group name")
                    out.append(f"(?P<{name}>")
                    i = end + 1
                    continue
                raise JsRegexError("unsupported group syntax")
            out.append("(")
            i += 1
            continue
        if c in "*+?}" and i + 1 < len(body) and body[i + 1] == "+":
            raise JsRegexError("possessive quantifiers are not JavaScript")
        if c == ".":
            out.append("(?s:.)" if dotall else f"[^{_LINE_TERMS}]")
        elif c == "^":
            out.append(f"(?<![^{_LINE_TERMS}])" if multiline else "\\A")
        elif c == "$":
            out.append(f"(?![^{_LINE_TERMS}])" if multiline else "\\Z")
        else:
            out.append(c)
        i += 1
    return "".join(out)


def compile_js_regex(key: str) -> JsRegex | None:
    """Compile a ``/body/flags`` key; ``None`` if ``key`` is not regex-shaped.

    Raises :class:`JsRegexError` when it is regex-shaped but cannot be compiled faithfully (the
    caller then treats the key as plain text, like ST does after a ``new RegExp`` failure).
    """
    parts = split_regex_key(key)
    if parts is None:
        return None
    body, flags = parts
    if len(body) > MAX_REGEX_KEY_CHARS:
        raise JsRegexError(f"regex key longer than {MAX_REGEX_KEY_CHARS} characters")
    if program_size(body) > MAX_REGEX_PROGRAM_SIZE:
        raise JsRegexError(f"regex key repeats more than {MAX_REGEX_PROGRAM_SIZE} atoms")
    python = translate(body, flags)
    options = regex.VERSION0
    if "i" in flags:
        options |= regex.IGNORECASE
    try:
        compiled = regex.compile(python, options)
    except (regex.error, OverflowError, RecursionError) as exc:
        raise JsRegexError(f"cannot compile: {exc}") from exc
    return JsRegex(source=key, flags=flags, compiled=compiled, sticky="y" in flags)
