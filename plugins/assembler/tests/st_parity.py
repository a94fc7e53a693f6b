"""Play the SillyTavern reference scenarios (``st_fixtures/``) on Innkeeper and compare.

The fixtures come from ``tools/st_harness`` (SillyTavern's own assembly; see its README). A
scenario is one session: a preset (the corpus file with ``{{roll}}`` fixed and the scenario's
settings), a card (a corpus file imported as is, or the synthetic card), the user Mira with or
without a persona, two constant lore entries (world info before/after) or none. Its cases are the
wire requests of turn 1 and turn 3 (the provider's recorded request) and the continue and
impersonate requests after turn 1 (the Assembler's preview with that request kind, which is what
such a request sends). A message matches when role, name and the SHA-256 of its whitespace-
normalized content are equal.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import struct
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from innkeeper_core.providers.synthetic import SyntheticProvider
from innkeeper_hostapi.agents import AGENTS, PROVIDER
from innkeeper_hostapi.providers import ChatMessage
from innkeeper_hostapi.testing import RunningHost

FIXTURES: Final = Path(__file__).resolve().parent / "st_fixtures"
CORPUS: Final = Path(__file__).resolve().parents[4] / "shared" / "sillytavern-corpus"
V1: Final = "/pmp-dsh-tavern/api/v1"
ASM: Final = "/dsh-assembler/api/v1"
#: A ``{{roll}}`` is random on both sides: the cases replace it with a fixed number first.
ROLL: Final = re.compile(r"\{\{roll[ :][^}]*\}\}", re.IGNORECASE)
SETVAR: Final = re.compile(r"\{\{set(?:global)?var::", re.IGNORECASE)
CARD_FILES: Final = {
    "seraphina": "sillytavern-repo/staging-1ac6780/default_Seraphina.png",
    "aqua": "sillytavern-repo/tag-1.0.0/Aqua.png",
    "sakana": "sillytavern-content/contest_Assistant_Sakana.png",
    "coding-sensei": "sillytavern-content/default_CodingSensei.png",
    "pxansatu": "prolix-oc-st-presets/cards/Pxansatu.json",
}


def one_line_variables(text: str) -> str:
    """A ``{{setvar::…}}`` / ``{{setglobalvar::…}}`` spanning lines, on one line (newlines in
    it become spaces). SillyTavern 1.12.6 reads variable macros line by line, so it leaves a
    multi-line one as text; current SillyTavern and Innkeeper set the variable. The cases
    compare the assembly, not that macro-engine change, so both sides get the one-line form."""
    out: list[str] = []
    at = 0
    for match in SETVAR.finditer(text):
        if match.start() < at:
            continue
        depth, end = 0, match.start()
        while end < len(text):
            if text.startswith("{{", end):
                depth, end = depth + 1, end + 2
            elif text.startswith("}}", end):
                depth, end = depth - 1, end + 2
                if depth == 0:
                    break
            else:
                end += 1
        out.append(text[at : match.start()])
        out.append(text[match.start() : end].replace("\r", "").replace("\n", " "))
        at = end
    out.append(text[at:])
    return "".join(out)


def preset_prompts(raw: dict[str, Any], roll: str) -> dict[str, Any]:
    """The input normalizations both sides get: ``{{roll}}`` fixed (:data:`ROLL`) and variable
    macros on one line (:func:`one_line_variables`)."""
    for prompt in raw.get("prompts", []):
        if isinstance(prompt.get("content"), str):
            prompt["content"] = one_line_variables(ROLL.sub(roll, prompt["content"]))
    return raw


def png_card(path: Path) -> dict[str, Any]:
    data = path.read_bytes()
    at = 8
    while at < len(data):
        (size,) = struct.unpack(">I", data[at : at + 4])
        kind, body = data[at + 4 : at + 8], data[at + 8 : at + 8 + size]
        if kind == b"tEXt" and body.startswith(b"chara\0"):
            parsed: dict[str, Any] = json.loads(base64.b64decode(body[6:]))
            return parsed
        at += 12 + size
    raise ValueError(f"{path} has no chara chunk")


def normalized(content: str) -> str:
    """Content after whitespace normalization: runs of whitespace are one space, no ends."""
    return " ".join(content.split())


def digest(content: str) -> str:
    """What a fixture keeps of a message's content: the SHA-256 (first 16 hex digits) of its
    normalized text. The texts are the corpus's (presets, cards), which stay out of the
    repository; the test hashes Innkeeper's message the same way."""
    return hashlib.sha256(normalized(content).encode()).hexdigest()[:16]


def wire(message: ChatMessage | dict[str, Any]) -> list[str]:
    """``[role, digest, name?]`` of a sent message."""
    if isinstance(message, dict):
        role, content, name = message["role"], message["content"], message.get("name")
    else:
        role, content, name = message.role, message.content, message.name
    out = [role, digest(content)]
    return [*out, name] if name else out


def load(preset: str) -> dict[str, Any]:
    """One fixture file."""
    doc: dict[str, Any] = json.loads((FIXTURES / f"{preset}.json").read_text())
    return doc


@dataclass
class Outcome:
    """What a scenario's cases gave: ``sent[kind]`` Innkeeper's wire, ``expected[kind]``."""

    scenario: str
    sent: dict[str, list[list[str]]] = field(default_factory=dict)
    expected: dict[str, list[list[str]]] = field(default_factory=dict)
    #: What Innkeeper sent, readable: ``(role, content, name)``.
    texts: dict[str, list[tuple[str, str, str | None]]] = field(default_factory=dict)

    def mismatched(self) -> list[str]:
        return [k for k in self.expected if self.sent.get(k) != self.expected[k]]

    def report(self) -> list[str]:
        """One line per mismatched case: what was expected, what was sent (readable)."""
        lines = []
        for kind in self.mismatched():
            sent = self.texts.get(kind, [])
            lines.append(
                f"{self.scenario}#{kind}: expected {self.expected[kind]}, "
                f"sent {self.sent.get(kind)} ({[(r, t[:60], n) for r, t, n in sent]})"
            )
        return lines


class Player:
    """Plays scenarios in one host (the Assembler and Tavern loaded)."""

    def __init__(self, host: RunningHost, doc: dict[str, Any]) -> None:
        self.host = host
        self.doc = doc
        self.client = host.client
        self.presets: dict[str, str] = {}
        self.cards: dict[str, str] = {}
        self.book: str | None = None
        self.kinds: set[str] = {"turn1", "turn3", "continue", "impersonate"}

    async def call(self, method: str, path: str, body: Any = None, **kw: Any) -> Any:
        headers = {"Origin": self.host.origin}
        if "data" in kw:
            headers["Content-Type"] = kw.pop("content_type")
            response = await self.client.request(method, path, data=kw.pop("data"), headers=headers)
        else:
            response = await self.client.request(method, path, json=body, headers=headers)
        data = await response.json()
        assert response.status < 300, (path, data)
        return data

    async def setup(self) -> None:
        body = {"locale": "en", "scale": 1, "rpFollowCharacter": False}
        await self.call("PUT", V1 + "/ui-settings", body)
        lore = self.doc["lore"]
        book = {
            "entries": {
                str(i): {
                    "uid": i,
                    "key": [],
                    "content": text,
                    "constant": True,
                    "position": i,
                    "order": 100,
                    "comment": where,
                }
                for i, (where, text) in enumerate(
                    (("before", lore["before"]), ("after", lore["after"]))
                )
            }
        }
        self.book = await self.import_book(book)

    async def import_book(self, book: Any) -> str:
        data = await self.call(
            "POST",
            f"{V1}/world-books/import?filename=lore.json",
            data=json.dumps(book).encode(),
            content_type="application/json",
        )
        return str(data["worldBook"]["id"])

    async def preset(self, scenario: dict[str, Any]) -> str:
        settings = scenario["settings"]
        key = json.dumps(settings, sort_keys=True)
        if key not in self.presets:
            raw = json.loads((CORPUS / self.doc["preset"]).read_text())
            raw = preset_prompts(raw, self.doc["rollValue"])
            raw.update(settings)
            body = {"content": json.dumps(raw), "name": f"{scenario['preset']} {key}"}
            data = await self.call("POST", V1 + "/import", body)
            self.presets[key] = str(data["preset"]["id"])
        return self.presets[key]

    async def card(self, card: str | dict[str, Any]) -> str:
        if isinstance(card, str):
            # The corpus card as its own JSON, without its embedded book: the reference
            # harness runs no world-info engine, the scenario's lore is the constant book.
            path = CORPUS / CARD_FILES[card]
            doc = png_card(path) if path.suffix == ".png" else json.loads(path.read_text())
            doc.pop("character_book", None)
            if isinstance(doc.get("data"), dict):
                doc["data"].pop("character_book", None)
            name = path.stem + ".json"
        else:
            depth = card.get("depth_prompt")
            data = {
                "name": card["name"],
                "description": card["description"],
                "personality": card["personality"],
                "scenario": card["scenario"],
                "first_mes": card["first_mes"],
                "mes_example": card["mes_example"],
                "system_prompt": card["system_prompt"],
                "post_history_instructions": card["post_history_instructions"],
                "extensions": {"depth_prompt": depth} if depth else {},
            }
            doc = {"spec": "chara_card_v2", "spec_version": "2.0", "data": data}
            name = "synthetic.json"
        content, ctype = json.dumps(doc).encode(), "application/json"
        key = hashlib.sha256(content).hexdigest()
        if key not in self.cards:
            data = await self.call(
                "POST",
                f"{V1}/characters/import?filename={urllib.parse.quote(name)}",
                data=content,
                content_type=ctype,
            )
            self.cards[key] = str(data["character"]["id"])
        return self.cards[key]

    async def play(self, scenario: dict[str, Any]) -> Outcome:
        doc = self.doc
        persona = doc["persona"] if scenario["persona"] else ""
        user = await self.call("POST", V1 + "/users", {"name": doc["user"], "description": persona})
        session = (await self.call("POST", "/host/api/sessions", {"title": scenario["id"]}))[
            "session"
        ]["id"]
        await self.call(
            "POST", V1 + "/select", {"id": await self.preset(scenario), "sessionId": session}
        )
        card = await self.card(scenario["card"])
        await self.call(
            "POST", V1 + "/character-selection", {"sessionId": session, "characterCardId": card}
        )
        await self.call(
            "POST", V1 + "/user-selection", {"sessionId": session, "userId": user["user"]["id"]}
        )
        if scenario["lore"]:
            await self.call(
                "POST",
                V1 + "/world-book-selection",
                {"sessionId": session, "worldBookIds": [self.book]},
            )
        expected = {k: v for k, v in scenario["cases"].items() if k in self.kinds}
        outcome = Outcome(scenario["id"], expected=expected)
        kinds = set(expected)
        provider = self.host.get(PROVIDER)
        assert isinstance(provider, SyntheticProvider)
        for turn in range(3):
            if turn and not kinds & {"turn3"}:
                break
            provider.enqueue(doc["replies"][turn])
            await self.call(
                "POST", f"/host/api/sessions/{session}/prompt", {"text": doc["inputs"][turn]}
            )
            await self.host.get(AGENTS).wait_idle(session)
            sent = provider.requests[-1].messages
            if turn == 0 or turn == 2:
                kind = "turn1" if turn == 0 else "turn3"
                outcome.sent[kind] = [wire(m) for m in sent]
                outcome.texts[kind] = [(m.role, m.content, m.name) for m in sent]
            if turn == 0:
                for kind in ("continue", "impersonate"):
                    if kind in kinds:
                        preview = await self.call(
                            "POST", ASM + "/preview", {"sessionId": session, "kind": kind}
                        )
                        messages = preview["preview"]["messages"]
                        outcome.sent[kind] = [wire(m) for m in messages]
                        outcome.texts[kind] = [
                            (m["role"], m["content"], m.get("name")) for m in messages
                        ]
        return outcome


async def play_all(
    host: RunningHost, preset: str, only: Sequence[str] = (), kinds: Sequence[str] = ()
) -> list[Outcome]:
    """Every scenario of ``preset`` (or those whose id starts with one of ``only``)."""
    await host.load("assembler", "innkeeper_assembler.plugin")
    await host.load("tavern", "innkeeper_tavern.plugin")
    doc = load(preset)
    player = Player(host, doc)
    if kinds:
        player.kinds = set(kinds)
    await player.setup()
    out = []
    for scenario in doc["scenarios"]:
        if only and not any(scenario["id"].startswith(o) for o in only):
            continue
        out.append(await player.play(scenario))
    return out
