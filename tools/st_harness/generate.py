"""Generate the SillyTavern reference fixtures (``plugins/assembler/tests/st_fixtures``).

Builds the case matrix (:func:`scenarios`), runs SillyTavern's own Chat Completion assembly on
every case with the Node driver of this folder (``driver.mjs``, see ``README.md``) and writes
one compact JSON file per preset: each case's inputs and the message array SillyTavern sends,
with the SillyTavern commit they came from.

    uv run --no-sync python tools/st_harness/generate.py --st-repo /path/to/SillyTavern.git

``--st-repo`` is a SillyTavern git repository (bare or not) holding :data:`ST_COMMIT`; its
``public/`` scripts are extracted to a cache directory outside this repository (nothing of
SillyTavern is written into the project). Without it the repository is cloned from
:data:`ST_URL` into the cache first.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from io import BytesIO
from pathlib import Path
from typing import Any, Final

HERE: Final = Path(__file__).resolve().parent
REPO: Final = HERE.parents[1]
# The test's own helpers (input normalizations, the content digest), so the two sides of the
# comparison cannot drift apart.
sys.path.insert(0, str(REPO / "plugins" / "assembler" / "tests"))
from st_parity import png_card, preset_prompts, wire  # noqa: E402

#: The corpus, by the same relative route the tests take (``<repo>/../shared``).
CORPUS: Final = REPO.parent / "shared" / "sillytavern-corpus"
OUT: Final = REPO / "plugins" / "assembler" / "tests" / "st_fixtures"
ST_URL: Final = "https://github.com/SillyTavern/SillyTavern.git"
#: SillyTavern 1.12.6 (2024-09-28): the commit the fixtures are generated from.
ST_COMMIT: Final = "ba6f7b7a98cf7a5eaf4f0e81da9779a9a668ced4"
CACHE: Final = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "innkeeper-st"

PRESETS: Final = {
    "default": "sillytavern-repo/staging-1ac6780/presets_openai_Default.json",
    "lucid-loom-2.8": "prolix-oc-st-presets/presets/Lucid Loom v2.8.json",
    "storyweaver-1.1": "prolix-oc-st-presets/presets/StoryWeaver v1.1.json",
}
CARDS: Final = {
    "seraphina": "sillytavern-repo/staging-1ac6780/default_Seraphina.png",
    "aqua": "sillytavern-repo/tag-1.0.0/Aqua.png",
    "sakana": "sillytavern-content/contest_Assistant_Sakana.png",
    "coding-sensei": "sillytavern-content/default_CodingSensei.png",
    "pxansatu": "prolix-oc-st-presets/cards/Pxansatu.json",
}
#: A ``{{roll}}`` is random on both sides: the cases replace it with this number first.
ROLL_VALUE: Final = "4"
USER: Final = "Mira"
PERSONA: Final = "Mira is a wandering cartographer from {{char}}'s coast."
#: The replies the synthetic provider gives, in order.
REPLIES: Final = ("She looks up. *Welcome back.*", "The wind turns.", "A lantern flickers.")
INPUTS: Final = ("Hello there.", "What is that map?", "Let us go north.")
LORE: Final = {"before": "The coast is ruled by tides.", "after": "Maps here are drawn in salt."}

EXAMPLE_BLOCKS: Final = (
    "<START>\n{{user}}: Where does this road go?\n{{char}}: *She points.* To the sea.\n"
    "{{user}}: And then?\n{{char}}: Then we swim.",
    "<START>\n{{char}}: Quiet now.",
    "<START>\n{{user}}: Tea?\n{{char}}: Always.\n{{char}}: Two sugars.",
)


def synthetic_card(examples: int = 3, **off: bool) -> dict[str, Any]:
    """The synthetic card: every field the assembly reads (``off`` drops some)."""
    card: dict[str, Any] = {
        "name": "Ada",
        "description": "Ada is a herbalist who lives near {{user}}'s village.",
        "personality": "patient, dry humour",
        "scenario": "A forest glade at dusk.",
        "first_mes": "*Ada looks up from her herbs.* Welcome, {{user}}.",
        "mes_example": "\n".join(EXAMPLE_BLOCKS[:examples]),
        "system_prompt": "You are {{char}}. {{original}}",
        "post_history_instructions": "Keep {{char}}'s replies under three paragraphs.",
        "depth_prompt": {"prompt": "{{char}} never lies.", "depth": 2, "role": "system"},
    }
    if off.get("greeting"):
        card["first_mes"] = ""
    if off.get("depth"):
        card["depth_prompt"] = None
    if off.get("phi"):
        card["post_history_instructions"] = ""
    if off.get("system"):
        card["system_prompt"] = ""
    return card


def corpus_card(name: str) -> dict[str, Any]:
    """A corpus card's fields as SillyTavern reads them (V2 ``data`` over the V1 mirror)."""
    path = CORPUS / CARDS[name]
    raw = png_card(path) if path.suffix == ".png" else json.loads(path.read_text())
    data = {**raw, **raw.get("data", {})}
    depth = (data.get("extensions") or {}).get("depth_prompt")
    return {
        "name": data["name"],
        "description": data.get("description", ""),
        "personality": data.get("personality", ""),
        "scenario": data.get("scenario", ""),
        "first_mes": data.get("first_mes", ""),
        "mes_example": data.get("mes_example", ""),
        "system_prompt": data.get("system_prompt", ""),
        "post_history_instructions": data.get("post_history_instructions", ""),
        "depth_prompt": depth if depth and depth.get("prompt") else None,
    }


def preset(name: str) -> dict[str, Any]:
    """The corpus preset with the input normalizations of :func:`preset_prompts`."""
    raw: dict[str, Any] = json.loads((CORPUS / PRESETS[name]).read_text())
    return preset_prompts(raw, ROLL_VALUE)


def scenarios() -> Iterator[dict[str, Any]]:
    """Every scenario: one session played for 3 turns; its cases are the requests of it.

    Keys: ``id``, ``preset``, ``card`` (corpus name or a synthetic card dict), ``persona``,
    ``lore``, ``settings`` (preset overrides), ``kinds`` (which requests are cases).
    """
    all_kinds = ("turn1", "turn3", "continue", "impersonate")
    for p in PRESETS:
        for c in CARDS:
            for persona in (True, False):
                yield {
                    "id": f"{p}/{c}/{'persona' if persona else 'bare'}",
                    "preset": p,
                    "card": c,
                    "persona": persona,
                    "lore": persona,
                    "settings": {},
                    "kinds": all_kinds,
                }
        squash = bool(preset(p).get("squash_system_messages", False))
        for examples in (0, 1, 3):
            for names in (-1, 0, 1, 2):
                for flip in (False, True):
                    if flip and examples != 3:
                        continue
                    settings: dict[str, Any] = {"names_behavior": names}
                    if flip:
                        settings["squash_system_messages"] = not squash
                    yield {
                        "id": f"{p}/synthetic/examples{examples}/names{names}"
                        + ("/squash-flipped" if flip else ""),
                        "preset": p,
                        "card": synthetic_card(examples),
                        "persona": True,
                        "lore": True,
                        "settings": settings,
                        "kinds": all_kinds,
                    }
        for off in ("greeting", "depth", "phi", "system"):
            yield {
                "id": f"{p}/synthetic/no-{off}",
                "preset": p,
                "card": synthetic_card(1, **{off: True}),
                "persona": True,
                "lore": True,
                "settings": {},
                "kinds": ("turn1", "turn3"),
            }
        for prefill in (False, True):
            for postfix in ("", " ", "\n", "\n\n"):
                yield {
                    "id": f"{p}/synthetic/continue-prefill{int(prefill)}-postfix{len(postfix)}",
                    "preset": p,
                    "card": synthetic_card(1),
                    "persona": False,
                    "lore": False,
                    "settings": {"continue_prefill": prefill, "continue_postfix": postfix},
                    "kinds": ("continue",),
                }


def st_chat(card: dict[str, Any], kind: str) -> tuple[list[dict[str, Any]], str]:
    """The SillyTavern chat at the request of ``kind`` and the request type."""
    chat: list[dict[str, Any]] = []
    if card["first_mes"]:
        chat.append({"is_user": False, "mes": card["first_mes"]})
    turns = 3 if kind == "turn3" else 1
    for i in range(turns):
        chat.append({"is_user": True, "mes": INPUTS[i]})
        if i < turns - 1 or kind in ("continue", "impersonate"):
            chat.append({"is_user": False, "mes": REPLIES[i]})
    kind_type = kind if kind in ("continue", "impersonate") else "normal"
    return chat, kind_type


def cases(scenario: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The driver cases of a scenario."""
    card = scenario["card"]
    card = corpus_card(card) if isinstance(card, str) else card
    raw = preset(scenario["preset"])
    for kind in scenario["kinds"]:
        chat, kind_type = st_chat(card, kind)
        yield {
            "id": f"{scenario['id']}#{kind}",
            "preset": raw,
            "settings": scenario["settings"],
            "user": {"name": USER, "persona": PERSONA if scenario["persona"] else ""},
            "card": card,
            "chat": chat,
            "lore": LORE if scenario["lore"] else {},
            "type": kind_type,
        }


def checkout(st_repo: Path | None) -> Path:
    """``public/scripts`` of :data:`ST_COMMIT`, extracted under the cache (reused)."""
    root = CACHE / ST_COMMIT
    if (root / "public" / "scripts" / "openai.js").exists():
        return root
    if st_repo is None:
        st_repo = CACHE / "SillyTavern.git"
        if not st_repo.exists():
            subprocess.run(["git", "clone", "--bare", ST_URL, str(st_repo)], check=True)
    archive = subprocess.run(
        ["git", "-C", str(st_repo), "archive", ST_COMMIT, "public/scripts"],
        check=True,
        capture_output=True,
    ).stdout
    root.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(root, filter="data")
    return root


def run_driver(
    root: Path,
    batch: list[dict[str, Any]],
    *,
    hooks: str = "./register.mjs",
    driver: str = "driver.mjs",
) -> dict[str, Any]:
    """What the Node ``driver`` (under the module ``hooks``) prints for ``batch``: one process."""
    with tempfile.TemporaryFile() as stdin:
        stdin.write(json.dumps(batch).encode())
        stdin.seek(0)
        done = subprocess.run(
            ["node", "--import", hooks, driver],
            cwd=HERE,
            stdin=stdin,
            capture_output=True,
            check=True,
            env={**os.environ, "ST_HARNESS_ROOT": str(root)},
        )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--st-repo", type=Path, help="a SillyTavern git repository")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    root = checkout(args.st_repo)
    by_preset: dict[str, list[dict[str, Any]]] = {}
    for scenario in scenarios():
        by_preset.setdefault(scenario["preset"], []).append(scenario)
    args.out.mkdir(parents=True, exist_ok=True)
    total = 0
    for name, group in by_preset.items():
        batch = [case for scenario in group for case in cases(scenario)]
        expected = run_driver(root, batch)
        doc = {
            "sillyTavernCommit": ST_COMMIT,
            "generator": "tools/st_harness/generate.py",
            "preset": PRESETS[name],
            "rollValue": ROLL_VALUE,
            "user": USER,
            "persona": PERSONA,
            "inputs": list(INPUTS),
            "replies": list(REPLIES),
            "lore": LORE,
            "scenarios": [
                {
                    **{k: v for k, v in s.items() if k != "kinds"},
                    "cases": {
                        kind: [wire(m) for m in expected[f"{s['id']}#{kind}"]]
                        for kind in s["kinds"]
                    },
                }
                for s in group
            ],
        }
        path = args.out / f"{name}.json"
        path.write_text(json.dumps(doc, ensure_ascii=False, separators=(",", ":")) + "\n")
        total += len(batch)
        print(f"{path.relative_to(REPO)}: {len(batch)} cases")
    print(f"{total} cases from SillyTavern {ST_COMMIT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
