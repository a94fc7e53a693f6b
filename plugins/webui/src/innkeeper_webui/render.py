"""Chat Markdown to safe HTML: markdown-it-py renders, nh3 (ammonia) sanitizes.

SillyTavern shows messages as Markdown with two common RP conventions on top: ``*actions*`` read
as italics (plain Markdown emphasis) and quoted speech is highlighted. Quotes are marked while the
Markdown tokens are still text, so quote marks inside code, URLs or tag attributes are untouched.
Messages may carry HTML (cards often use it), so the rendered HTML is always sanitized with an
allow-list: no scripts, no event handlers, no styles, links forced to ``rel="noopener noreferrer"``.
"""

from __future__ import annotations

import re
from typing import Final

import nh3
from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore
from markdown_it.token import Token

#: Texts per render request (``POST /webui/api/render``): one page of chat messages.
MAX_RENDER_TEXTS: Final = 256
#: UTF-8 bytes of one request body (a page of long replies fits).
MAX_RENDER_BODY_BYTES: Final = 4 << 20
#: Characters of one text; longer texts are refused rather than truncated.
MAX_RENDER_TEXT_CHARS: Final = 512 * 1024

#: Straight and curly double quotes, and CJK corner brackets, around speech.
_QUOTE: Final = re.compile(r'"[^"\n]+"|“[^”\n]+”|「[^」\n]+」|『[^』\n]+』')

_TAGS: Final = frozenset(
    {
        "a", "abbr", "b", "blockquote", "br", "code", "del", "details", "div", "em", "h1", "h2",
        "h3", "h4", "h5", "h6", "hr", "i", "img", "ins", "kbd", "li", "mark", "ol", "p", "pre",
        "q", "s", "small", "span", "strong", "sub", "summary", "sup", "table", "tbody", "td",
        "tfoot", "th", "thead", "tr", "u", "ul",
    }
)  # fmt: skip
_ATTRIBUTES: Final = {
    "a": {"href", "title"},
    "img": {"src", "alt", "title", "width", "height"},
    "td": {"align"},
    "th": {"align"},
    "ol": {"start"},
}
_CLASSES: Final = {"span": {"quote"}}
_URL_SCHEMES: Final = frozenset({"http", "https", "mailto"})


def _mark_quotes(state: StateCore) -> None:
    """Split inline text tokens so quoted speech becomes ``<span class="quote">…</span>``."""
    for block in state.tokens:
        if block.type != "inline" or not block.children:
            continue
        children: list[Token] = []
        for token in block.children:
            if token.type != "text" or not _QUOTE.search(token.content):
                children.append(token)
                continue
            pos = 0
            for match in _QUOTE.finditer(token.content):
                if match.start() > pos:
                    children.append(_text(token.content[pos : match.start()]))
                children.append(_html('<span class="quote">'))
                children.append(_text(match.group(0)))
                children.append(_html("</span>"))
                pos = match.end()
            if pos < len(token.content):
                children.append(_text(token.content[pos:]))
        block.children = children


def _text(content: str) -> Token:
    token = Token("text", "", 0)
    token.content = content
    return token


def _html(content: str) -> Token:
    token = Token("html_inline", "", 0)
    token.content = content
    return token


def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": True, "breaks": True, "linkify": False})
    md.enable("strikethrough").enable("table")
    md.core.ruler.push("innkeeper_quotes", _mark_quotes)
    return md


_MD: Final = _parser()


def render_markdown(text: str) -> str:
    """Render one chat message as sanitized HTML."""
    html = _MD.render(text)
    return nh3.clean(
        html,
        tags=set(_TAGS),
        attributes={k: set(v) for k, v in _ATTRIBUTES.items()},
        allowed_classes={k: set(v) for k, v in _CLASSES.items()},
        url_schemes=set(_URL_SCHEMES),
        link_rel="noopener noreferrer",
        strip_comments=True,
    )
