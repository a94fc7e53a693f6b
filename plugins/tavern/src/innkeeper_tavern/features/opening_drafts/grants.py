"""Rendering execution bindings (`docs/contract/openings.md#rendering-bindings`): the trusted
renderer binds an available, enabled card execution to the SHA-256 of its exact source.

At most :data:`MAX_GRANTS` live bindings are held in memory (the next one is refused, never an
eviction); no source body is kept; bindings have no expiry and are cleared on unload. The
``tavernRenderingAuthority`` service answers ``resolve`` and the synchronous ``is_current``.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Any, Final

from innkeeper_hostapi import HttpProblem, ServiceKey

#: Live execution bindings held at once.
MAX_GRANTS: Final = 64
#: Largest request (the whole execution bundle JSON rides in ``source``).
GRANT_BODY_LIMIT: Final = 16 << 20
RENDERING_GRANT_INVALID: Final = "RENDERING_GRANT_INVALID"
RENDERING_IDENTITY_MISMATCH: Final = "RENDERING_IDENTITY_MISMATCH"
RENDERING_GRANTS_FULL: Final = "RENDERING_GRANTS_FULL"
RENDERING_EXECUTION_CONFLICT: Final = "RENDERING_EXECUTION_CONFLICT"
_KEYS: Final = frozenset({"source", "sourceIdentity", "executionId", "downloaded", "enabled"})
_IDENTITY_KEYS: Final = frozenset({"version", "sha256", "scope"})


def _bad(message: str, code: str = RENDERING_GRANT_INVALID) -> HttpProblem:
    return HttpProblem(400, code, message)


def object_body(body: object, allowed: frozenset[str], code: str) -> dict[str, Any]:
    """``body`` when it is a JSON object with only ``allowed`` keys (``400 code`` otherwise)."""
    if not isinstance(body, dict):
        raise HttpProblem(400, code, "the request body must be a JSON object")
    extra = sorted(set(body) - allowed)
    if extra:
        raise HttpProblem(400, code, f"unknown field {extra[0]!r}")
    return body


@dataclass(frozen=True, slots=True)
class Grant:
    """One live binding: the execution and its recomputed identity (never the source)."""

    grant_id: str
    execution_id: str
    identity: dict[str, Any]


def check_identity(value: object) -> dict[str, Any]:
    """``{version:1, sha256, scope}`` with a 64-hex digest and a string ``scope``."""
    if not isinstance(value, dict) or set(value) != _IDENTITY_KEYS:
        raise _bad("sourceIdentity must be {version, sha256, scope}")
    sha = value["sha256"]
    if value["version"] != 1 or isinstance(value["version"], bool):
        raise _bad("sourceIdentity.version must be 1")
    if not isinstance(sha, str) or len(sha) != 64 or sha.strip("0123456789abcdef"):
        raise _bad("sourceIdentity.sha256 must be 64 lowercase hex")
    scope = value["scope"]
    if not isinstance(scope, str) or not scope or len(scope) > 512:
        raise _bad("sourceIdentity.scope must be a non-empty string of at most 512 chars")
    return {"version": 1, "sha256": sha, "scope": scope}


class RenderingAuthority:
    """``tavernRenderingAuthority``: the live bindings of this plugin instance."""

    def __init__(self) -> None:
        self._grants: dict[str, Grant] = {}
        self._closed = False

    def __len__(self) -> int:
        return len(self._grants)

    def grant(self, request: object) -> dict[str, Any]:
        """``POST /rendering-write-grants``: recompute the identity and bind the execution.
        The same execution with the same identity answers its existing grant."""
        body = object_body(request, _KEYS, RENDERING_GRANT_INVALID)
        source = body.get("source")
        if not isinstance(source, str) or not source:
            raise _bad("source must be the non-empty execution bundle JSON")
        execution = body.get("executionId")
        if not isinstance(execution, str) or not execution or len(execution) > 200:
            raise _bad("executionId must be a non-empty string of at most 200 chars")
        if body.get("downloaded") is not True or body.get("enabled") is not True:
            raise _bad("only downloaded:true, enabled:true executions are bound")
        identity = check_identity(body.get("sourceIdentity"))
        digest = hashlib.sha256(source.encode("utf-8")).hexdigest()
        if not hmac.compare_digest(digest, identity["sha256"]):
            raise _bad(
                "sourceIdentity.sha256 is not the source's digest", RENDERING_IDENTITY_MISMATCH
            )
        if self._closed:
            raise HttpProblem(409, RENDERING_GRANTS_FULL, "the authority is unloading")
        for grant in self._grants.values():
            if grant.execution_id == execution:
                if grant.identity != identity:
                    raise HttpProblem(
                        409, RENDERING_EXECUTION_CONFLICT, "executionId is bound to another source"
                    )
                return self._answer(grant)
        if len(self._grants) >= MAX_GRANTS:
            raise HttpProblem(
                409, RENDERING_GRANTS_FULL, f"at most {MAX_GRANTS} execution bindings are live"
            )
        grant = Grant("grant-" + secrets.token_hex(16), execution, identity)
        self._grants[grant.grant_id] = grant
        return self._answer(grant)

    @staticmethod
    def _answer(grant: Grant) -> dict[str, Any]:
        return {"ok": True, "grantId": grant.grant_id, "sourceIdentity": dict(grant.identity)}

    def revoke(self, grant_id: str) -> bool:
        """``DELETE /rendering-write-grants/:id`` (idempotent): whether it was live."""
        return self._grants.pop(grant_id, None) is not None

    def resolve(self, grant_id: object, source_identity: object) -> dict[str, Any] | None:
        """``resolve({grantId, sourceIdentity})``: ``{valid, write, scope}`` or ``None``."""
        grant = self._grants.get(grant_id) if isinstance(grant_id, str) else None
        if grant is None or self._closed:
            return None
        try:
            identity = check_identity(source_identity)
        except HttpProblem:
            return None
        if identity != grant.identity:
            return None
        return {"valid": True, "write": True, "scope": identity["scope"]}

    def is_current(self, grant_id: str) -> bool:
        """Synchronous: whether the binding is still live (checked right before a commit)."""
        return not self._closed and grant_id in self._grants

    def close(self) -> None:
        """Unload: every binding is cleared."""
        self._closed = True
        self._grants.clear()


#: The rendering authority (resolve at call time).
TAVERN_RENDERING_AUTHORITY: ServiceKey[RenderingAuthority] = ServiceKey(
    "tavernRenderingAuthority", RenderingAuthority
)
