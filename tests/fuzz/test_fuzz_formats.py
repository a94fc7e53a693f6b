"""Field-level format fuzzing through every entry path (issue 33).

``test_field_mutations`` draws, for each (format, entry) pair, a base document, one of its fields
and one mutation (``formats.cases``) and holds the answer to the rules of
``format_entries.Checker``. ``test_every_field_every_mutation`` walks the whole product instead
(every field of every base under every mutation, through every entry): a stride of it in the
quick profile, all of it in the long one (``tools/fuzz --formats --long``); it collects every
violation before failing, so one run counts them all. ``test_fixed_regressions`` replays the
cases that ever failed, as fixed examples.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any, Final

import pytest
from hypothesis import given

from .conftest import PROFILE, Harness, fuzz_settings
from .format_entries import Entry, FormatHarness, pairs
from .formats import FORMATS, MUTATIONS, bases, build, cases, every_case, product_size

PAIRS: Final = pairs()
#: Examples per (format, entry) pair and hypothesis run; commands and folder imports cost more.
QUICK_EXAMPLES: Final = {"cli": 3, "st-folder": 2}
#: Cases of the full product per (format, entry) in the quick profile, spread evenly over it
#: (every case in the long one).
QUICK_SPREAD: Final = 5
#: The long profile walks every case; ``INNKEEPER_FUZZ_STRIDE=n`` walks every n-th (the whole
#: product is ~140,000 cases: hours on one core).
LONG_STRIDE: Final = int(os.environ.get("INNKEEPER_FUZZ_STRIDE", "1"))


@pytest.fixture(scope="module")
def formats_harness(harness: Harness) -> Iterator[FormatHarness]:
    fh = FormatHarness(harness)
    try:
        yield fh
    finally:
        fh.close()


def _id(pair: tuple[str, Entry]) -> str:
    return f"{pair[0]}-{pair[1].name}"


def _examples(entry: Entry) -> int:
    return QUICK_EXAMPLES.get(entry.name, 8)


@pytest.mark.parametrize("pair", PAIRS, ids=_id)
def test_field_mutations(formats_harness: FormatHarness, pair: tuple[str, Entry]) -> None:
    fmt, entry = pair

    @fuzz_settings(_examples(entry))
    @given(case=cases(fmt))
    def run(case: Any) -> None:
        formats_harness.check(entry, case)

    run()


def test_every_field_every_mutation(formats_harness: FormatHarness) -> None:
    failures: list[str] = []
    for fmt, entry in PAIRS:
        stride = LONG_STRIDE if PROFILE == "long" else max(1, product_size(fmt) // QUICK_SPREAD)
        for case in every_case(fmt, stride=stride):
            try:
                formats_harness.check(entry, case)
            except AssertionError as exc:
                failures.append(f"{entry.name}: {case.label}: {str(exc)[:300]}")
    assert not failures, f"{len(failures)} violations:\n" + "\n".join(failures[:40])


def test_the_schema_fields_are_the_parsers_own() -> None:
    """A field the parser reads is mutated even when no base carries it (not a hand list)."""
    from innkeeper_tavern.pure.formats import card as card_format

    v2 = dict(bases("card"))["v3"]
    paths = FORMATS["card"].schema(v2)
    for _attr, key, _kind, _v1 in card_format._FIELDS:
        assert ("data", key) in paths
    assert ("data", "character_book") in paths and ("spec",) in paths


#: Every case that ever failed, replayed through its entry (format, base, field, mutation).
#: ``spec`` not a string was a 500 on POST /characters/import (issue 33).
REGRESSIONS: Final = [
    ("card", "v2", ("spec",), "array", "http-json"),
    ("card", "v2", ("spec",), "object", "http-json"),
    ("card", "v2", ("spec",), "prototype-object", "png-ccv3"),
    ("card", "v3", ("spec",), "array", "png-chara"),
    ("card", "v2", ("spec",), "duplicate-key-other-last", "http-json"),
    ("card", "v2", ("spec_version",), "object", "cli"),
    ("card", "v1", ("spec",), "empty-array", "st-folder"),
    # A folder file its kind's parser refuses named no code ("not a world-book: …").
    ("world-book", "eldoria", ("entries",), "null", "st-folder"),
    ("preset", "synthetic", ("prompts",), "delete", "st-folder"),
    # settings.json that is not UTF-8 was "unreadable: 'utf-8' codec …", no code, no path.
    ("persona", "settings", ("power_user", "personas"), "invalid-utf8", "st-folder"),
    # A regex file's junk item was dropped silently; a 2**63 in one failed the preset's PUT
    # naming the request body's path instead of the file's.
    ("regex", "two-scripts", (0,), "null", "st-folder"),
    ("regex", "two-scripts", (1, "placement", 1), "int-64", "st-folder"),
    # A chat line nested past json.loads' recursion limit crashed the folder import.
    ("chat", "chat", (2, "mes"), "deep-array-5000", "st-folder"),
    # A card's linked world missing from worlds/ is the link's refusal, not the card's.
    ("card", "seraphina", ("name",), "null", "st-folder"),
]


@pytest.mark.parametrize(("fmt", "base", "path", "mutation", "entry_name"), REGRESSIONS)
def test_fixed_regressions(
    formats_harness: FormatHarness,
    fmt: str,
    base: str,
    path: tuple[str | int, ...],
    mutation: str,
    entry_name: str,
) -> None:
    entry = next(e for f, e in PAIRS if f == fmt and e.name == entry_name)
    case = build(fmt, base, dict(bases(fmt))[base], path, mutation)
    assert case is not None
    formats_harness.check(entry, case)


def test_mutations_cover_every_json_type() -> None:
    """Each field is replaced by every JSON type, empty and huge values, nesting, raw tricks."""
    from .formats import RAW_MUTATIONS, VALUE_MUTATIONS

    produced = {type(fn("x")).__name__ for fn in VALUE_MUTATIONS.values()}
    assert {"NoneType", "bool", "int", "float", "str", "list", "dict"} <= produced
    assert {"duplicate-key-other-last", "invalid-utf8", "prototype-siblings"} <= set(RAW_MUTATIONS)
    assert len(MUTATIONS) == len(VALUE_MUTATIONS) + len(RAW_MUTATIONS)
