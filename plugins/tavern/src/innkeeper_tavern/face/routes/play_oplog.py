"""``GET /v2/operation-logs``: filter, page and export the operation journal
(`docs/contract/play.md#operation-logs`). Reads never log."""

from __future__ import annotations

import re
from typing import Any, Final

import msgspec
from aiohttp import web

from innkeeper_hostapi import json_response
from innkeeper_tavern.face.routes.play import PlayRoute
from innkeeper_tavern.features.play.errors import PLAY_OPERATION_LOG_QUERY_INVALID, PlayError
from innkeeper_tavern.features.play.oplog import OperationLog

#: Records per page: default and maximum.
DEFAULT_LOG_PAGE: Final = 100
MAX_LOG_PAGE: Final = 1000
#: Record kinds a ``status`` filter may name (the ``stage`` of start and terminal records).
STATUS_KINDS: Final = frozenset({"start", "success", "failure"})
_TIME: Final = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,3})?Z$")
_QUERY_KEYS: Final = frozenset(
    {"from", "to", "operation", "status", "sessionId", "operationId", "cursor", "limit", "format"}
)


def _bad(message: str) -> PlayError:
    return PlayError(400, PLAY_OPERATION_LOG_QUERY_INVALID, message)


def _time(value: str | None, name: str) -> str | None:
    if value is None:
        return None
    if not _TIME.fullmatch(value):
        raise _bad(f"{name} must be a UTC timestamp YYYY-MM-DDTHH:mm:ss.sssZ")
    whole, _, rest = value[:-1].partition(".")
    return f"{whole}.{(rest or '0').ljust(3, '0')}Z"


def query(log: OperationLog, params: dict[str, str]) -> tuple[list[dict[str, Any]], str | None]:
    """One page of records, newest first, and the cursor of the next page."""
    unknown = sorted(set(params) - _QUERY_KEYS)
    if unknown:
        raise _bad(f"unknown query parameter {unknown[0]!r}")
    start, end = _time(params.get("from"), "from"), _time(params.get("to"), "to")
    status = params.get("status")
    status_code: int | None = None
    if status is not None:
        if status.isdigit() and len(status) == 3:
            status_code = int(status)
        elif status not in STATUS_KINDS:
            raise _bad("status is start, success, failure or a 3-digit HTTP status")
    try:
        limit = int(params.get("limit", DEFAULT_LOG_PAGE))
    except ValueError:
        raise _bad("limit must be an integer") from None
    if not 1 <= limit <= MAX_LOG_PAGE:
        raise _bad(f"limit must be between 1 and {MAX_LOG_PAGE}")
    cursor = params.get("cursor")
    before: int | None = None
    if cursor is not None:
        if not (cursor.startswith("s") and cursor[1:].isdigit()):
            raise _bad("cursor is the nextCursor of a previous page")
        before = int(cursor[1:])
    wanted = {
        key: params[key] for key in ("operation", "sessionId", "operationId") if key in params
    }
    page: list[dict[str, Any]] = []
    more = False
    for record in log.journal.records():
        seq = record.get("seq")
        if not isinstance(seq, int) or (before is not None and seq >= before):
            continue
        at = record.get("at")
        if not isinstance(at, str) or (start and at < start) or (end and at > end):
            continue
        if any(record.get(key) != value for key, value in wanted.items()):
            continue
        if status_code is not None and record.get("status") != status_code:
            continue
        if status is not None and status_code is None and record.get("stage") != status:
            continue
        if len(page) == limit:
            more = True
            break
        page.append(record)
    return page, (f"s{page[-1]['seq']}" if more and page else None)


def oplog_routes(log: OperationLog) -> list[PlayRoute]:
    async def get_logs(request: web.Request) -> web.StreamResponse:
        params = dict(request.query)
        fmt = params.get("format", "json")
        if fmt not in ("json", "jsonl"):
            raise _bad("format is json or jsonl")
        records, cursor = query(log, params)
        if fmt == "jsonl":
            body = b"".join(msgspec.json.encode(r) + b"\n" for r in records)
            headers = {"Content-Disposition": 'attachment; filename="operation-logs.jsonl"'}
            if cursor:
                headers["X-Next-Cursor"] = cursor
            return web.Response(body=body, content_type="application/x-ndjson", headers=headers)
        return json_response({"ok": True, "records": records, "nextCursor": cursor})

    return [PlayRoute("/operation-logs", {"GET": (get_logs, None)}, "tavern.v2.operation_logs")]
