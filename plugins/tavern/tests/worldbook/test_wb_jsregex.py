"""JavaScript regex keys translated to the `regex` module with JavaScript's semantics.

The rule: docs/worldbook.md#wi-key-matching.
"""

from __future__ import annotations

import pytest

from innkeeper_tavern.pure.worldbook.jsregex import (
    MAX_REGEX_KEY_CHARS,
    JsRegexError,
    compile_js_regex,
    program_size,
    split_regex_key,
)


def matches(key: str, text: str) -> bool:
    compiled = compile_js_regex(key)
    assert compiled is not None
    return compiled.search(text, timeout=1.0)


@pytest.mark.parametrize(
    ("key", "shape"),
    [
        ("/abc/", ("abc", "")),
        ("/abc/gi", ("abc", "gi")),
        ("/a\\/b/", ("a/b", "")),  # the first \/ is unescaped
        ("/a/b/", None),  # unescaped slash inside
        ("/abc/x", None),  # unknown flag
        ("/abc/ii", None),
        ("abc", None),
        ("//", None),
    ],
)
def test_regex_key_shape(key: str, shape: tuple[str, str] | None) -> None:
    assert split_regex_key(key) == shape


@pytest.mark.parametrize(
    ("key", "text", "expected"),
    [
        (r"/\d+/", "abc ١٢٣", False),  # JS \d is ASCII
        (r"/\w+/", "港口", False),  # JS \w is ASCII
        (r"/\bcat\b/", "a cat.", True),
        (r"/\bcafe/", "écafe", True),  # é is not a word char: boundary before c
        (r"/\s/", "a\u00a0b", True),  # JS \s includes NBSP
        (r"/a.b/", "a\rb", False),  # JS . excludes \r
        (r"/a.b/s", "a\nb", True),
        (r"/end$/", "end\n", False),  # JS $ never matches before a trailing newline
        (r"/^two/m", "one\rtwo", True),  # JS line terminators include \r
        (r"/(?<word>ab)\k<word>/", "xabab", True),
        (r"/DRAGON/i", "a dragon", True),
        (r"/ДРАКОН/i", "злой дракон", True),  # JS i folds non-ASCII letters too
        (r"/[^]/", "x", True),
        (r"/a[]/", "a", False),
        (r"/\u{1F600}/u", "smile 😀", True),
        (r"/\e\A/", "eA", True),  # identity escapes in non-unicode mode
        (r"/abc/y", "xabc", False),  # sticky: anchored at 0
        (r"/abc/g", "xabc", True),
        (r"/(?<=a)b/", "ab", True),
        (r"/\p{L}/", "p{L}", True),
        (r"/a[\s\S]*?b/", "a\n\nb", True),  # the JS "any character" idiom
        (r"/[^\W]/", "é", False),  # complement escapes keep ASCII semantics inside classes
        (r"/[a\D]/", "5", False),
        (r"/[^a\D]/", "5", True),  # without u, \p is an identity escape
        (r"/\p{L}/u", "é", True),
    ],
)
def test_javascript_semantics(key: str, text: str, expected: bool) -> None:
    assert matches(key, text) is expected


@pytest.mark.parametrize(
    "key",
    [
        "/(?i)x/",
        "/a++/",
        "/(unclosed/",
        "/[z-a]/",
        "/" + "a" * (MAX_REGEX_KEY_CHARS + 1) + "/",
        "/(?:x{65535}){65535}/",  # valid JS, but compiling it would take minutes
        "/((a{100}){100}){100}/",
        "/a{1000000}/",
    ],
)
def test_not_javascript_or_too_long_is_an_error(key: str) -> None:
    with pytest.raises(JsRegexError):
        compile_js_regex(key)


def test_program_size_estimate() -> None:
    assert program_size("abc") == 3
    assert program_size("a{10}b") == 11
    assert program_size("(ab){3}|[x-z]{2,5}") == 11
    assert program_size(r"\d{4}-\d{2}") == 7
    assert compile_js_regex("/(a{100}){100}/") is not None  # 10,000 is fine


def test_plain_keys_are_not_regex() -> None:
    assert compile_js_regex("dragon") is None


def test_timeout_cuts_catastrophic_backtracking() -> None:
    compiled = compile_js_regex("/(a|aa)+$/")
    assert compiled is not None
    with pytest.raises(TimeoutError):
        compiled.search("a" * 10_000 + "!", timeout=0.02)
