"""Finding commands in reply text (docs/mvu.md#commands, docs/mvu.md#json-patch).

The whole text is scanned, not only ``<UpdateVariable>`` envelopes (MVU does the same, so prose
that quotes a command runs it). Two forms are recognised:

* function commands ``_.verb(args);`` with an optional ``// reason``: the verbs are
  ``set add insert assign remove unset delete`` (lowercase), ``(`` right after the verb, ``;``
  right after the matching ``)``;
* JSON Patch blocks ``<JSONPatch>``/``<json_patch>`` (any letter case, the closing tag spelled as
  the opening one) holding an array of ``replace delta add insert remove move`` operations.

Commands keep their textual order; all operations of one block share the block's position.
:class:`Command` is also the view a command processor receives (``type args full_match reason``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final

from .jsvalue import UNDEFINED, Json, stringify
from .limits import MAX_COMMANDS_PER_REPLY, MAX_REPLY_CHARS, Budget, MvuBudgetError, MvuSyntaxError
from .paths import parse_json_pointer
from .textparse import ParseError, parse_string

#: Verbs of function commands and their argument counts (min, max or None for unbounded).
ARITY: Final[dict[str, tuple[int, int | None]]] = {
    "set": (2, None),
    "add": (2, 2),
    "insert": (2, None),
    "assign": (2, None),
    "remove": (1, None),
    "unset": (1, None),
    "delete": (1, None),
}
#: Alias normalisation applied before execution (docs/mvu.md#commands).
ALIASES: Final[dict[str, str]] = {"assign": "insert", "remove": "delete", "unset": "delete"}
#: JSON Patch operations understood (docs/mvu.md#json-patch; ``copy`` and ``test`` are dropped).
PATCH_OPS: Final = frozenset(["replace", "delta", "add", "insert", "remove", "move"])
#: Characters searched for the ``)`` of a ``(`` that starts inside quotes of the text-wide
#: scan (see :class:`_ParenIndex`); a longer command is not a command. An interpreter budget
#: in the sense of docs/contract/mvu.md#durable-history.
MAX_COMMAND_CHARS: Final = 64 * 1024
#: Separate scans (see :class:`_ParenIndex`) allowed to find nothing in one reply (same
#: source as :data:`MAX_COMMAND_CHARS`).
MAX_FAILED_SCANS: Final = 16
#: Reason given to every command translated from a JSON Patch block.
JSON_PATCH_REASON: Final = "json_patch"

_FUNCTION_RE: Final = re.compile(r"_\.(set|insert|assign|remove|unset|delete|add)\(")
_PATCH_RE: Final = re.compile(r"<(json_?patch)>((?:(?!<\1>).)*?)</\1>", re.IGNORECASE | re.DOTALL)
_ENVELOPE_OPEN: Final = re.compile(r"<UpdateVariable>", re.IGNORECASE)
_ENVELOPE_CLOSE: Final = re.compile(r"</UpdateVariable>", re.IGNORECASE)
_FENCE_OPEN: Final = re.compile(r"^\s*```[^\n]*\n")
_FENCE_CLOSE: Final = re.compile(r"\n?\s*```\s*$")
_QUOTES: Final = "'\"`"


@dataclass(slots=True)
class Command:
    """One extracted command.

    ``type``/``args``/``full_match``/``reason`` are MVU's command view (raw argument strings,
    quotes kept, before alias normalisation). Commands from a JSON Patch block also carry the
    decoded pointer (``segments``), the insertion ``key`` and the operation's ``value`` so that
    nothing is re-parsed from strings; ``source`` is ``"function"`` or ``"json_patch"``.
    """

    type: str
    args: list[str]
    full_match: str
    reason: str
    position: int = 0
    source: str = "function"
    segments: list[str] | None = None
    key: str | int | None = None
    value: Json = field(default=UNDEFINED)
    from_segments: list[str] | None = None

    def view(self) -> dict[str, Json]:
        """The plain command view ``{type, args, full_match, reason}``."""
        return {
            "type": self.type,
            "args": list(self.args),
            "full_match": self.full_match,
            "reason": self.reason,
        }


@dataclass(slots=True)
class ExtractIssue:
    """A part of the text that looked like an update but was ignored (not fatal)."""

    code: str
    message: str
    position: int


def split_parameters(text: str) -> list[str]:
    """MVU ``parseParameters``: split on commas outside quotes and brackets, trim each.

    A trailing empty argument is dropped; empty arguments in the middle are kept.
    """
    out: list[str] = []
    current: list[str] = []
    depth = 0
    quote = ""
    prev = ""
    for ch in text:
        if quote:
            if ch == quote and prev != "\\":
                quote = ""
        elif ch in _QUOTES and prev != "\\":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append("".join(current).strip())
            current = []
            prev = ch
            continue
        current.append(ch)
        prev = ch
    last = "".join(current).strip()
    if last:
        out.append(last)
    return out


_SCAN_RE: Final = re.compile(r"[()'\"`]")


def _matching_paren(text: str, start: int, limit: int) -> tuple[int, int]:
    """Index of the ``)`` closing the ``(`` before ``start`` (-1 when there is none) and the
    number of quote/parenthesis characters visited.

    Quotes (``'`` ``"`` `````) hide parentheses; a quote right after a backslash is not a quote.
    Only the first ``limit`` characters are searched.
    """
    depth = 1
    quote = ""
    visited = 0
    for match in _SCAN_RE.finditer(text, start, min(len(text), start + limit)):
        visited += 1
        i = match.start()
        ch = text[i]
        escaped = i > 0 and text[i - 1] == "\\"
        if quote:
            if ch == quote and not escaped:
                quote = ""
        elif ch in _QUOTES:
            if not escaped:
                quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i, visited
    return -1, visited


class _ParenIndex:
    """One pass over the text matching every ``(`` that lies outside quotes.

    A command whose ``(`` is outside quotes in this pass scans exactly as MVU's per-command
    scan would (same quote states from there on), so its match is looked up instead of
    rescanned: text with many unclosed ``_.set(`` costs one pass, not one pass per occurrence.
    A ``(`` inside quotes here (prose with an apostrophe before the commands does that) is
    scanned alone, at most :data:`MAX_COMMAND_CHARS` characters. A successful scan is paid for
    by the command it finds; after :data:`MAX_FAILED_SCANS` scans that find nothing, further
    occurrences inside quotes are not commands (``skipped`` counts them).
    """

    def __init__(self, text: str, budget: Budget) -> None:
        self.matches: dict[int, int] = {}
        self.outside: set[int] = set()
        self.failed = 0
        self.skipped = 0
        stack: list[int] = []
        quote = ""
        steps = 0
        for match in _SCAN_RE.finditer(text):
            steps += 1
            i = match.start()
            ch = text[i]
            escaped = i > 0 and text[i - 1] == "\\"
            if quote:
                if ch == quote and not escaped:
                    quote = ""
            elif ch in _QUOTES:
                if not escaped:
                    quote = ch
            elif ch == "(":
                stack.append(i)
                self.outside.add(i)
            elif ch == ")" and stack:
                self.matches[stack.pop()] = i
        budget.charge(steps + len(text) // 64)
        self.text = text
        self.budget = budget

    def close_of(self, open_index: int) -> int:
        if open_index in self.outside:
            return self.matches.get(open_index, -1)
        if self.failed >= MAX_FAILED_SCANS:
            self.skipped += 1
            return -1
        close, visited = _matching_paren(self.text, open_index + 1, MAX_COMMAND_CHARS)
        self.budget.charge(visited + 1)
        if close < 0:
            self.failed += 1
        return close


def _function_commands(text: str, budget: Budget, issues: list[ExtractIssue]) -> list[Command]:
    commands: list[Command] = []
    parens = _ParenIndex(text, budget)
    pos = 0
    while True:
        match = _FUNCTION_RE.search(text, pos)
        if match is None:
            if parens.skipped:
                issues.append(
                    ExtractIssue(
                        "MVU_SCAN_LIMIT",
                        f"{parens.skipped} command-like texts after {MAX_FAILED_SCANS} "
                        "unterminated ones were not scanned",
                        0,
                    )
                )
            return commands
        verb = match.group(1)
        args_start = match.end()
        close = parens.close_of(args_start - 1)
        if close < 0 or close + 1 >= len(text) or text[close + 1] != ";":
            pos = args_start
            continue
        end = close + 2
        reason = ""
        j = end
        while j < len(text) and text[j].isspace():
            j += 1
        if text.startswith("//", j):
            line_end = text.find("\n", j)
            if line_end < 0:
                line_end = len(text)
            line_end_content = line_end
            if line_end_content > j and text[line_end_content - 1] == "\r":
                line_end_content -= 1
            reason = text[j + 2 : line_end_content].strip()
            end = line_end_content
        args = split_parameters(text[args_start:close])
        low, high = ARITY[verb]
        if len(args) < low or (high is not None and len(args) > high):
            pos = args_start
            continue
        commands.append(
            Command(
                type=verb,
                args=args,
                full_match=text[match.start() : end],
                reason=reason,
                position=match.start(),
            )
        )
        if len(commands) > MAX_COMMANDS_PER_REPLY:
            raise MvuBudgetError(f"more than {MAX_COMMANDS_PER_REPLY} commands in one reply")
        pos = end


def _dot_path(segments: list[str]) -> str:
    return ".".join(segments)


def _patch_commands(ops: list[Json], position: int, issues: list[ExtractIssue]) -> list[Command]:
    out: list[Command] = []
    for op in ops:
        assert isinstance(op, dict)
        name = op["op"]
        full = stringify(op)
        if name not in PATCH_OPS:
            issues.append(
                ExtractIssue("MVU_PATCH_OP_IGNORED", f"JSON Patch op {name!r} is ignored", position)
            )
            continue
        if name == "move":
            source = op.get("from")
            target = op.get("path", op.get("to"))
            if not isinstance(source, str) or not isinstance(target, str):
                issues.append(
                    ExtractIssue("MVU_PATCH_INVALID", "move needs string from and path", position)
                )
                continue
            from_segments = parse_json_pointer(source)
            segments = parse_json_pointer(target)
            out.append(
                Command(
                    type="move",
                    args=[_dot_path(from_segments), _dot_path(segments)],
                    full_match=full,
                    reason=JSON_PATCH_REASON,
                    position=position,
                    source="json_patch",
                    segments=segments,
                    from_segments=from_segments,
                )
            )
            continue
        path = op["path"]
        assert isinstance(path, str)
        segments = parse_json_pointer(path)
        value = op.get("value", UNDEFINED)
        value_arg = stringify(value)
        if name == "replace":
            command = Command("set", [_dot_path(segments), value_arg], full, JSON_PATCH_REASON)
        elif name == "delta":
            command = Command("add", [_dot_path(segments), value_arg], full, JSON_PATCH_REASON)
        elif name == "remove":
            command = Command("delete", [_dot_path(segments)], full, JSON_PATCH_REASON)
        else:  # add / insert
            if not segments:
                command = Command("set", ["", value_arg], full, JSON_PATCH_REASON)
            else:
                last = segments[-1]
                key: str | int
                if last.isascii() and last.isdigit():
                    key, key_arg = int(last), last
                elif last == "-":
                    key, key_arg = "-", "'-'"
                else:
                    key, key_arg = last, f"'{last}'"
                command = Command(
                    "insert",
                    [_dot_path(segments[:-1]), key_arg, value_arg],
                    full,
                    JSON_PATCH_REASON,
                )
                command.key = key
                segments = segments[:-1]
        command.position = position
        command.source = "json_patch"
        command.segments = segments
        command.value = value
        out.append(command)
    return out


def _is_patch_list(value: Json) -> bool:
    if not isinstance(value, list):
        return False
    for op in value:
        if not isinstance(op, dict) or not isinstance(op.get("op"), str):
            return False
        if not isinstance(op.get("path"), str) and not (
            op.get("op") == "move" and isinstance(op.get("to"), str)
        ):
            return False
    return True


def _patch_blocks(text: str, budget: Budget, issues: list[ExtractIssue]) -> list[Command]:
    commands: list[Command] = []
    for match in _PATCH_RE.finditer(text):
        budget.charge(len(match.group(0)) // 8 + 1)
        body = _FENCE_CLOSE.sub("", _FENCE_OPEN.sub("", match.group(2)))
        try:
            parsed = parse_string(body, budget)
        except ParseError as exc:
            raise MvuSyntaxError(
                f"JSON Patch block at offset {match.start()} is not valid JSON/YAML: {exc}"
            ) from exc
        if parsed is None or parsed == []:
            continue
        if not _is_patch_list(parsed):
            issues.append(
                ExtractIssue(
                    "MVU_PATCH_NOT_A_LIST",
                    "JSON Patch block is not an array of {op, path} objects; ignored",
                    match.start(),
                )
            )
            continue
        assert isinstance(parsed, list)
        commands.extend(_patch_commands(parsed, match.start(), issues))
        if len(commands) > MAX_COMMANDS_PER_REPLY:
            raise MvuBudgetError(f"more than {MAX_COMMANDS_PER_REPLY} commands in one reply")
    return commands


def update_envelopes(text: str) -> list[tuple[int, int]]:
    """Spans of ``<UpdateVariable>…</UpdateVariable>`` blocks (any letter case).

    An unclosed envelope runs to the end of the text, as MVU reads the last block of a reply.
    """
    spans: list[tuple[int, int]] = []
    pos = 0
    while True:
        match = _ENVELOPE_OPEN.search(text, pos)
        if match is None:
            return spans
        close = _ENVELOPE_CLOSE.search(text, match.end())
        end = len(text) if close is None else close.start()
        spans.append((match.end(), end))
        pos = end if close is None else close.end()


def extract_commands(
    text: str,
    budget: Budget | None = None,
    issues: list[ExtractIssue] | None = None,
    *,
    envelopes_only: bool = False,
) -> list[Command]:
    """All commands in ``text``, in textual order (aliases not yet normalised).

    MVU scans the whole text; ``envelopes_only`` keeps only function commands inside
    ``<UpdateVariable>`` envelopes (JSON Patch blocks are envelopes themselves) — the rule for
    a greeting's opening updates (docs/contract/mvu-cards.md#opening-snapshot).

    Raises :class:`MvuSyntaxError` when a JSON Patch block cannot be parsed and
    :class:`MvuBudgetError` when the text or the command count exceeds its budget.
    """
    budget = budget if budget is not None else Budget()
    issues = issues if issues is not None else []
    if len(text) > MAX_REPLY_CHARS:
        raise MvuBudgetError(f"reply text longer than {MAX_REPLY_CHARS} characters")
    functions = _function_commands(text, budget, issues)
    if envelopes_only:
        spans = update_envelopes(text)
        functions = [c for c in functions if any(a <= c.position < b for a, b in spans)]
    commands = functions + _patch_blocks(text, budget, issues)
    commands.sort(key=lambda c: c.position)
    if len(commands) > MAX_COMMANDS_PER_REPLY:
        raise MvuBudgetError(f"more than {MAX_COMMANDS_PER_REPLY} commands in one reply")
    return commands
