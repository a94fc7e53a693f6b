"""The model settings routes under ``/host/api/model-settings`` (docs/http.md "Model settings").

``GET`` says what the next turn talks to (never the key: whether one is set and its last four
characters) and which fields flags, environment or TOML fix. ``PUT`` saves new settings and
applies them from the next turn (:class:`~innkeeper_core.providers.connection.ModelConnection`).
``POST …/test`` asks an OpenAI-compatible server for its models, from the host (the page cannot
call another origin), with the key given or the one in use, and answers with the model ids or the
server's own reason.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Final

import aiohttp
import msgspec
from aiohttp import web

from innkeeper_core.providers.connection import (
    PRACTICE,
    PROFILE_BASE_URLS,
    PROVIDER_CHOICES,
    ModelConnection,
    SettingsRejected,
    check_key,
    check_url,
    redact,
)
from innkeeper_core.providers.openai import classify_http_error
from innkeeper_hostapi import json_response
from innkeeper_hostapi.http import read_json

log = logging.getLogger("innkeeper.http.model_settings")

BASE: Final = "/host/api/model-settings"
#: Request body limit of both routes (bytes).
MAX_BODY: Final = 16 << 10
#: Most bytes of a ``/models`` answer read (OpenRouter's list, with descriptions, is ~1 MiB).
MAX_MODELS_BYTES: Final = 8 << 20
#: Most model ids returned, and the longest one kept.
MAX_MODELS: Final = 2000
MAX_MODEL_ID_CHARS: Final = 256
#: Most characters of a server's own error text passed on.
MAX_SERVER_TEXT: Final = 2000
#: Status of a failed test: the model server's failure is the answer, not a fault of the host, so
#: it is not a 5xx (502/504 would tell a client or a fuzzer that the host broke). 424 Failed
#: Dependency: the request could not be done because what it depends on failed; ``code`` says how.
FAILED_DEPENDENCY: Final = 424
#: Seconds to connect, and for the whole ``/models`` call.
CONNECT_TIMEOUT_S: Final = 10.0
TOTAL_TIMEOUT_S: Final = 20.0

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ModelServerFailed(Exception):
    """``Test connection`` failed: the status and code of our answer, the reason, and the
    server's own HTTP status when it answered."""

    def __init__(self, status: int, code: str, message: str, server_status: int | None = None):
        super().__init__(message)
        self.status, self.code, self.message, self.server_status = (
            status,
            code,
            message,
            server_status,
        )


def _fail(status: int, code: str, message: str, **extra: Any) -> web.Response:
    return json_response({"ok": False, "error": message, "code": code, **extra}, status=status)


async def _object(request: web.Request) -> dict[str, Any]:
    body = await read_json(request)
    if not isinstance(body, dict):
        raise SettingsRejected("", "the request body must be a JSON object")
    return body


def model_ids(raw: bytes) -> list[str]:
    """The model ids of a ``GET /models`` answer: OpenAI's ``{data: [{id}]}``, or a bare list,
    or ``{models: [{id | name}]}`` as some local servers answer."""
    try:
        doc = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        raise ModelServerFailed(
            FAILED_DEPENDENCY, "MODEL_SERVER_NOT_JSON", "the model server's answer is not JSON"
        ) from None
    rows: object = doc
    if isinstance(doc, dict):
        rows = doc.get("data", doc.get("models"))
    if not isinstance(rows, list):
        raise ModelServerFailed(
            FAILED_DEPENDENCY,
            "MODEL_SERVER_BAD_ANSWER",
            "the model server's answer has no list of models",
        )
    ids: list[str] = []
    for row in rows:
        name = row.get("id", row.get("name")) if isinstance(row, dict) else row
        if isinstance(name, str) and name and len(name) <= MAX_MODEL_ID_CHARS and name not in ids:
            ids.append(name)
        if len(ids) >= MAX_MODELS:
            break
    return ids


async def list_models(session: aiohttp.ClientSession, base_url: str, key: str) -> list[str]:
    """``GET {base_url}/models`` with ``key`` as bearer token; the model ids, or
    :class:`ModelServerFailed` with the server's own reason (the key redacted from it)."""
    headers = {"Accept": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    timeout = aiohttp.ClientTimeout(total=TOTAL_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)
    try:
        async with session.get(
            base_url.rstrip("/") + "/models", headers=headers, timeout=timeout
        ) as response:
            raw = await response.content.read(MAX_MODELS_BYTES + 1)
            status = response.status
    except TimeoutError:
        late = f"the model server did not answer within {TOTAL_TIMEOUT_S:g} s"
        raise ModelServerFailed(FAILED_DEPENDENCY, "MODEL_SERVER_TIMEOUT", late) from None
    except aiohttp.InvalidURL:
        bad = "the model server URL is not valid"
        raise ModelServerFailed(400, "MODEL_SETTINGS_INVALID", bad) from None
    except aiohttp.ClientError as exc:
        reason = redact(str(exc) or type(exc).__name__, key)[:MAX_SERVER_TEXT]
        raise ModelServerFailed(
            FAILED_DEPENDENCY,
            "MODEL_SERVER_UNREACHABLE",
            f"cannot reach the model server: {reason}",
        ) from None
    if status >= 300:
        text = redact(classify_http_error(status, raw[:65536]).message, key)[:MAX_SERVER_TEXT]
        if status in (401, 403):
            raise ModelServerFailed(
                FAILED_DEPENDENCY,
                "MODEL_SERVER_REFUSED",
                f"the model server refused ({status}): {text}",
                status,
            )
        raise ModelServerFailed(
            FAILED_DEPENDENCY,
            "MODEL_SERVER_ERROR",
            f"the model server answered {status}: {text}",
            status,
        )
    if len(raw) > MAX_MODELS_BYTES:
        raise ModelServerFailed(
            FAILED_DEPENDENCY,
            "MODEL_SERVER_BAD_ANSWER",
            f"the model list is over {MAX_MODELS_BYTES} bytes",
        )
    return model_ids(raw)


class ModelRoutes:
    """Handlers bound to one model connection and the host's HTTP client."""

    def __init__(self, connection: ModelConnection, session: aiohttp.ClientSession) -> None:
        self.connection = connection
        self.session = session

    async def get(self, request: web.Request) -> web.StreamResponse:
        return json_response(self.connection.view())

    async def put(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await _object(request)
            self.connection.save(self.connection.parse(body))
        except SettingsRejected as exc:
            return _fail(400, "MODEL_SETTINGS_INVALID", exc.message, field=exc.field)
        except OSError as exc:
            log.warning("model settings cannot be written: %s", exc.strerror)
            return _fail(500, "MODEL_SETTINGS_WRITE_FAILED", "the settings file cannot be written")
        return json_response(self.connection.view())

    async def test(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await _object(request)
            unknown = sorted(set(body) - {"provider", "baseUrl", "apiKey"})
            if unknown:
                raise SettingsRejected(unknown[0], f"unknown field {unknown[0]!r}")
            provider = body.get("provider", "openai")
            if provider not in PROVIDER_CHOICES or provider == PRACTICE:
                raise SettingsRejected("provider", "choose a model server to test")
            url = check_url(body.get("baseUrl") or PROFILE_BASE_URLS[str(provider)])
            given = body.get("apiKey")
            key = check_key(given) if given not in (None, "") else self.connection.api_key
        except SettingsRejected as exc:
            return _fail(400, "MODEL_SETTINGS_INVALID", exc.message, field=exc.field)
        try:
            models = await list_models(self.session, url, key)
        except ModelServerFailed as exc:
            log.info("model server test failed: %s status=%s", exc.code, exc.server_status)
            return _fail(exc.status, exc.code, exc.message, serverStatus=exc.server_status)
        log.info("model server test: %d models", len(models))
        return json_response({"ok": True, "models": models, "baseUrl": url})

    def routes(self) -> list[tuple[str, str, Handler, int]]:
        """``(method, path, handler, body limit)`` of every model settings route."""
        return [
            ("GET", BASE, self.get, 0),
            ("PUT", BASE, self.put, MAX_BODY),
            ("POST", BASE + "/test", self.test, MAX_BODY),
        ]
