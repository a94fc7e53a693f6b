"""Error types shared by the host and plugins."""

from __future__ import annotations

from typing import Any


class InnkeeperError(Exception):
    """Base class of every error the host raises on purpose."""


class RegistrationConflict(InnkeeperError):
    """A singleton (service key, route, adapter slot) is already registered by another owner.

    The message names both owners so the person reading the log knows which plugin to fix.
    """

    def __init__(self, kind: str, key: str, existing_owner: str, new_owner: str) -> None:
        super().__init__(
            f"{kind} {key!r} is already registered by plugin {existing_owner!r}; "
            f"plugin {new_owner!r} cannot register it again"
        )
        self.kind = kind
        self.key = key
        self.existing_owner = existing_owner
        self.new_owner = new_owner


class PluginDisposedError(InnkeeperError):
    """A plugin context was used after its plugin unloaded (old-generation code still running)."""


class ServiceNotFound(InnkeeperError, LookupError):
    """No plugin or host component currently provides the requested service key."""


class PluginLoadError(InnkeeperError):
    """A plugin failed to import or set up; the other plugins keep running."""

    def __init__(self, plugin_id: str, reason: str) -> None:
        super().__init__(f"plugin {plugin_id!r} failed: {reason}")
        self.plugin_id = plugin_id
        self.reason = reason


class HttpProblem(InnkeeperError):
    """Raise from a route handler to answer with the spec's problem shape.

    The host turns it into ``{"ok": false, "error": message, "code": code}`` with ``status``.
    With ``details`` (a JSON object) ``error`` becomes the structured form
    ``{"code", "message", "details"}`` and ``code`` stays top-level
    (`docs/contract/http-api.md#error-shapes`: a string or a structured object).
    """

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        headers: dict[str, str] | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = dict(headers or {})
        self.details = details
