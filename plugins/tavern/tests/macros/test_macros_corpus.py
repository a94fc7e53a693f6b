"""Real presets from the corpus through the macro engine (read in place, never copied)."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime
from pathlib import Path

from innkeeper_tavern.pure.formats.macros import MacroEnv, MacroSession

PRESETS = (
    Path(__file__).resolve().parents[4]
    / ".."
    / "shared"
    / "sillytavern-corpus"
    / "prolix-oc-st-presets"
).resolve() / "presets"


def _session() -> MacroSession:
    env = MacroEnv(
        char="Seraphina",
        user="Bob",
        persona="A traveller.",
        description="Guardian.",
        personality="Kind.",
        scenario="A glade.",
        now=datetime(2026, 1, 2, 3, 4, tzinfo=UTC),
        chat_id="corpus",
    )
    return MacroSession(env, rng=random.Random(5))


def test_lucid_loom_prompts_expand() -> None:
    preset = json.loads((PRESETS / "Lucid Loom v2.8.json").read_text("utf-8"))
    session = _session()
    outputs = [session.expand(p.get("content") or "") for p in preset["prompts"]]
    joined = "\n".join(outputs)
    assert "{{user}}" not in joined
    assert "{{char}}" not in joined
    assert "{{setvar" not in joined
    assert "{{suggest" in joined  # an extension macro ST core does not know stays as written
    assert "{{sim_tracker}}" in joined
    # Multi-line values are stored (the newer engine lets macros span lines).
    assert str(session.global_variables["lumia_personality_standard"]).startswith("I, Lumia")
    assert session.local_variables["word_max"] == "450"
    assert session.limited == 0


def test_storyweaver_prompts_expand() -> None:
    preset = json.loads((PRESETS / "StoryWeaver v1.1.json").read_text("utf-8"))
    session = _session()
    for prompt in preset["prompts"]:
        out = session.expand(prompt.get("content") or "")
        assert "{{char}}" not in out
        assert "{{group}}" not in out
