"""Local-API security: loopback peer, Host allow-list, CSRF origin/token rules.

`docs/contract/security.md#request-token` and the v1/v2 notes: every route keeps the local TCP peer,
Host, Origin and media-type checks. This is CSRF and DNS-rebinding protection for a server bound
to loopback, not authentication.

- The TCP peer must be a loopback address.
- The ``Host`` header must be exactly ``host[:port]`` (IPv6 in brackets) and its hostname
  allow-listed (``localhost``, ``127.0.0.1``, ``::1`` plus configured names), which defeats DNS
  rebinding.
- A mutation (any method but GET/HEAD/OPTIONS) needs either an ``Origin`` equal to the server's
  own origin, or, with no ``Origin`` at all, the process-local ``X-Tavern-Request-Token``.
- A foreign or ``null`` Origin, or ``Sec-Fetch-Site: cross-site``, is refused on every method;
  only a browser's top-level navigation (``Sec-Fetch-Mode: navigate``) may arrive cross-site, and
  it cannot read the answer (GETs change nothing).
"""

from __future__ import annotations

import ipaddress
import re
import secrets
from collections.abc import Iterable
from typing import Final
from urllib.parse import urlsplit

from aiohttp import web

from innkeeper_hostapi import Handler, HttpProblem, json_response

SAFE_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS"})
TOKEN_HEADER: Final = "X-Tavern-Request-Token"
CLIENT_HEADER: Final = "X-Tavern-Client"
DEFAULT_ALLOWED_HOSTS: Final = ("localhost", "127.0.0.1", "::1")


def _is_loopback(host: str | None) -> bool:
    if not host:
        return False
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


#: RFC 3986 ``host [":" port]`` as a Host header carries it: a bracketed IPv6 literal or a
#: registered name / IPv4 address, then an optional decimal port; nothing else, no whitespace.
_HOST_HEADER: Final = re.compile(
    r"(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<name>[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252}[A-Za-z0-9])?))"
    r"(?::(?P<port>[0-9]{1,5}))?"
)


def parse_host(host_header: str) -> tuple[str, int | None] | None:
    """``(hostname, port)`` of a Host header value, or ``None`` unless it is exactly that.

    ``[::1]:8787`` → ``("::1", 8787)``; ``localhost`` → ``("localhost", None)``. Trailing junk
    (``[::1]evil.com``, ``127.0.0.1:8787 evil``), an unbracketed IPv6 address, an invalid IPv6
    literal or a port over 65535 are refused.
    """
    match = _HOST_HEADER.fullmatch(host_header)
    if match is None:
        return None
    port = int(match["port"]) if match["port"] is not None else None
    if port is not None and port > 65535:
        return None
    v6 = match["v6"]
    if v6 is not None:
        try:
            ipaddress.IPv6Address(v6)
        except ValueError:
            return None
        return v6.lower(), port
    return match["name"].lower(), port


def _is_navigation(request: web.Request) -> bool:
    """A browser's top-level navigation (a link followed to this server from anywhere)."""
    return (
        request.headers.get("Sec-Fetch-Mode", "").lower() == "navigate"
        and request.headers.get("Sec-Fetch-Dest", "document").lower() == "document"
    )


class RequestGuard:
    """Holds the allow-list and the process-local request token; builds the middleware."""

    def __init__(self, allowed_hosts: Iterable[str] = ()) -> None:
        self.allowed_hosts = frozenset(
            h.lower().strip("[]") for h in (*DEFAULT_ALLOWED_HOSTS, *allowed_hosts)
        )
        #: 64 hex characters, new every process start (a restart invalidates tokens).
        self.token = secrets.token_hex(32)

    # -- checks --------------------------------------------------------------------------------
    def check_peer_and_host(self, request: web.Request) -> None:
        peer = request.transport.get_extra_info("peername") if request.transport else None
        peer_host = peer[0] if isinstance(peer, tuple) and peer else None
        if not _is_loopback(peer_host):
            raise HttpProblem(403, "LOCAL_PEER_REQUIRED", "only loopback clients are served")
        parsed = parse_host(request.headers.get("Host", ""))
        if parsed is None or parsed[0] not in self.allowed_hosts:
            raise HttpProblem(403, "HOST_NOT_ALLOWED", "the Host header is not allow-listed")

    def _own_origin(self, request: web.Request) -> str:
        return f"{request.scheme}://{request.headers.get('Host', '')}".lower()

    def check_origin(self, request: web.Request) -> None:
        """Refuse foreign/null Origins and cross-site fetches, on any method."""
        if request.headers.get("Sec-Fetch-Site", "").lower() == "cross-site":
            raise HttpProblem(403, "ORIGIN_FORBIDDEN", "cross-site requests are refused")
        origin = request.headers.get("Origin")
        if origin is None:
            return
        parts = urlsplit(origin.lower())
        if origin.lower() == "null" or f"{parts.scheme}://{parts.netloc}" != self._own_origin(
            request
        ):
            raise HttpProblem(
                403,
                "ORIGIN_FORBIDDEN",
                f"the request Origin is not this server: expected {self._own_origin(request)}",
            )

    def check_mutation(self, request: web.Request) -> None:
        self.check_origin(request)
        if "Origin" in request.headers:
            return  # same-origin browser request (check_origin passed)
        token = request.headers.get(TOKEN_HEADER)
        if token is None:
            raise HttpProblem(
                403,
                "ORIGIN_REQUIRED",
                f"mutations need a same-origin Origin header or the {TOKEN_HEADER} header",
            )
        if not secrets.compare_digest(token.encode(), self.token.encode()):
            raise HttpProblem(403, "REQUEST_TOKEN_INVALID", "the request token is not valid")

    # -- aiohttp glue --------------------------------------------------------------------------
    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        self.check_peer_and_host(request)
        if request.method not in SAFE_METHODS:
            self.check_mutation(request)
        elif not _is_navigation(request):
            # Reads refuse another site too: session data must not be fetched cross-site
            # (a top-level navigation cannot read the answer, and GETs change nothing).
            self.check_origin(request)
        return await handler(request)

    async def token_handler(self, request: web.Request) -> web.StreamResponse:
        """``GET /pmp-dsh-tavern/api/request-token`` for the embedded desktop client."""
        if request.headers.get(CLIENT_HEADER) != "embedded":
            raise HttpProblem(
                403, "REQUEST_TOKEN_CLIENT_REQUIRED", f"{CLIENT_HEADER}: embedded is required"
            )
        self.check_origin(request)
        return json_response(
            {"ok": True, "token": self.token}, headers={"Cache-Control": "no-store"}
        )
