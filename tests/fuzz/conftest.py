"""The fuzzing harness: one real host with every built-in plugin, driven from its route table.

Issue 19: every registered mutating route gets bad bodies of each class (invalid UTF-8, deep
nesting, integers out of range, oversize, wrong media type, broken multipart, truncated JSON,
random bytes) plus random structures; every answer must be a 4xx in the problem shape with a
stable code, and a refused request must leave the data directory exactly as it was.

The server runs in-process (aiohttp's test server on a loopback port, one event loop owned by
the module fixture) so ten thousand cases take seconds, not minutes. Profiles: ``quick`` (the
default, in CI: derandomized, at least 10,000 cases in total) and ``long`` (``tools/fuzz --long``,
``INNKEEPER_FUZZ_PROFILE=long``: random seeds and ten times the examples).
"""

from __future__ import annotations

import asyncio
import inspect
import io
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import msgspec
import pytest
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import HealthCheck, settings

from innkeeper_core.agents.manager import AgentManager
from innkeeper_core.app import CONTAINER, create_app
from innkeeper_core.config import HostConfig
from innkeeper_core.http.routes import RouteEntry
from innkeeper_core.testing import SavedPluginModules

PROFILE = os.environ.get("INNKEEPER_FUZZ_PROFILE", "quick")
#: Examples per hypothesis test are multiplied by this in the long profile.
SCALE = 10 if PROFILE == "long" else 1
STABLE_CODE = re.compile(r"^[A-Z][A-Z0-9_]*$")
MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})

settings.register_profile(
    "fuzz-quick",
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "fuzz-long",
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def fuzz_settings(examples: int) -> settings:
    """Settings of one fuzz test: ``examples`` in the quick profile, times ten in the long one."""
    return settings(
        settings.get_profile(f"fuzz-{PROFILE}"),
        max_examples=examples * SCALE,
    )


@dataclass
class Tally:
    """Cases sent and answers by status class, reported at the end of the run."""

    cases: int = 0
    #: Cases fed straight to a format parser (no HTTP), e.g. mutated PNG cards.
    parser_cases: int = 0
    by_class: dict[str, int] = field(default_factory=dict)
    server_errors: list[str] = field(default_factory=list)


TALLY = Tally()


@dataclass(frozen=True)
class Answer:
    status: int
    body: Any

    def check_problem(self, what: str) -> None:
        """A 4xx in the spec's problem shape with a stable code."""
        assert 400 <= self.status < 500, (what, self.status, self.body)
        assert isinstance(self.body, dict), (what, self.body)
        assert self.body.get("ok") is False, (what, self.body)
        error = self.body.get("error")
        if isinstance(error, dict):  # the structured form: {code, message, details}
            assert error.get("code") == self.body.get("code"), (what, self.body)
            assert isinstance(error.get("details"), dict), (what, self.body)
            error = error.get("message")
        assert isinstance(error, str) and error, (what, self.body)
        code = self.body.get("code")
        assert isinstance(code, str) and STABLE_CODE.match(code), (what, self.body)


#: Not state: SQLite's shared-memory index changes on reads, and the Tavern's persistent
#: operation log (rotated files included) records every play mutation's terminal status,
#: refusals included (`docs/contract/play.md#operation-logs`).
_NOT_STATE: Final = ("-shm",)
_NOT_STATE_DIRS: Final = frozenset({"operation-logs"})


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``root`` with its size and modification time (see ``_NOT_STATE``)."""
    out: dict[str, tuple[int, int]] = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in _NOT_STATE_DIRS]
        for name in files:
            if name.endswith(_NOT_STATE):
                continue
            path = os.path.join(folder, name)
            try:
                stat = os.stat(path)
            except FileNotFoundError:
                continue
            out[os.path.relpath(path, root)] = (stat.st_size, stat.st_mtime_ns)
    return out


def _changed(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> list[str]:
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


class Harness:
    """A running host (all entry-point plugins) with seeded resources to aim requests at."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.runner = asyncio.Runner()
        self.client: TestClient[Any, Any] | None = None
        self.ids: dict[str, str] = {}
        self.routes: list[RouteEntry] = []
        self.agents: AgentManager
        # The host purges plugin modules when it stops; put the test process's back then.
        self._saved = SavedPluginModules()

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> None:
        self.runner.run(self._start())

    async def _start(self) -> None:
        app = create_app(HostConfig(data_dir=str(self.data_dir), port=0))
        self.client = TestClient(TestServer(app, host="127.0.0.1"))
        await self.client.start_server()
        container = app[CONTAINER]
        agents = container.agents()
        self.agents = await agents if inspect.isawaitable(agents) else agents
        table = container.registries().routes
        self.routes = sorted(
            (e for e in table.entries if e.method in MUTATING),
            key=lambda e: (e.template, e.method),
        )
        await self._seed()

    def close(self) -> None:
        if self.client is not None:
            self.runner.run(self.client.close())
        self.runner.close()
        self._saved.restore()

    @property
    def origin(self) -> str:
        assert self.client is not None
        return str(self.client.make_url("/")).rstrip("/")

    # -- seeding -------------------------------------------------------------------------------
    async def _seed(self) -> None:
        v1 = "/pmp-dsh-tavern/api/v1"
        seeds = {
            "session": ("/host/api/sessions", {"title": "fuzz"}, ("session", "id")),
            "presets": (f"{v1}/presets", {"name": "fuzz"}, ("preset", "id")),
            "characters": (f"{v1}/characters", {"name": "fuzz"}, ("character", "id")),
            "users": (f"{v1}/users", {"name": "fuzz"}, ("user", "id")),
            "world-books": (f"{v1}/world-books", {"name": "fuzz"}, ("worldBook", "id")),
        }
        for kind, (path, body, (key, field_name)) in seeds.items():
            answer = await self._send("POST", path, msgspec.json.encode(body), "application/json")
            assert answer.status in (200, 201), (kind, answer)
            self.ids[kind] = answer.body[key][field_name]

    def path_for(self, entry: RouteEntry, *, real_ids: bool = True) -> str:
        """The route's template with its parameters filled (seeded ids where they fit)."""
        parts: list[str] = []
        previous = ""
        for segment in entry.template.strip("/").split("/"):
            if segment.startswith("{"):
                name = segment[1:].split(":", 1)[0].rstrip("}")
                value = "fuzz-missing"
                if real_ids and name in ("session_id", "sessionId"):
                    value = self.ids["session"]
                elif real_ids and previous in self.ids:
                    value = self.ids[previous]
                parts.append(value)
            else:
                parts.append(segment)
            previous = segment
        return "/" + "/".join(parts)

    # -- requests ------------------------------------------------------------------------------
    async def _send(
        self,
        method: str,
        path: str,
        data: bytes,
        content_type: str | None,
        extra: dict[str, str] | None = None,
    ) -> Answer:
        assert self.client is not None
        headers = {"Origin": self.origin, **(extra or {})}
        if content_type is not None:
            headers["Content-Type"] = content_type
        resp = await self.client.request(method, path, data=io.BytesIO(data), headers=headers)
        raw = await resp.read()
        try:
            body = msgspec.json.decode(raw) if raw else None
        except msgspec.DecodeError:
            body = raw[:200]
        return Answer(resp.status, body)

    def send(
        self,
        entry: RouteEntry,
        data: bytes,
        content_type: str | None = "application/json",
        *,
        real_ids: bool = True,
        extra: dict[str, str] | None = None,
    ) -> Answer:
        """Send one case and count it; a 5xx is recorded before any assertion fails."""
        path = self.path_for(entry, real_ids=real_ids)
        answer = self.runner.run(self._send(entry.method, path, data, content_type, extra))
        TALLY.cases += 1
        bucket = f"{answer.status // 100}xx"
        TALLY.by_class[bucket] = TALLY.by_class.get(bucket, 0) + 1
        if answer.status >= 500:
            TALLY.server_errors.append(f"{entry.method} {entry.template}: {answer.body!r:.200}")
        return answer

    def refused_without_change(
        self,
        entry: RouteEntry,
        data: bytes,
        content_type: str | None = "application/json",
        *,
        what: str,
        real_ids: bool = True,
        extra: dict[str, str] | None = None,
    ) -> Answer:
        """Send a bad case: it must be a 4xx problem and leave the data directory unchanged."""
        before = _snapshot(self.data_dir)
        answer = self.send(entry, data, content_type, real_ids=real_ids, extra=extra)
        answer.check_problem(f"{what} → {entry.method} {entry.template}")
        changed = _changed(before, _snapshot(self.data_dir))
        assert not changed, (what, entry.method, entry.template, answer.body, changed)
        return answer

    def unchanged_unless_accepted(
        self,
        entry: RouteEntry,
        data: bytes,
        *,
        what: str,
        real_ids: bool = True,
        content_type: str = "application/json",
    ) -> Answer:
        """A random structure: never a 5xx; a refusal is a stable-code 4xx that wrote nothing."""
        before = _snapshot(self.data_dir)
        answer = self.send(entry, data, content_type, real_ids=real_ids)
        assert answer.status < 500, (what, entry.method, entry.template, answer.body)
        if answer.status < 400:
            # An accepted prompt runs a turn in the background: let it finish writing.
            self.runner.run(self.agents.wait_all_idle())
        if answer.status >= 400:
            answer.check_problem(f"{what} → {entry.method} {entry.template}")
            changed = _changed(before, _snapshot(self.data_dir))
            assert not changed, (what, entry.method, entry.template, answer.body, changed)
        return answer


@pytest.fixture(scope="session")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    h = Harness(tmp_path_factory.mktemp("fuzz") / "data")
    h.start()
    try:
        yield h
    finally:
        h.close()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    from .format_entries import COUNTS, SERVER_ERRORS

    if COUNTS:
        total = sum(c.cases for c in COUNTS.values())
        errors = sum(c.server_errors for c in COUNTS.values())
        terminalreporter.write_line(
            f"format fuzz ({PROFILE} profile): {total} cases, {errors} 5xx "
            "(format/entry: cases = accepted + refused + skipped)"
        )
        for (fmt, entry), c in sorted(COUNTS.items()):
            terminalreporter.write_line(
                f"  {fmt:>10} {entry:<16} {c.cases:>6} = {c.accepted} + {c.refused} + {c.skipped}"
                + (f"  ({c.server_errors} 5xx)" if c.server_errors else "")
            )
        for line in SERVER_ERRORS[:30]:
            terminalreporter.write_line(f"  5xx: {line}")
    if not TALLY.cases and not TALLY.parser_cases:
        return
    classes = ", ".join(f"{k}: {v}" for k, v in sorted(TALLY.by_class.items()))
    terminalreporter.write_line(
        f"fuzz ({PROFILE} profile): {TALLY.cases} cases, {len(TALLY.server_errors)} 5xx ({classes})"
    )
    for line in TALLY.server_errors[:20]:
        terminalreporter.write_line(f"  5xx: {line}")
