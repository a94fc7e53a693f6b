"""Every citation of a docs page resolves: the page exists, and so does the anchor it names.

Code, tests, tools and docs cite the project's own pages as ``docs/<path>.md`` or
``docs/<path>.md#anchor`` (``docs/contract/mvu.md#durable-history``); a cited heading may follow
the page in double quotes (``docs/play.md "Opening drafts"``). Markdown pages link to each other
relatively (``[play.md](../play.md#the-path-jail)``, ``[above](#limits)``). An anchor is either an
explicit ``id``/``name`` attribute in the page (``<a id="durable-history"></a>``) or the slug
GitHub gives a heading: the heading's text lowercased, every character that is not a letter, a
digit, a space, ``-`` or ``_`` removed, spaces turned into ``-``, and ``-1``, ``-2``, ...
appended to repeats.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: What is scanned for citations: every member's code and tests, the tools, the docs.
ROOTS = ("core", "hostapi", "plugins", "tools", "tests", "docs", "README.md", "conftest.py")
SUFFIXES = frozenset({".py", ".js", ".mjs", ".md", ".toml", ".html", ".css", ".sh", ".txt"})
SKIP_DIRS = frozenset({".venv", "node_modules", "__pycache__", ".git", ".mypy_cache"})

# ``docs/<page>.md`` or ``docs/<page>.md#<anchor>``, not inside a longer path (``plugins/x/docs``).
_DOC_REF = re.compile(r"(?<![\w./-])docs/(?P<page>[\w./-]+?\.md)(?:#(?P<anchor>[\w-]+))?")
# A heading cited after the page: ``docs/<page>.md "Heading"`` (backticks and quotes around the path
# allowed); the quote may continue on the next line, so only its first line is read.
_QUOTED = re.compile(r"""^[`']*\s*"(?P<heading>[^"\n]+)""")
# ``[text](target)`` in Markdown; the target is checked when it is a relative path or ``#anchor``.
_MD_LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")
_FENCE = re.compile(r"^\s*(```|~~~)")
_ATX = re.compile(r"^\s{0,3}(#{1,6})\s+(?P<text>.*?)\s*#*\s*$")
_EXPLICIT_ID = re.compile(r"""<[a-zA-Z][^>]*?\b(?:id|name)\s*=\s*["'](?P<id>[^"']+)["']""")
_INLINE_LINK = re.compile(r"!?\[(?P<text>[^\]]*)\]\([^)]*\)")
_TAG = re.compile(r"<[^>]+>")


@dataclass(frozen=True, slots=True)
class Citation:
    source: Path
    line: int
    page: Path
    anchor: str | None
    heading: str | None
    written: str

    def where(self) -> str:
        return f"{shown(self.source)}:{self.line}: {self.written}"


def shown(path: Path) -> str:
    """``path`` relative to the repository when it lies inside it."""
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading (before de-duplication)."""
    text = _INLINE_LINK.sub(lambda m: m["text"], heading)
    text = _TAG.sub("", text)
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


@cache
def headings(page: Path) -> tuple[str, ...]:
    """The text of every ATX heading of ``page``, outside fenced code, in order."""
    found: list[str] = []
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced and (match := _ATX.match(line)):
            found.append(match["text"])
    return tuple(found)


@cache
def anchors(page: Path) -> frozenset[str]:
    """Every anchor of ``page``: heading slugs (repeats suffixed) and explicit ids."""
    seen: Counter[str] = Counter()
    result: set[str] = set()
    for heading in headings(page):
        base = slug(heading)
        result.add(base if seen[base] == 0 else f"{base}-{seen[base]}")
        seen[base] += 1
    text = page.read_text(encoding="utf-8")
    result.update(m["id"] for m in _EXPLICIT_ID.finditer(text))
    return frozenset(result)


def scanned_files() -> list[Path]:
    files: list[Path] = []
    for root in ROOTS:
        path = REPO / root
        if path.is_file():
            files.append(path)
            continue
        for file in sorted(path.rglob("*")):
            if SKIP_DIRS.intersection(file.relative_to(REPO).parts) or not file.is_file():
                continue
            if file.suffix in SUFFIXES:
                files.append(file)
    return files


def citations_in(file: Path) -> list[Citation]:
    found: list[Citation] = []
    text = file.read_text(encoding="utf-8", errors="replace")
    for number, line in enumerate(text.splitlines(), 1):
        for match in _DOC_REF.finditer(line):
            anchor = match["anchor"]
            quoted = None if anchor else _QUOTED.match(line[match.end() :])
            heading = quoted["heading"] if quoted else None
            page = REPO / "docs" / match["page"]
            found.append(Citation(file, number, page, anchor, heading, match[0]))
        if file.suffix == ".md":
            for match in _MD_LINK.finditer(line):
                target = match["target"]
                if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("/"):
                    continue  # a URL, a mail address, or a route written as a link
                path_part, _, anchor = target.partition("#")
                page = (file.parent / path_part).resolve() if path_part else file
                found.append(Citation(file, number, page, anchor or None, None, target))
    return found


def all_citations() -> list[Citation]:
    return [citation for file in scanned_files() for citation in citations_in(file)]


def dead(citation: Citation) -> str | None:
    """Why ``citation`` does not resolve, or ``None`` when it does."""
    page = citation.page
    if not page.exists():
        return "no such file"
    if page.suffix != ".md" or page.is_dir():
        return None
    if citation.anchor is not None and citation.anchor not in anchors(page):
        return f"no anchor #{citation.anchor} in {shown(page)}"
    if citation.heading is not None:
        cited = citation.heading.strip().rstrip("….").strip()
        if not any(h.replace("`", "").startswith(cited) for h in headings(page)):
            return f'no heading "{cited}" in {shown(page)}'
    return None


def test_slugs_follow_github() -> None:
    assert slug("Limits and failures") == "limits-and-failures"
    assert slug("HTTP: `/pmp-dsh-tavern/api/v1/mvu/*`") == "http-pmp-dsh-tavernapiv1mvu"
    assert slug("`innkeeper_plugin_setup`") == "innkeeper_plugin_setup"
    assert slug("Budgets: the profile budget and the 2 MiB ceiling") == (
        "budgets-the-profile-budget-and-the-2-mib-ceiling"
    )
    assert slug("See [the guide](guide.md) here") == "see-the-guide-here"
    assert slug("Tools, sandbox and approval") == "tools-sandbox-and-approval"


def test_the_scan_reads_every_citation_form(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        '# Title\n\n## Same\n\n## Same\n\n<a id="rule"></a>\n\n```\n# not a heading\n```\n',
        encoding="utf-8",
    )
    assert anchors(page) == {"title", "same", "same-1", "rule"}
    assert "not-a-heading" not in anchors(page)
    source = tmp_path / "code.py"
    source.write_text(
        '"""See docs/contract/mvu.md#facts and docs/play.md "Opening drafts" and\n'
        'plugins/x/docs/not-ours.md."""\n',
        encoding="utf-8",
    )
    found = citations_in(source)
    assert [(c.page.name, c.anchor, c.heading) for c in found] == [
        ("mvu.md", "facts", None),
        ("play.md", None, "Opening drafts"),
    ]
    doc = tmp_path / "doc.md"
    doc.write_text("[a](page.md#same-1) [b](#nowhere) [c](https://x.org/a.md)\n", encoding="utf-8")
    links = citations_in(doc)
    assert [(c.page.name, c.anchor) for c in links] == [
        ("page.md", "same-1"),
        ("doc.md", "nowhere"),
    ]
    assert dead(links[0]) is None
    assert dead(links[1]) is not None


def test_the_contract_pages_exist() -> None:
    """The section the code cites for its rules (docs/contract/README.md lists the pages)."""
    index = REPO / "docs" / "contract" / "README.md"
    listed = re.findall(r"\]\(([\w-]+\.md)\)", index.read_text(encoding="utf-8"))
    assert len(listed) >= 10
    for name in listed:
        assert (index.parent / name).is_file(), name


def test_every_cited_page_and_anchor_exists() -> None:
    citations = all_citations()
    assert sum(1 for c in citations if "contract" in c.page.parts) > 0
    broken = [f"{c.where()} — {reason}" for c in citations if (reason := dead(c)) is not None]
    assert not broken, "citations of docs pages or anchors that do not exist:\n" + "\n".join(broken)


#: A citation of the original bundle's contract files or its design note, which are not in the
#: repository: ``spec/<NAME>.md`` or a bare ``<NAME>.md`` of those names.
_OUTSIDE = re.compile(
    r"spec/(?:API|MVU|LOADER_CONTRACT)(?:_en)?\.md"
    r"|(?<![\w/-])(?:API|MVU|LOADER_CONTRACT|DESIGN)(?:_en)?\.md"
)


def test_nothing_cites_a_contract_file_outside_the_repository() -> None:
    """Rules are cited from docs/contract/; the files they were first written in are not here."""
    found = [
        f"{shown(file)}:{number}: {match[0]}"
        for file in scanned_files()
        for number, line in enumerate(
            file.read_text(encoding="utf-8", errors="replace").split("\n"), 1
        )
        for match in _OUTSIDE.finditer(line)
    ]
    assert not found, "cite docs/contract/<page>.md#<anchor> instead:\n" + "\n".join(found)


#: A citation of the reference notes kept beside the project (SillyTavern's formats, MVU's
#: language, the original implementation), which are not in the repository either: a
#: ``reference/<name>.md`` path, or the bare names of the two notes no docs page shares.
_REFERENCE_NOTE = re.compile(
    r"(?<![\w-])reference/[\w.-]+\.md|(?<![\w/.-])(?:sillytavern|original-implementation)\.md"
)
#: A numbered section sign: those notes' sections (``<sign>1.6``) were cited bare.
_SECTION = re.compile(r"\u00a7\s*\d")
#: The one outside document whose numbered sections are cited on purpose: an RFC.
_RFC_BEFORE = re.compile(r"\bRFC\s*\d+\s*$")


def outside_references(text: str) -> list[str]:
    """The citations in ``text`` of reference notes or numbered sections outside the repository."""
    found: list[str] = []
    for line in text.split("\n"):
        found.extend(match[0] for match in _REFERENCE_NOTE.finditer(line))
        found.extend(
            line[match.start() : match.end() + 4].strip()
            for match in _SECTION.finditer(line)
            if not _RFC_BEFORE.search(line[: match.start()])
        )
    return found


def test_the_reference_scan_reads_every_form() -> None:
    sign = "\u00a7"
    note = "reference/" + "mvu.md"
    assert outside_references(f"(`{note}` {sign}2.4) and ``{note}``") == [note, note, f"{sign}2.4)"]
    bare = "sillytavern" + ".md"
    assert outside_references(f"see {bare} {sign}3") == [bare, f"{sign}3"]
    assert outside_references(f"#: Field caps ({sign}6.8).") == [f"{sign}6.8)."]
    assert outside_references(f"RFC 2046 {sign}5.1.1: a boundary") == []
    assert outside_references("docs/mvu.md#commands and docs/worldbook.md#macros") == []


def test_nothing_cites_a_reference_note_outside_the_repository() -> None:
    """World-info, macro, MVU and original-implementation rules are cited from docs/ pages."""
    found = [
        f"{shown(file)}:{number}: {hit}"
        for file in scanned_files()
        for number, line in enumerate(
            file.read_text(encoding="utf-8", errors="replace").split("\n"), 1
        )
        for hit in outside_references(line)
    ]
    assert not found, "cite the docs page and anchor that states the rule instead:\n" + "\n".join(
        found
    )
