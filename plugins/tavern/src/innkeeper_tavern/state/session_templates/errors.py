"""Errors of session templates and configurations: a stable ``code``, an HTTP ``status``.

Codes follow the original Tavern implementation (`docs/prompt-assembly.md#template-errors`,
`docs/resources.md#original-data`), so clients written against it keep working. Messages name
ids and limits, never resource bodies.
"""

from __future__ import annotations

from typing import Any, Final

#: A body, field or value the template routes do not accept (400).
INVALID_SESSION_TEMPLATE_REQUEST: Final = "INVALID_SESSION_TEMPLATE_REQUEST"
#: No template has this id (404).
SESSION_TEMPLATE_NOT_FOUND: Final = "SESSION_TEMPLATE_NOT_FOUND"
#: The store holds its maximum number of templates (409;
#: `docs/contract/resources.md#portable-json`).
SESSION_TEMPLATE_LIMIT_REACHED: Final = "SESSION_TEMPLATE_LIMIT_REACHED"
#: The serialized store would exceed its byte limit (413; same section).
SESSION_TEMPLATE_STORAGE_LIMIT_REACHED: Final = "SESSION_TEMPLATE_STORAGE_LIMIT_REACHED"
#: ``session-templates.json`` is over 4 MiB and was not parsed (the plugin does not start).
SESSION_TEMPLATE_FILE_TOO_LARGE: Final = "SESSION_TEMPLATE_FILE_TOO_LARGE"
#: ``session-templates.json`` has a newer schema; it is left untouched (the plugin does not
#: start).
SESSION_TEMPLATE_SCHEMA_UNSUPPORTED: Final = "SESSION_TEMPLATE_SCHEMA_UNSUPPORTED"
#: The disk refused the write; nothing changed (500).
SESSION_TEMPLATE_WRITE_FAILED: Final = "SESSION_TEMPLATE_WRITE_FAILED"
#: Apply was asked for a configuration with missing or invalid resources (409, with
#: ``diagnostics``; `docs/contract/loader.md#templates`: dangling ids
#: "block create").
SESSION_CONFIGURATION_UNAVAILABLE: Final = "SESSION_CONFIGURATION_UNAVAILABLE"

# Diagnostic codes (`docs/prompt-assembly.md#template-errors`): one per dangling reference.
SESSION_CONFIGURATION_PRESET_MISSING: Final = "SESSION_CONFIGURATION_PRESET_MISSING"
SESSION_CONFIGURATION_CHARACTER_MISSING_OR_INVALID: Final = (
    "SESSION_CONFIGURATION_CHARACTER_MISSING_OR_INVALID"
)
SESSION_CONFIGURATION_USER_MISSING: Final = "SESSION_CONFIGURATION_USER_MISSING"
SESSION_CONFIGURATION_WORLD_BOOK_MISSING: Final = "SESSION_CONFIGURATION_WORLD_BOOK_MISSING"


class TemplateError(Exception):
    """A template or configuration operation was refused; nothing changed.

    ``extra`` holds additional top-level fields of the error answer (``diagnostics`` for
    ``SESSION_CONFIGURATION_UNAVAILABLE``).
    """

    def __init__(
        self, status: int, code: str, message: str, *, extra: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.extra = dict(extra or {})


__all__ = [
    "INVALID_SESSION_TEMPLATE_REQUEST",
    "SESSION_CONFIGURATION_CHARACTER_MISSING_OR_INVALID",
    "SESSION_CONFIGURATION_PRESET_MISSING",
    "SESSION_CONFIGURATION_UNAVAILABLE",
    "SESSION_CONFIGURATION_USER_MISSING",
    "SESSION_CONFIGURATION_WORLD_BOOK_MISSING",
    "SESSION_TEMPLATE_FILE_TOO_LARGE",
    "SESSION_TEMPLATE_LIMIT_REACHED",
    "SESSION_TEMPLATE_NOT_FOUND",
    "SESSION_TEMPLATE_SCHEMA_UNSUPPORTED",
    "SESSION_TEMPLATE_STORAGE_LIMIT_REACHED",
    "SESSION_TEMPLATE_WRITE_FAILED",
    "TemplateError",
]
