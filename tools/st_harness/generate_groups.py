"""Generate the speaker-choice fixture of ``plugins/tavern/tests/groups/test_grp_st_speakers.py``:
for scripted group chats, who SillyTavern's own group reply loop (``group-chats.js``
``generateGroupWrapper``, run by ``group_driver.mjs``) generates for, given the same random
numbers Innkeeper's speaker choice will draw.

```sh
uv run --no-sync python tools/st_harness/generate_groups.py [--st-repo PATH]
```

Cases are built here from a fixed seed: groups of three to five members with varied
talkativeness and muting, chats whose last message mentions members or not, the player's input
or none (auto mode), self responses on and off, natural and list order (the strategies
SillyTavern 1.12.6 has). The fixture holds the inputs, the random numbers and ST's answer; no
SillyTavern code or text.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any, Final

from generate import ST_COMMIT, checkout, run_driver

HERE: Final = Path(__file__).resolve().parent
REPO: Final = HERE.parents[1]
OUT: Final = REPO / "plugins" / "tavern" / "tests" / "groups" / "st_speakers.json"
NAMES: Final = ("Ann", "Ben Hur", "Cal", "Dee-Dee", "Eve")
TALK: Final = (0.0, 0.1, 0.5, 0.9, 1.0, None, "0.3", "")
LINES: Final = (
    "hello there",
    "What do you think, {a}?",
    "{a} and {b}, come here",
    "nobody in particular",
    "ask {b}... or {a}",
)
#: Random numbers per case: enough for a shuffle, a roll per member and the fallback.
DRAWS: Final = 24


def _case(rng: random.Random, index: int) -> dict[str, Any]:
    size = rng.randint(3, 5)
    names = list(NAMES[:size])
    rng.shuffle(names)
    chars = []
    for name in names:
        char: dict[str, Any] = {"name": name, "avatar": f"{name}.png"}
        talk = rng.choice(TALK)
        if talk is not None:
            char["talkativeness"] = talk
        chars.append(char)
    members = [c["avatar"] for c in chars]
    muted = [m for m in members if rng.random() < 0.2]
    chat: list[dict[str, Any]] = [{"name": "Mira", "is_user": True, "mes": "hi"}]
    for _ in range(rng.randint(0, 4)):
        speaker = rng.choice(chars)
        a, b = rng.sample(names, 2)
        text = rng.choice(LINES).format(a=a, b=b)
        if rng.random() < 0.3:
            chat.append({"name": "Mira", "is_user": True, "mes": text})
        else:
            chat.append(
                {
                    "name": speaker["name"],
                    "is_user": False,
                    "mes": text,
                    "original_avatar": speaker["avatar"],
                }
            )
    a, b = rng.sample(names, 2)
    user_input = rng.choice(["", "", rng.choice(LINES).format(a=a, b=b)])
    return {
        "id": f"case-{index:03d}",
        "group": {
            "id": f"g{index}",
            "name": "G",
            "avatar_url": "",
            "members": members,
            "disabled_members": muted,
            "activation_strategy": rng.choice([0, 0, 0, 1]),
            "generation_mode": 0,
            "allow_self_responses": rng.random() < 0.3,
            "chat_id": f"chat{index}",
            "chats": [f"chat{index}"],
        },
        "characters": chars,
        "chat": chat,
        "input": user_input,
        "random": [rng.random() for _ in range(DRAWS)],
    }


def run(root: Path, batch: list[dict[str, Any]]) -> dict[str, Any]:
    """What group_driver.mjs prints for ``batch`` (SillyTavern's group code running)."""
    return run_driver(root, batch, hooks="./group_register.mjs", driver="group_driver.mjs")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--st-repo", type=Path, help="a SillyTavern git repository")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--count", type=int, default=200)
    args = parser.parse_args(argv)
    root = checkout(args.st_repo)
    rng = random.Random(31)
    cases = [_case(rng, i) for i in range(args.count)]
    expected = run(root, cases)
    failed = {k: v["error"] for k, v in expected.items() if "error" in v}
    if failed:
        raise SystemExit(
            f"SillyTavern's loop failed on {len(failed)} cases: {next(iter(failed.values()))}"
        )
    doc = {
        "sillyTavernCommit": ST_COMMIT,
        "generator": "tools/st_harness/generate_groups.py",
        "cases": [{**c, "speakers": expected[c["id"]]["speakers"]} for c in cases],
    }
    args.out.write_text(json.dumps(doc, ensure_ascii=False, separators=(",", ":")) + "\n")
    print(f"{args.out.relative_to(REPO)}: {len(cases)} cases from SillyTavern {ST_COMMIT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
