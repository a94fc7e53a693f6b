"""Every way a file enters, for the field fuzzer: HTTP JSON import, PNG import (a ``chara`` or a
``ccv3`` chunk), ``innkeeper import FILE`` and ``innkeeper import <SillyTavern folder>``.

:meth:`FormatHarness.check` sends one :class:`~.formats.Case` through one :class:`Entry` and
holds the answer to the issue's rules: never a 5xx (or a crashed command); a refusal is a 4xx with a
stable code whose ``error.details.path`` (the command's ``at <path>``) names the mutated field,
an ancestor of it or a value inside it (``$`` for the document as a whole), and it leaves every
file of the data directory and the event log byte for byte as it was; an accepted document can
be read back and exported; and the server answers its health route after every case. The
commands run against the harness's own server (the data directory's writer lock points them to
it), in a worker thread while the server's loop keeps serving.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
import json
import os
import re
import shutil
import tempfile
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import msgspec

from innkeeper_core.cli import command_environment
from innkeeper_core.config import HostConfig
from innkeeper_tavern.face.cli.import_export import import_main
from innkeeper_tavern.pure.formats.png import CCV3, CHARA, placeholder_png, write_card_chunks
from innkeeper_tavern.pure.mvu.initvar import InitEntry, initialize_variables, load_initvar
from innkeeper_tavern.pure.mvu.limits import MvuError

from .conftest import _NOT_STATE, _NOT_STATE_DIRS, STABLE_CODE, Harness
from .formats import PROTOTYPE_KEYS, Case, related

V1: Final = "/pmp-dsh-tavern/api/v1"
#: Codes of the host's body reader: a body refused before any format parser saw it (a wrapper
#: body such as ``{content}`` that is not UTF-8 JSON). They carry no ``details.path``.
HOST_BODY_CODES: Final = frozenset(
    {
        "INVALID_JSON",
        "INVALID_BODY",
        "BODY_TOO_LARGE",
        "UNSUPPORTED_MEDIA_TYPE",
        "STRUCTURE_TOO_DEEP",
        "STRUCTURE_KEY_TOO_LONG",
        "STRUCTURE_TOO_MANY_NODES",
        "STRUCTURE_STRING_TOO_LARGE",
        "NUMBER_OUT_OF_RANGE",
    }
)
_CLI_DETAIL: Final = re.compile(
    r"^(?P<code>[A-Z][A-Z0-9_]*): (?P<message>.*?)(?: at (?P<path>\$\S*))?$"
)


@dataclass(slots=True)
class Outcome:
    """What an entry answered: an HTTP status (a command maps to 201 / 400 / 204 skipped)."""

    status: int
    code: str | None = None
    path: str | None = None
    body: Any = None
    #: (list route, id) of what was stored, to read back and remove.
    created: list[tuple[str, str]] = field(default_factory=list)
    #: A refusal the host's body reader made (no format parser ran).
    host_level: bool = False
    #: An HTTP answer (in the problem shape when refused), not a command's report.
    http: bool = True


@dataclass(slots=True)
class Count:
    cases: int = 0
    accepted: int = 0
    refused: int = 0
    skipped: int = 0
    server_errors: int = 0


#: Cases per (format, entry) and the rule each violation broke, reported at the end of the run.
COUNTS: dict[tuple[str, str], Count] = {}
VIOLATIONS: list[str] = []
#: Every 5xx (or crashed command) seen, for the summary.
SERVER_ERRORS: list[str] = []


def _snapshot(root: Path) -> dict[str, str]:
    """SHA-256 of every file under ``root`` (what the body fuzzer's conftest counts as state)."""
    out: dict[str, str] = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in _NOT_STATE_DIRS]
        for name in files:
            if name.endswith(_NOT_STATE):
                continue
            path = os.path.join(folder, name)
            try:
                digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
            except FileNotFoundError:
                continue
            out[os.path.relpath(path, root)] = digest
    return out


def _problem(status: int, body: Any, created: list[tuple[str, str]] | None = None) -> Outcome:
    if status < 400 or not isinstance(body, dict):
        return Outcome(status, body=body, created=created or [])
    error = body.get("error")
    details = error.get("details") if isinstance(error, dict) else None
    path = details.get("path") if isinstance(details, dict) else None
    code = body.get("code")
    return Outcome(status, code, path, body, host_level=details is None and code in HOST_BODY_CODES)


@dataclass(frozen=True, slots=True)
class Entry:
    """One way in: a name, the formats it takes, and how it sends a case."""

    name: str
    formats: tuple[str, ...]
    send: Callable[[FormatHarness, Case], Awaitable[Outcome]]
    #: The command's own journal (relative to the data directory), written on every run: a
    #: refused or skipped file may add ``run``/``pending``/``abandon`` lines, never ``done``.
    journal: str | None = None
    #: Set-up a case needs in the store before its snapshot is taken.
    prepare: Callable[[FormatHarness, Case], Awaitable[None]] | None = None


class FormatHarness:
    """The body fuzzer's harness plus the entry paths and the checks of the field fuzzer."""

    def __init__(self, harness: Harness) -> None:
        self.h = harness
        self.tmp = Path(tempfile.mkdtemp(prefix="fz-files-"))
        self.env = command_environment(HostConfig(data_dir=str(harness.data_dir), port=9))
        self._regex_preset: str | None = None

    def close(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -- HTTP ----------------------------------------------------------------------------------
    async def request(
        self, method: str, path: str, data: bytes | None = None, ctype: str = "application/json"
    ) -> tuple[int, Any]:
        client = self.h.client
        assert client is not None
        headers = {"Origin": self.h.origin}
        if data is not None:
            headers["Content-Type"] = ctype
        payload = io.BytesIO(data) if data is not None else None
        resp = await client.request(method, path, data=payload, headers=headers)
        raw = await resp.read()
        try:
            body = msgspec.json.decode(raw) if raw else None
        except msgspec.DecodeError:
            body = raw[:200]
        return resp.status, body

    async def post_file(self, route: str, data: bytes, ctype: str, key: str, lst: str) -> Outcome:
        status, body = await self.request("POST", V1 + route, data, ctype)
        created = []
        if status < 300 and isinstance(body, dict):
            created = [(lst, body[key]["id"])]
        return _problem(status, body, created)

    # -- commands ------------------------------------------------------------------------------
    async def command(self, argv: list[str]) -> tuple[int, str, str]:
        """``innkeeper import`` in a worker thread (its own event loop): status, stdout, stderr."""

        def run() -> tuple[int, str, str]:
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    # The in-process test server records no address beside the writer lock.
                    code = import_main([*argv, "--server", self.h.origin], self.env)
                except Exception:  # a crashed command: the 5xx of the command line
                    code = -1
                    err.write(traceback.format_exc())
            return code, out.getvalue(), err.getvalue()

        return await asyncio.to_thread(run)

    async def regex_preset(self) -> str:
        """The preset global regex scripts of a fuzzed folder attach to (imported once)."""
        if self._regex_preset is None:
            root = self.fresh_dir() / "default-user"
            (root / "OpenAI Settings").mkdir(parents=True)
            (root / "worlds").mkdir()
            (root / "settings.json").write_text("{}")
            (root / "OpenAI Settings" / "fz.json").write_bytes(_HELPER_PRESET)
            code, out, err = await self.command([str(root), "--json"])
            assert code == 0, (out, err)
            self._regex_preset = json.loads(out)["items"][0]["id"]
        return self._regex_preset

    def fresh_dir(self) -> Path:
        return Path(tempfile.mkdtemp(dir=self.tmp))

    # -- the checks ----------------------------------------------------------------------------
    def check(self, entry: Entry, case: Case) -> Outcome:
        """Send ``case`` through ``entry`` and hold the answer to the rules (module docstring)."""
        return self.h.runner.run(self._check(entry, case))

    async def _check(self, entry: Entry, case: Case) -> Outcome:
        count = COUNTS.setdefault((case.fmt, entry.name), Count())
        count.cases += 1
        if entry.prepare is not None:
            await entry.prepare(self, case)
        before = await asyncio.to_thread(_snapshot, self.h.data_dir)
        journal = self._journal_size(entry)
        what = f"{entry.name}: {case.label}"
        try:
            outcome = await entry.send(self, case)
        except AssertionError as exc:  # a check inside the entry (a read-back, say)
            VIOLATIONS.append(str(exc)[:400])
            raise
        except Exception as exc:  # the in-process parser path raised what it must not
            outcome = Outcome(500, body=f"{type(exc).__name__}: {exc}"[:2000], http=False)
        try:
            assert outcome.status < 500, (what, outcome.status, outcome.body)
            status, health = await self.request("GET", "/healthz")
            assert status == 200, (what, "unhealthy after the case", status, health)
            if outcome.status >= 400 or outcome.status == 204:
                if outcome.status == 204:
                    count.skipped += 1  # a command skipped a file it does not recognize
                else:
                    count.refused += 1
                    self._check_refusal(what, case, outcome)
                await self._check_unchanged(what, entry, before, journal, outcome)
            else:
                count.accepted += 1
                await self._check_accepted(what, outcome)
        except AssertionError as exc:
            if outcome.status >= 500:
                count.server_errors += 1
                SERVER_ERRORS.append(f"{what}: {str(outcome.body)[:300]}")
            VIOLATIONS.append(f"{exc.args[0] if exc.args else exc!r}"[:400])
            raise
        return outcome

    def _journal_size(self, entry: Entry) -> int:
        if entry.journal is None:
            return 0
        path = self.h.data_dir / entry.journal
        return path.stat().st_size if path.exists() else 0

    async def _check_unchanged(
        self, what: str, entry: Entry, before: dict[str, str], journal: int, outcome: Outcome
    ) -> None:
        after = await asyncio.to_thread(_snapshot, self.h.data_dir)
        changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
        if entry.journal is not None and entry.journal in changed:
            changed.remove(entry.journal)
            added = (self.h.data_dir / entry.journal).read_bytes()[journal:]
            ops = [json.loads(line)["op"] for line in added.splitlines() if line.strip()]
            assert "done" not in ops, (what, "the journal records a refused file as done", ops)
        assert not changed, (what, "a refused case wrote", changed, outcome.body)

    @staticmethod
    def _check_refusal(what: str, case: Case, outcome: Outcome) -> None:
        body = outcome.body
        code = outcome.code
        assert isinstance(code, str) and STABLE_CODE.match(code), (what, body)
        if outcome.http:
            assert isinstance(body, dict), (what, body)
            assert body.get("ok") is False and body.get("error"), (what, body)
        if outcome.host_level:
            return
        assert isinstance(outcome.path, str), (what, "no error.details.path", body)
        # The keys a mutation adds next to the field are fields of their own.
        named = [case.path]
        if case.mutation == "prototype-siblings":
            named += [(*case.path[:-1], key) for key in PROTOTYPE_KEYS]
        assert any(related(outcome.path, p) for p in named), (
            what,
            "the path names another field",
            body,
        )

    async def _check_accepted(self, what: str, outcome: Outcome) -> None:
        """Read back and export what was stored, then remove it (the store stays small)."""
        exports = {"characters": "json", "presets": "export", "world-books": "json"}
        for lst, rid in outcome.created:
            status, body = await self.request("GET", f"{V1}/{lst}/{rid}")
            assert status == 200, (what, "stored but unreadable", lst, body)
            suffix = exports.get(lst, "export")
            status, body = await self.request("GET", f"{V1}/{lst}/{rid}/{suffix}")
            assert status == 200, (what, "stored but not exportable", lst, body)
            status, body = await self.request("DELETE", f"{V1}/{lst}/{rid}")
            assert status == 200, (what, "stored but not removable", lst, body)


# ====================================================================== the entry paths


def _png(keyword: str) -> Callable[[FormatHarness, Case], Awaitable[Outcome]]:
    async def send(fh: FormatHarness, case: Case) -> Outcome:
        data = write_card_chunks(placeholder_png(), [(keyword, case.data)])
        return await fh.post_file(
            "/characters/import?filename=fz.png", data, "image/png", "character", "characters"
        )

    return send


async def _card_json(fh: FormatHarness, case: Case) -> Outcome:
    return await fh.post_file(
        "/characters/import?filename=fz.json",
        case.data,
        "application/json",
        "character",
        "characters",
    )


async def _book_json(fh: FormatHarness, case: Case) -> Outcome:
    return await fh.post_file(
        "/world-books/import?filename=fz.json",
        case.data,
        "application/json",
        "worldBook",
        "world-books",
    )


async def _user_json(fh: FormatHarness, case: Case) -> Outcome:
    return await fh.post_file("/users/import", case.data, "application/json", "user", "users")


def _json_string(data: bytes) -> bytes:
    """``data`` as a JSON string literal; bytes that are not UTF-8 stay raw (the body is then
    not JSON, as a client sending them would make it)."""
    try:
        return msgspec.json.encode(data.decode("utf-8"))
    except UnicodeDecodeError:
        return (
            b'"' + data.replace(b"\\", b"\\\\").replace(b'"', b'\\"').replace(b"\n", b"\\n") + b'"'
        )


async def _preset_import(fh: FormatHarness, case: Case) -> Outcome:
    body = b'{"name":"fz","content":' + _json_string(case.data) + b"}"
    return await fh.post_file("/import", body, "application/json", "preset", "presets")


def _regex_put(kind: str) -> Callable[[FormatHarness, Case], Awaitable[Outcome]]:
    async def send(fh: FormatHarness, case: Case) -> Outcome:
        rid = fh.h.ids[kind]
        body = b'{"regexScripts":' + case.data + b"}"
        status, answer = await fh.request("PUT", f"{V1}/{kind}/{rid}/regex-scripts", body)
        if status < 300:
            # Accepted: the native scripts read back as stored.
            got, again = await fh.request("GET", f"{V1}/{kind}/{rid}/regex-scripts")
            assert got == 200 and again["regexScripts"] == answer["regexScripts"], (
                case.label,
                again,
            )
        return _problem(status, answer)

    return send


_INITVAR_BOOK: Final = {
    "uid": 0,
    "key": [],
    "comment": "[initvar] fuzz",
    "disable": True,
    "order": 1,
}


async def _initvar_book(fh: FormatHarness, case: Case) -> Outcome:
    """An ``[initvar]`` entry is text inside a world book: the book imports whatever it says."""
    text = case.data.decode("utf-8", "replace")
    book = {"entries": {"0": {**_INITVAR_BOOK, "content": text}}}
    return await fh.post_file(
        "/world-books/import?filename=initvar.json",
        msgspec.json.encode(book),
        "application/json",
        "worldBook",
        "world-books",
    )


async def _initvar_parser(fh: FormatHarness, case: Case) -> Outcome:
    """What a session start does with an ``[initvar]`` entry: load, build the schema, check."""
    text = case.data.decode("utf-8", "replace")
    try:
        loaded = load_initvar([("fuzz", [InitEntry("[initvar] fuzz", text)])])
        initialize_variables(loaded.stat_data, initialized_lorebooks=loaded.initialized_lorebooks)
    except MvuError as exc:
        # A refusal the player sees as the MVU source error; it names no JSON path.
        code = getattr(exc, "code", None) or "MVU_ERROR"
        return Outcome(400, code, host_level=True, body=str(exc), http=False)
    return Outcome(200, http=False)


_SUFFIX: Final = {"card": ".json", "preset": ".json", "world-book": ".json", "user": ".json"}
_KINDS: Final = {
    "character": "characters",
    "preset": "presets",
    "world-book": "world-books",
    "user": "users",
    "persona": "users",
}


async def _cli_file(fh: FormatHarness, case: Case) -> Outcome:
    """``innkeeper import FILE``: one table row, imported (with the id) or skipped (why)."""
    path = fh.fresh_dir() / f"fz{_SUFFIX[case.fmt]}"
    path.write_bytes(case.data)
    code, out, err = await fh.command([str(path)])
    if code not in (0, 1):
        return Outcome(500, body=f"the command crashed ({code}): {out} {err[-2000:]}", http=False)
    row = next((line for line in out.splitlines() if str(path.name) in line), "")
    if code == 0 and row.lstrip().startswith("imported"):
        return Outcome(201, body=out, created=_created_from_table(row), http=False)
    detail = row.split(path.name, 1)[-1].strip() if row else out
    match = _CLI_DETAIL.match(detail)
    if code == 0:
        return Outcome(204, body=out, http=False)  # not recognized: skipped, nothing written
    assert match is not None, (case.label, "a refusal without a stable code", out)
    assert "INTERNAL_ERROR" not in detail and "HTTP_5" not in detail, (case.label, out)
    return Outcome(400, match["code"], match["path"] or "$", out, http=False)


_ID: Final = re.compile(r"\b(character|preset|world-book|user)-[0-9a-z-]+")


def _created_from_table(row: str) -> list[tuple[str, str]]:
    found = _ID.search(row)
    return [(_KINDS[found.group(1)], found.group(0))] if found else []


_FOLDER_FILE: Final = {
    "card": "characters/fz.json",
    "preset": "OpenAI Settings/fz.json",
    "world-book": "worlds/fz.json",
    "regex": "regex/scripts.json",
    "persona": "settings.json",
    "chat": "chats/Ada/fz.jsonl",
}
_FOLDER_KIND: Final = {
    "card": "character",
    "preset": "preset",
    "world-book": "world-book",
    "regex": "regex",
    "persona": "persona",
    "chat": "chat",
}
_HELPER_PRESET: Final = msgspec.json.encode({"prompts": [], "name": "fuzz-regex-target"})
_ADA: Final = {
    "spec": "chara_card_v2",
    "spec_version": "2.0",
    "data": {"name": "Ada", "first_mes": "Welcome."},
}


async def _st_folder(fh: FormatHarness, case: Case) -> Outcome:
    """``innkeeper import <SillyTavern user folder>`` holding the mutated file."""
    root = fh.fresh_dir() / "default-user"
    for sub in ("characters", "worlds", "chats"):
        (root / sub).mkdir(parents=True)
    (root / "settings.json").write_text("{}")
    if case.fmt == "chat":
        (root / "characters" / "Ada.json").write_bytes(msgspec.json.encode(_ADA))
    if case.fmt == "regex":
        # Global scripts attach to the folder's presets: one the store already has (imported
        # once, a duplicate now), so a refused script file changes nothing.
        preset_id = await fh.regex_preset()
        (root / "OpenAI Settings").mkdir()
        (root / "OpenAI Settings" / "fz.json").write_bytes(_HELPER_PRESET)
    if case.fmt == "persona":
        (root / "User Avatars").mkdir()
        for name in ("mira.png", "kay.png"):
            (root / "User Avatars" / name).write_bytes(placeholder_png())
    target = root / _FOLDER_FILE[case.fmt]
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(case.data)
    code, out, err = await fh.command([str(root), "--json"])
    if code not in (0, 1) or not out.startswith("{"):
        return Outcome(500, body=f"the command crashed ({code}): {out} {err[-2000:]}", http=False)
    report = json.loads(out)
    # The items of the mutated file's kind (a card's linked-world refusal is the link's).
    mine = [i for i in report["items"] if i["kind"] == _FOLDER_KIND[case.fmt]]
    statuses = {i["status"] for i in mine}
    if "refused" in statuses:
        detail = next(i["detail"] for i in mine if i["status"] == "refused")
        match = _CLI_DETAIL.match(detail)
        assert match is not None, (case.label, "a refusal without a stable code", mine)
        return Outcome(400, match["code"], match["path"] or "$", report, http=False)
    if "imported" in statuses and case.fmt == "regex":
        # Attached: the preset carries them; take them off again for the next case.
        path = f"{V1}/presets/{preset_id}/regex-scripts"
        status, got = await fh.request("GET", path)
        assert status == 200 and got["regexScripts"], (case.label, "attached, not stored", got)
        status, got = await fh.request("PUT", path, b'{"regexScripts":[]}')
        assert status == 200, (case.label, got)
        return Outcome(201, body=report, http=False)
    if "imported" in statuses:
        created = [
            (_KINDS[i["kind"]], i["id"])
            for i in mine
            if i["status"] == "imported" and i["kind"] in _KINDS and i.get("id")
        ]
        return Outcome(201, body=report, created=created, http=False)
    if "duplicate" in statuses:
        return Outcome(200, body=report, http=False)  # already there: the journal learns it
    return Outcome(204, body=report, http=False)


async def _folder_prepare(fh: FormatHarness, case: Case) -> None:
    if case.fmt == "regex":
        await fh.regex_preset()


ENTRIES: Final[tuple[Entry, ...]] = (
    Entry("http-json", ("card",), _card_json),
    Entry("png-chara", ("card",), _png(CHARA)),
    Entry("png-ccv3", ("card",), _png(CCV3)),
    Entry("http-json", ("world-book",), _book_json),
    Entry("http-json", ("user",), _user_json),
    Entry("http-json", ("preset",), _preset_import),
    Entry("http-character", ("regex",), _regex_put("characters")),
    Entry("http-preset", ("regex",), _regex_put("presets")),
    Entry("http-world-book", ("initvar",), _initvar_book),
    Entry("parser", ("initvar",), _initvar_parser),
    Entry("cli", ("card", "preset", "world-book", "user"), _cli_file),
    Entry(
        "st-folder",
        ("card", "preset", "world-book", "regex", "persona", "chat"),
        _st_folder,
        journal="plugins/tavern/migration-ledger.jsonl",
        prepare=_folder_prepare,
    ),
)


def pairs() -> list[tuple[str, Entry]]:
    """Every (format, entry) pair the fuzzer covers."""
    return [(fmt, e) for e in ENTRIES for fmt in e.formats]
