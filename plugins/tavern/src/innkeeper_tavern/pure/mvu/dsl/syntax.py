"""A bounded parser for the JavaScript subset schema declarations are written in.

docs/contract/mvu-dsl.md#compatibility (Declaration functions, Pure expressions): arrow and
function expressions with identifier/default parameters, ``const``/``let``, ``if``/``return``,
``for (const x of array)``, object spread, optional member chains, template strings, regex
literals and the usual operators. Anything else — classes, ``this``, ``arguments``, other
loops, ``async``/generators, rest parameters, ``new``, ``try`` — is a syntax error
(:class:`~innkeeper_tavern.pure.mvu.limits.MvuSyntaxError`), never executed. Destructuring (object
and array patterns in parameters, ``const``/``let`` and ``for...of``) is accepted from interpreter
version 3 on; versions 1 and 2 reject it as before.

The AST is made of tuples ``(kind, ...)``; it is data, never compiled to Python.
"""

from __future__ import annotations

from typing import Any, Final

from innkeeper_tavern.pure.mvu.limits import MvuBudgetError, MvuSyntaxError

#: Characters of one declaration source (docs/contract/mvu-dsl.md#declarations: source
#: is limited to 64 Ki code units).
MAX_SOURCE_CHARS: Final = 64 * 1024
#: AST nodes of one declaration (a static syntax budget, docs/contract/mvu-dsl.md#declarations).
MAX_AST_NODES: Final = 50_000
#: Nesting depth of expressions and statements while parsing (static syntax budget,
#: docs/contract/mvu-dsl.md#declarations).
MAX_SYNTAX_DEPTH: Final = 64

Node = tuple[Any, ...]

_PUNCTUATORS: Final = sorted(
    [
        "...", "=>", "===", "!==", "**", "??", "?.", "&&", "||", "==", "!=", "<=", ">=",
        "+=", "-=", "*=", "/=", "++", "--", "{", "}", "(", ")", "[", "]", ";", ",", "<", ">",
        "+", "-", "*", "/", "%", "!", "?", ":", "=", ".", "&", "|", "^", "~",
    ],
    key=len,
    reverse=True,
)  # fmt: skip
_KEYWORDS: Final = frozenset(
    [
        "const", "let", "var", "function", "return", "if", "else", "for", "of", "true", "false",
        "null", "undefined", "typeof", "import", "export", "from", "default", "new", "class",
        "this", "while", "do", "switch", "try", "catch", "throw", "async", "await", "yield",
        "arguments", "delete", "in", "instanceof", "void", "with", "break", "continue",
    ]
)  # fmt: skip
_REJECTED_WORDS: Final = frozenset(
    ["new", "class", "this", "while", "do", "switch", "try", "catch", "throw", "async", "await",
     "yield", "arguments", "delete", "instanceof", "void", "with", "break", "continue", "in"]
)  # fmt: skip
_REGEX_PREFIX: Final = frozenset(
    ["(", ",", "=", ":", "[", "!", "&", "|", "?", "{", "}", ";", "=>", "&&", "||", "??", "==",
     "===", "!=", "!==", "+", "-", "*", "%", "<", ">", "<=", ">=", "return", "typeof"]
)  # fmt: skip
_ESCAPES: Final = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "v": "\v", "0": "\0"}


class Token:
    """One token: ``kind`` is num/str/template/regex/id/kw/op/end."""

    __slots__ = ("kind", "pos", "value")

    def __init__(self, kind: str, value: Any, pos: int) -> None:
        self.kind = kind
        self.value = value
        self.pos = pos

    def __repr__(self) -> str:
        return f"Token({self.kind}, {self.value!r})"


def _error(message: str, pos: int) -> MvuSyntaxError:
    return MvuSyntaxError(
        f"schema declaration: {message} at offset {pos}", code="MVU_SCHEMA_SYNTAX"
    )


def _read_escape(text: str, j: int) -> tuple[str, int]:
    esc = text[j]
    if esc == "u":
        if text.startswith("{", j + 1):
            end = text.find("}", j + 2)
            if end < 0:
                raise _error("bad unicode escape", j)
            return chr(int(text[j + 2 : end], 16)), end + 1
        return chr(int(text[j + 1 : j + 5], 16)), j + 5
    if esc == "x":
        return chr(int(text[j + 1 : j + 3], 16)), j + 3
    if esc in "\r\n":
        return "", j + 1
    return _ESCAPES.get(esc, esc), j + 1


def tokenize(text: str) -> list[Token]:
    """Tokens of ``text`` (comments dropped). Raises :class:`MvuSyntaxError`."""
    if len(text) > MAX_SOURCE_CHARS:
        raise MvuBudgetError(f"schema declaration longer than {MAX_SOURCE_CHARS} characters")
    tokens: list[Token] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
            continue
        if text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise _error("unterminated comment", i)
            i = end + 2
            continue
        start = i
        if ch.isdigit() or (ch == "." and i + 1 < n and text[i + 1].isdigit()):
            j = i
            if text.startswith(("0x", "0X"), i):
                j = i + 2
                while j < n and text[j] in "0123456789abcdefABCDEF_":
                    j += 1
                value: Any = float(int(text[i + 2 : j].replace("_", ""), 16))
            else:
                while j < n and (text[j].isdigit() or text[j] in "._"):
                    j += 1
                if j < n and text[j] in "eE":
                    j += 1
                    if j < n and text[j] in "+-":
                        j += 1
                    while j < n and text[j].isdigit():
                        j += 1
                try:
                    value = float(text[i:j].replace("_", ""))
                except ValueError as exc:
                    raise _error("bad number", i) from exc
            tokens.append(Token("num", value, start))
            i = j
            continue
        if ch in "'\"":
            out: list[str] = []
            j = i + 1
            while True:
                if j >= n or text[j] in "\r\n":
                    raise _error("unterminated string", i)
                c = text[j]
                if c == ch:
                    break
                if c == "\\":
                    piece, j = _read_escape(text, j + 1)
                    out.append(piece)
                    continue
                out.append(c)
                j += 1
            tokens.append(Token("str", "".join(out), start))
            i = j + 1
            continue
        if ch == "`":
            parts: list[Any] = []
            buf: list[str] = []
            j = i + 1
            while True:
                if j >= n:
                    raise _error("unterminated template", i)
                c = text[j]
                if c == "`":
                    break
                if c == "\\":
                    piece, j = _read_escape(text, j + 1)
                    buf.append(piece)
                    continue
                if text.startswith("${", j):
                    parts.append("".join(buf))
                    buf = []
                    depth, k = 1, j + 2
                    while k < n and depth:
                        if text[k] == "{":
                            depth += 1
                        elif text[k] == "}":
                            depth -= 1
                        k += 1
                    if depth:
                        raise _error("unterminated template substitution", j)
                    parts.append(tokenize(text[j + 2 : k - 1]))
                    j = k
                    continue
                buf.append(c)
                j += 1
            parts.append("".join(buf))
            tokens.append(Token("template", parts, start))
            i = j + 1
            continue
        if ch == "/" and (not tokens or _regex_allowed(tokens[-1])):
            j = i + 1
            in_class = False
            while True:
                if j >= n or text[j] in "\r\n":
                    raise _error("unterminated regex", i)
                c = text[j]
                if c == "\\":
                    j += 2
                    continue
                if c == "[":
                    in_class = True
                elif c == "]":
                    in_class = False
                elif c == "/" and not in_class:
                    break
                j += 1
            body = text[i + 1 : j]
            k = j + 1
            while k < n and text[k].isalpha():
                k += 1
            tokens.append(Token("regex", (body, text[j + 1 : k]), start))
            i = k
            continue
        if ch.isalpha() or ch in "_$" or ord(ch) > 127:
            j = i + 1
            while j < n and (text[j].isalnum() or text[j] in "_$" or ord(text[j]) > 127):
                j += 1
            word = text[i:j]
            tokens.append(Token("kw" if word in _KEYWORDS else "id", word, start))
            i = j
            continue
        for p in _PUNCTUATORS:
            if text.startswith(p, i):
                tokens.append(Token("op", p, start))
                i += len(p)
                break
        else:
            raise _error(f"unexpected character {ch!r}", i)
    tokens.append(Token("end", None, n))
    return tokens


def _regex_allowed(prev: Token) -> bool:
    if prev.kind == "op":
        return prev.value in _REGEX_PREFIX
    return prev.kind == "kw" and prev.value in ("return", "typeof")


class Parser:
    """Recursive descent over the tokens, producing tuple AST nodes."""

    def __init__(self, tokens: list[Token], patterns: bool = False) -> None:
        self.tokens = tokens
        #: Interpreter version 3: object/array destructuring in parameters, ``const``/``let`` and
        #: ``for...of`` (docs/mvu.md "Deliberate differences from MVU").
        self.patterns = patterns
        self.pos = 0
        self.nodes = 0
        self.depth = 0

    # -------------------------------------------------------------- helpers
    def peek(self, offset: int = 0) -> Token:
        return self.tokens[min(self.pos + offset, len(self.tokens) - 1)]

    def take(self) -> Token:
        tok = self.tokens[self.pos]
        self.pos += 1
        return tok

    def at(self, value: str, kind: str = "op") -> bool:
        tok = self.peek()
        return tok.kind == kind and tok.value == value

    def at_kw(self, value: str) -> bool:
        return self.at(value, "kw")

    def eat(self, value: str, kind: str = "op") -> bool:
        if self.at(value, kind):
            self.pos += 1
            return True
        return False

    def expect(self, value: str, kind: str = "op") -> Token:
        if not self.at(value, kind):
            tok = self.peek()
            raise _error(f"expected {value!r}, found {tok.value!r}", tok.pos)
        return self.take()

    def node(self, *parts: Any) -> Node:
        self.nodes += 1
        if self.nodes > MAX_AST_NODES:
            raise MvuBudgetError(f"schema declaration has more than {MAX_AST_NODES} syntax nodes")
        return tuple(parts)

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_SYNTAX_DEPTH:
            raise _error("nested too deeply", self.peek().pos)

    def leave(self) -> None:
        self.depth -= 1

    def ident(self) -> str:
        tok = self.peek()
        if tok.kind != "id":
            raise _error(f"expected a name, found {tok.value!r}", tok.pos)
        self.pos += 1
        return str(tok.value)

    def semicolon(self) -> None:
        self.eat(";")

    # -------------------------------------------------------------- statements
    def program(self) -> Node:
        body = []
        while self.peek().kind != "end":
            body.append(self.statement(top=True))
        return self.node("program", body)

    def statement(self, top: bool = False) -> Node:
        self.enter()
        try:
            return self._statement(top)
        finally:
            self.leave()

    def _statement(self, top: bool) -> Node:
        tok = self.peek()
        if tok.kind == "kw":
            word = tok.value
            if word == "import" and top:
                return self.import_statement()
            if word == "export" and top:
                self.take()
                if self.eat("default", "kw"):
                    expr = self.expression()
                    self.semicolon()
                    return self.node("expr", expr)
                return self.statement(top=True)
            if word in ("const", "let", "var"):
                return self.declaration()
            if word == "function":
                self.take()
                name = self.ident()
                fn = self.function_rest(name)
                return self.node("let", "const", [(name, fn)])
            if word == "return":
                self.take()
                value = None if self.at(";") or self.at("}") else self.expression()
                self.semicolon()
                return self.node("return", value)
            if word == "if":
                self.take()
                self.expect("(")
                test = self.expression()
                self.expect(")")
                then = self.statement()
                other = self.statement() if self.eat("else", "kw") else None
                return self.node("if", test, then, other)
            if word == "for":
                return self.for_of()
            if word in _REJECTED_WORDS:
                raise _error(f"{word!r} is not supported in schema declarations", tok.pos)
        if self.at("{"):
            return self.block()
        if self.eat(";"):
            return self.node("block", [])
        expr = self.expression()
        self.semicolon()
        return self.node("expr", expr)

    def import_statement(self) -> Node:
        self.expect("import", "kw")
        names: list[str] = []
        if self.peek().kind == "str":
            source = self.take().value
            self.semicolon()
            return self.node("import", names, source)
        if self.eat("{"):
            while not self.eat("}"):
                name = self.ident()
                if self.peek().kind == "id" and self.peek().value == "as":
                    self.take()
                    name = self.ident()
                names.append(name)
                self.eat(",")
        elif self.eat("*"):
            if not (self.peek().kind == "id" and self.peek().value == "as"):
                raise _error("expected 'as'", self.peek().pos)
            self.take()
            names.append(self.ident())
        else:
            names.append(self.ident())
        self.expect("from", "kw")
        tok = self.take()
        if tok.kind != "str":
            raise _error("expected a module name", tok.pos)
        self.semicolon()
        return self.node("import", names, tok.value)

    def binding(self) -> Any:
        """A binding target: a name, or (version 3) an object or array pattern."""
        if self.at("{") or self.at("["):
            if not self.patterns:
                raise _error("destructuring is not supported", self.peek().pos)
            return self.object_pattern() if self.at("{") else self.array_pattern()
        return self.ident()

    def object_pattern(self) -> Node:
        """``{a, b: c, d = 1, 'e f': g, ...rest}`` → ``("objpat", [(key, target, default)],
        rest)``."""
        self.expect("{")
        props: list[tuple[str, Any, Node | None]] = []
        rest: str | None = None
        while not self.eat("}"):
            if self.eat("..."):
                rest = self.ident()
                self.expect("}")
                break
            tok = self.take()
            if tok.kind not in ("id", "kw", "str"):
                raise _error("bad key in a destructuring pattern", tok.pos)
            key = str(tok.value)
            if self.eat(":"):
                target: Any = self.binding()
            elif tok.kind == "id":
                target = key
            else:
                raise _error("expected ':' in a destructuring pattern", self.peek().pos)
            default = self.assignment() if self.eat("=") else None
            props.append((key, target, default))
            if not self.eat(","):
                self.expect("}")
                break
        return self.node("objpat", props, rest)

    def array_pattern(self) -> Node:
        """``[a, , b = 1, ...rest]`` → ``("arrpat", [(target, default) | None], rest)``."""
        self.expect("[")
        items: list[tuple[Any, Node | None] | None] = []
        rest: str | None = None
        while not self.eat("]"):
            if self.eat(","):
                items.append(None)
                continue
            if self.eat("..."):
                rest = self.ident()
                self.expect("]")
                break
            target = self.binding()
            default = self.assignment() if self.eat("=") else None
            items.append((target, default))
            if not self.eat(","):
                self.expect("]")
                break
        return self.node("arrpat", items, rest)

    def declaration(self) -> Node:
        kind = self.take().value
        items = []
        while True:
            name = self.binding()
            value = self.assignment() if self.eat("=") else None
            if value is None and not isinstance(name, str):
                raise _error("a destructuring declaration needs a value", self.peek().pos)
            items.append((name, value))
            if not self.eat(","):
                break
        self.semicolon()
        return self.node("let", "let" if kind == "let" else "const", items)

    def block(self) -> Node:
        self.expect("{")
        body = []
        while not self.eat("}"):
            if self.peek().kind == "end":
                raise _error("unterminated block", self.peek().pos)
            body.append(self.statement())
        return self.node("block", body)

    def for_of(self) -> Node:
        self.expect("for", "kw")
        self.expect("(")
        if not (self.eat("const", "kw") or self.eat("let", "kw")):
            raise _error("only 'for (const item of array)' loops are supported", self.peek().pos)
        name = self.binding()
        self.expect("of", "kw")
        iterable = self.expression()
        self.expect(")")
        body = self.statement()
        return self.node("forof", name, iterable, body)

    # -------------------------------------------------------------- expressions
    def expression(self) -> Node:
        expr = self.assignment()
        if self.at(","):
            raise _error("comma expressions are not supported", self.peek().pos)
        return expr

    def assignment(self) -> Node:
        self.enter()
        try:
            if self.is_arrow():
                return self.arrow()
            left = self.conditional()
            if self.peek().kind == "op" and self.peek().value in ("=", "+=", "-=", "*=", "/="):
                op = self.take().value
                if left[0] not in ("name", "member"):
                    raise _error("invalid assignment target", self.peek().pos)
                value = self.assignment()
                return self.node("assign", op, left, value)
            return left
        finally:
            self.leave()

    def is_arrow(self) -> bool:
        tok = self.peek()
        if tok.kind == "kw" and tok.value == "async":
            raise _error("async functions are not supported", tok.pos)
        if tok.kind == "id":
            return self.peek(1).kind == "op" and self.peek(1).value == "=>"
        if not (tok.kind == "op" and tok.value == "("):
            return False
        depth = 0
        k = self.pos
        while k < len(self.tokens):
            t = self.tokens[k]
            if t.kind == "op" and t.value in ("(", "[", "{"):
                depth += 1
            elif t.kind == "op" and t.value in (")", "]", "}"):
                depth -= 1
                if depth == 0:
                    nxt = self.tokens[k + 1] if k + 1 < len(self.tokens) else t
                    return nxt.kind == "op" and nxt.value == "=>"
            elif t.kind == "end":
                return False
            k += 1
        return False

    def params(self) -> list[tuple[Any, Node | None]]:
        params: list[tuple[Any, Node | None]] = []
        self.expect("(")
        while not self.eat(")"):
            if self.at("...") or (not self.patterns and (self.at("{") or self.at("["))):
                raise _error("rest and destructuring parameters are not supported", self.peek().pos)
            name = self.binding()
            default = self.assignment() if self.eat("=") else None
            params.append((name, default))
            if not self.eat(","):
                self.expect(")")
                break
        return params

    def arrow(self) -> Node:
        if self.peek().kind == "id":
            params: list[tuple[Any, Node | None]] = [(self.ident(), None)]
        else:
            params = self.params()
        self.expect("=>")
        body = self.block() if self.at("{") else self.node("return", self.assignment())
        return self.node("function", params, body, "<arrow>")

    def function_rest(self, name: str) -> Node:
        if self.at("*"):
            raise _error("generators are not supported", self.peek().pos)
        params = self.params()
        body = self.block()
        return self.node("function", params, body, name)

    def conditional(self) -> Node:
        test = self.binary(0)
        if self.eat("?"):
            then = self.assignment()
            self.expect(":")
            other = self.assignment()
            return self.node("cond", test, then, other)
        return test

    _PRECEDENCE: Final = {
        "??": 1,
        "||": 2,
        "&&": 3,
        "==": 4,
        "!=": 4,
        "===": 4,
        "!==": 4,
        "<": 5,
        ">": 5,
        "<=": 5,
        ">=": 5,
        "+": 6,
        "-": 6,
        "*": 7,
        "/": 7,
        "%": 7,
        "**": 8,
    }

    def binary(self, min_prec: int) -> Node:
        left = self.unary()
        while True:
            tok = self.peek()
            prec = self._PRECEDENCE.get(tok.value) if tok.kind == "op" else None
            if prec is None or prec < min_prec:
                return left
            self.take()
            self.enter()
            try:
                # `**` is right-associative; everything else is left-associative.
                right = self.binary(prec if tok.value == "**" else prec + 1)
            finally:
                self.leave()
            left = self.node("binary", tok.value, left, right)

    def unary(self) -> Node:
        tok = self.peek()
        if tok.kind == "op" and tok.value in ("!", "-", "+"):
            self.take()
            self.enter()
            try:
                return self.node("unary", tok.value, self.unary())
            finally:
                self.leave()
        if tok.kind == "kw" and tok.value == "typeof":
            self.take()
            return self.node("unary", "typeof", self.unary())
        if tok.kind == "op" and tok.value in ("++", "--", "~"):
            raise _error(f"{tok.value!r} is not supported", tok.pos)
        return self.postfix()

    def postfix(self) -> Node:
        expr = self.primary()
        while True:
            if self.eat("."):
                tok = self.take()
                if tok.kind not in ("id", "kw"):
                    raise _error("expected a property name", tok.pos)
                expr = self.node("member", expr, self.node("lit", tok.value), False)
            elif self.eat("?."):
                if self.at("("):
                    expr = self.node("call", expr, self.arguments(), True)
                elif self.eat("["):
                    key = self.expression()
                    self.expect("]")
                    expr = self.node("member", expr, key, True)
                else:
                    tok = self.take()
                    if tok.kind not in ("id", "kw"):
                        raise _error("expected a property name", tok.pos)
                    expr = self.node("member", expr, self.node("lit", tok.value), True)
            elif self.eat("["):
                key = self.expression()
                self.expect("]")
                expr = self.node("member", expr, key, False)
            elif self.at("("):
                expr = self.node("call", expr, self.arguments(), False)
            elif self.at("++") or self.at("--"):
                raise _error("'++'/'--' are not supported", self.peek().pos)
            else:
                return expr

    def arguments(self) -> list[Node]:
        self.expect("(")
        args = []
        while not self.eat(")"):
            if self.at("..."):
                raise _error("spread arguments are not supported", self.peek().pos)
            args.append(self.assignment())
            if not self.eat(","):
                self.expect(")")
                break
        return args

    def primary(self) -> Node:
        tok = self.take()
        kind, value = tok.kind, tok.value
        if kind == "num" or kind == "str":
            return self.node("lit", value)
        if kind == "template":
            parts: list[Any] = []
            for part in value:
                if isinstance(part, str):
                    parts.append(part)
                else:
                    sub = Parser(part)
                    sub.nodes = self.nodes
                    expr = sub.expression()
                    if sub.peek().kind != "end":
                        raise _error("bad template substitution", tok.pos)
                    self.nodes = sub.nodes
                    parts.append(expr)
            return self.node("template", parts)
        if kind == "regex":
            return self.node("regex", value[0], value[1])
        if kind == "id":
            return self.node("name", value)
        if kind == "kw":
            if value == "true":
                return self.node("lit", True)
            if value == "false":
                return self.node("lit", False)
            if value == "null":
                return self.node("lit", None)
            if value == "undefined":
                return self.node("undefined")
            if value == "function":
                name = self.ident() if self.peek().kind == "id" else "<function>"
                return self.function_rest(name)
            raise _error(f"{value!r} is not supported here", tok.pos)
        if kind == "op":
            if value == "(":
                expr = self.expression()
                self.expect(")")
                return expr
            if value == "[":
                items = []
                while not self.eat("]"):
                    if self.eat("..."):
                        items.append(self.node("spread", self.assignment()))
                    else:
                        items.append(self.assignment())
                    if not self.eat(","):
                        self.expect("]")
                        break
                return self.node("array", items)
            if value == "{":
                return self.object_literal()
        raise _error(f"unexpected {value!r}", tok.pos)

    def object_literal(self) -> Node:
        entries: list[Any] = []
        while not self.eat("}"):
            if self.eat("..."):
                entries.append(("spread", self.assignment()))
            else:
                tok = self.take()
                if tok.kind in ("id", "kw", "str"):
                    key: Any = str(tok.value)
                elif tok.kind == "num":
                    number = tok.value
                    key = str(int(number)) if float(number).is_integer() else repr(number)
                elif tok.kind == "op" and tok.value == "[":
                    key = self.expression()
                    self.expect("]")
                else:
                    raise _error("bad object key", tok.pos)
                if self.eat(":"):
                    entries.append(("prop", key, self.assignment()))
                elif self.at("("):
                    entries.append(("prop", key, self.function_rest(str(key))))
                elif isinstance(key, str) and tok.kind == "id":
                    entries.append(("prop", key, self.node("name", key)))
                else:
                    raise _error("expected ':'", self.peek().pos)
            if not self.eat(","):
                self.expect("}")
                break
        return self.node("object", entries)


def parse_program(source: str, version: int = 2) -> Node:
    """Parse a whole declaration script for interpreter ``version`` (3 adds destructuring).
    Raises :class:`MvuSyntaxError`/:class:`MvuBudgetError`."""
    parser = Parser(tokenize(source), patterns=version >= 3)
    try:
        return parser.program()
    except RecursionError as exc:  # pragma: no cover - MAX_SYNTAX_DEPTH binds first
        raise MvuBudgetError("schema declaration nested too deeply") from exc
