"""Finite, anchored regular expressions matched by state sets (no native regex engine).

docs/contract/mvu-dsl.md#regex: string ``regex`` accepts finite patterns anchored
with ``^...$`` and no flags — literals, ``\\d``, character ranges, grouped alternatives, ``?``
and ``{m,n}`` (at most 64 repetitions) — limited to 256 characters, 16 group levels and 2048
automaton states. Unbounded repetition (``*``, ``+``, ``{m,}``), wildcard dots, backreferences
and lookarounds are rejected. Construction and matching charge the shared computation budget.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from innkeeper_tavern.pure.mvu.limits import Budget, MvuSyntaxError

#: Characters of one pattern (docs/contract/mvu-dsl.md#regex).
MAX_PATTERN_CHARS: Final = 256
#: Nesting of groups in one pattern.
MAX_GROUP_DEPTH: Final = 16
#: Largest repetition count in ``{m,n}``.
MAX_REPEAT: Final = 64
#: States of the compiled automaton.
MAX_STATES: Final = 2048

_DIGITS: Final = (("0", "9"),)
_WORD: Final = (("a", "z"), ("A", "Z"), ("0", "9"), ("_", "_"))
_SPACE: Final = ((" ", " "), ("\t", "\r"), ("\u00a0", "\u00a0"), ("\u3000", "\u3000"))

# Pattern AST: ("chars", ranges, negated) | ("seq", [..]) | ("alt", [..]) | ("repeat", node, m, n)
Pattern = tuple[object, ...]


def _error(message: str) -> MvuSyntaxError:
    return MvuSyntaxError(f"regex: {message}", code="MVU_SCHEMA_REGEX")


class _PatternParser:
    def __init__(self, text: str, budget: Budget) -> None:
        self.text = text
        self.pos = 0
        self.depth = 0
        self.budget = budget

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def alternation(self) -> Pattern:
        options = [self.sequence()]
        while self.peek() == "|":
            self.pos += 1
            options.append(self.sequence())
        return ("alt", options) if len(options) > 1 else options[0]

    def sequence(self) -> Pattern:
        items: list[Pattern] = []
        while self.peek() not in ("", "|", ")"):
            self.budget.charge()
            items.append(self.quantified())
        return ("seq", items)

    def quantified(self) -> Pattern:
        atom = self.atom()
        ch = self.peek()
        if ch in ("*", "+"):
            raise _error("unbounded repetition is not allowed")
        if ch == "?":
            self.pos += 1
            return ("repeat", atom, 0, 1)
        if ch == "{":
            end = self.text.find("}", self.pos)
            if end < 0:
                raise _error("unterminated {m,n}")
            body = self.text[self.pos + 1 : end]
            parts = body.split(",")
            try:
                low = int(parts[0])
                high = low if len(parts) == 1 else int(parts[1])
            except ValueError as exc:
                raise _error("{m,} and malformed counts are not allowed") from exc
            if len(parts) > 2 or low > high or high > MAX_REPEAT:
                raise _error(f"repetition counts must be 0 <= m <= n <= {MAX_REPEAT}")
            self.pos = end + 1
            if self.peek() in ("?", "*", "+", "{"):
                raise _error("stacked quantifiers are not allowed")
            return ("repeat", atom, low, high)
        return atom

    def atom(self) -> Pattern:
        ch = self.peek()
        if ch == "(":
            self.pos += 1
            if self.peek() == "?":
                if self.text.startswith("?:", self.pos):
                    self.pos += 2
                else:
                    raise _error("lookarounds and named groups are not allowed")
            self.depth += 1
            if self.depth > MAX_GROUP_DEPTH:
                raise _error(f"more than {MAX_GROUP_DEPTH} nested groups")
            inner = self.alternation()
            if self.peek() != ")":
                raise _error("unbalanced parenthesis")
            self.pos += 1
            self.depth -= 1
            return inner
        if ch == "[":
            return self.char_class()
        if ch == "\\":
            return ("chars", self.escape(in_class=False), False)
        if ch == ".":
            raise _error("the wildcard '.' is not allowed")
        if ch in ("^", "$"):
            raise _error("anchors are only allowed at the ends")
        if ch in (")", "]", "}", "?", "*", "+", "{"):
            raise _error(f"unexpected {ch!r}")
        self.pos += 1
        return ("chars", ((ch, ch),), False)

    def escape(self, *, in_class: bool) -> tuple[tuple[str, str], ...]:
        self.pos += 1
        ch = self.peek()
        if not ch:
            raise _error("dangling backslash")
        self.pos += 1
        if ch == "d":
            return _DIGITS
        if ch == "w":
            return _WORD
        if ch == "s":
            return _SPACE
        if ch.isdigit() and not in_class:
            raise _error("backreferences are not allowed")
        if ch in "DWSbB":
            raise _error(f"\\{ch} is not allowed")
        if ch == "u":
            code = self.text[self.pos : self.pos + 4]
            self.pos += 4
            char = chr(int(code, 16))
            return ((char, char),)
        if ch == "n":
            return (("\n", "\n"),)
        if ch == "t":
            return (("\t", "\t"),)
        return ((ch, ch),)

    def char_class(self) -> Pattern:
        self.pos += 1
        negated = self.peek() == "^"
        if negated:
            self.pos += 1
        ranges: list[tuple[str, str]] = []
        first = True
        while True:
            ch = self.peek()
            if not ch:
                raise _error("unterminated character class")
            if ch == "]" and not first:
                self.pos += 1
                break
            first = False
            if ch == "\\":
                part = self.escape(in_class=True)
                ranges.extend(part)
                continue
            self.pos += 1
            if self.peek() == "-" and self.text[self.pos + 1 : self.pos + 2] not in ("", "]"):
                self.pos += 1
                end = self.peek()
                if end == "\\":
                    end_ranges = self.escape(in_class=True)
                    if len(end_ranges) != 1 or end_ranges[0][0] != end_ranges[0][1]:
                        raise _error("bad range")
                    end = end_ranges[0][0]
                else:
                    self.pos += 1
                if end < ch:
                    raise _error("reversed range")
                ranges.append((ch, end))
            else:
                ranges.append((ch, ch))
        return ("chars", tuple(ranges), negated)


@dataclass(frozen=True, slots=True)
class FiniteRegex:
    """A compiled pattern: an epsilon-free-at-match-time NFA over character ranges."""

    source: str
    # transitions[state] = list of (ranges, negated, next_state)
    transitions: tuple[tuple[tuple[tuple[tuple[str, str], ...], bool, int], ...], ...]
    epsilon: tuple[tuple[int, ...], ...]
    start: int
    accept: int

    def matches(self, text: str, budget: Budget) -> bool:
        """True when the whole ``text`` matches (state-set simulation)."""
        current = self._closure({self.start}, budget)
        for ch in text:
            budget.charge(len(current) + 1)
            following: set[int] = set()
            for state in current:
                for ranges, negated, target in self.transitions[state]:
                    inside = any(low <= ch <= high for low, high in ranges)
                    if inside != negated:
                        following.add(target)
            if not following:
                return False
            current = self._closure(following, budget)
        return self.accept in current

    def _closure(self, states: set[int], budget: Budget) -> set[int]:
        stack = list(states)
        seen = set(states)
        while stack:
            state = stack.pop()
            budget.charge()
            for nxt in self.epsilon[state]:
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        return seen


class _Builder:
    def __init__(self, budget: Budget) -> None:
        self.transitions: list[list[tuple[tuple[tuple[str, str], ...], bool, int]]] = []
        self.epsilon: list[list[int]] = []
        self.budget = budget

    def state(self) -> int:
        self.budget.charge()
        if len(self.transitions) >= MAX_STATES:
            raise _error(f"pattern needs more than {MAX_STATES} states")
        self.transitions.append([])
        self.epsilon.append([])
        return len(self.transitions) - 1

    def build(self, node: Pattern, start: int) -> int:
        """Add ``node`` starting at ``start``; return its end state."""
        kind = node[0]
        if kind == "chars":
            end = self.state()
            ranges, negated = node[1], node[2]
            assert isinstance(ranges, tuple) and isinstance(negated, bool)
            self.transitions[start].append((ranges, negated, end))
            return end
        if kind == "seq":
            items = node[1]
            assert isinstance(items, list)
            current = start
            for item in items:
                current = self.build(item, current)
            return current
        if kind == "alt":
            options = node[1]
            assert isinstance(options, list)
            end = self.state()
            for option in options:
                begin = self.state()
                self.epsilon[start].append(begin)
                self.epsilon[self.build(option, begin)].append(end)
            return end
        inner, low, high = node[1], node[2], node[3]
        assert isinstance(inner, tuple) and isinstance(low, int) and isinstance(high, int)
        current = start
        for _ in range(low):
            current = self.build(inner, current)
        end = self.state()
        self.epsilon[current].append(end)
        for _ in range(high - low):
            current = self.build(inner, current)
            self.epsilon[current].append(end)
        return end


def compile_regex(pattern: str, flags: str, budget: Budget) -> FiniteRegex:
    """Compile ``/pattern/flags``. Raises :class:`MvuSyntaxError` for anything not finite."""
    if flags:
        raise _error("flags are not allowed")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise _error(f"pattern longer than {MAX_PATTERN_CHARS} characters")
    if not (pattern.startswith("^") and pattern.endswith("$")) or pattern.endswith("\\$"):
        raise _error("the pattern must be anchored with ^...$")
    parser = _PatternParser(pattern[1:-1], budget)
    tree = parser.alternation()
    if parser.pos != len(parser.text):
        raise _error("unbalanced parenthesis")
    builder = _Builder(budget)
    start = builder.state()
    accept = builder.build(tree, start)
    return FiniteRegex(
        pattern,
        tuple(tuple(t) for t in builder.transitions),
        tuple(tuple(e) for e in builder.epsilon),
        start,
        accept,
    )
