"""Turning errors into the spec's problem responses: ``{"ok": false, "error", "code"}``."""

from __future__ import annotations

import logging

from aiohttp import web

from innkeeper_hostapi import Handler, HttpProblem, problem
from innkeeper_hostapi.bodies import ClientGone

log = logging.getLogger("innkeeper.http")

_HTTP_CODES = {
    400: "BAD_REQUEST",
    403: "FORBIDDEN",
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    408: "BODY_TIMEOUT",
    413: "BODY_TOO_LARGE",
    415: "UNSUPPORTED_MEDIA_TYPE",
    503: "UNAVAILABLE",
}


@web.middleware
async def problem_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Outermost middleware: every failure leaves in the problem shape, nothing leaks a trace."""
    try:
        return await handler(request)
    except HttpProblem as exc:
        return problem(exc.status, exc.code, exc.message, headers=exc.headers, details=exc.details)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        code = _HTTP_CODES.get(exc.status, "HTTP_ERROR")
        headers = {k: v for k, v in exc.headers.items() if k.lower() in ("allow", "retry-after")}
        return problem(exc.status, code, exc.reason, headers=headers)
    except (ClientGone, ConnectionResetError):
        # Nobody is left to answer: a normal outcome, not an error (no traceback, no count).
        log.debug("client went away during %s %s", request.method, request.rel_url.path)
        return problem(400, "CLIENT_GONE", "the client closed the connection")
    except Exception:
        log.exception("unhandled error in %s %s", request.method, request.rel_url.path)
        return problem(500, "INTERNAL_ERROR", "internal server error")
