"""Which tool calls RP mode blocks (`docs/prompt-assembly.md#rp-mode`, "Tool guard").

Pure: a call's name, arguments and the tool's declared risk in, a reason (or ``None``) out.

- every tool whose declared risk is above ``read-only`` (the host's risk levels: an approval
  could otherwise run it above the pinned mode);
- by name: ``write``, ``edit``, ``str_replace_editor``, ``bash``, ``pwsh``, ``run_code``,
  ``web_fetch`` and ``grep``; any call whose arguments carry ``sandbox_permissions``;
- ``read`` / ``read_image`` / ``glob`` whose path leaves the workspace (absolute, a drive or UNC
  path, or a ``..`` segment: tools resolve relative paths against the session's workspace),
  and ``read`` / ``read_image`` of a secret file (``.env*``, ``.credentials.y(a)ml``,
  ``credentials.json``, ``secrets.json``, ``.netrc``, ``id_rsa``/``id_dsa``/``id_ecdsa``/
  ``id_ed25519``, ``*.pem``, ``*.key``, ``*.p12``, ``*.pfx``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any, Final

from innkeeper_hostapi.tools import ToolRisk

__all__ = ["BLOCKED_TOOL_NAMES", "RP_BLOCK_CANCEL_REASON", "blocked_reason"]

BLOCKED_TOOL_NAMES: Final = frozenset(
    {"write", "edit", "str_replace_editor", "bash", "pwsh", "run_code", "web_fetch", "grep"}
)
READ_TOOLS: Final = frozenset({"read", "read_image"})
GLOB_TOOL: Final = "glob"
#: The turn's cancel reason (`turn/end.reason.message`), as the original sends it.
RP_BLOCK_CANCEL_REASON: Final = "rp-high-risk-block"
_PATH_KEYS: Final = ("path", "file_path", "filePath", "paths", "pattern", "cwd", "directory")
_SECRET_NAMES: Final = frozenset(
    {
        ".credentials.yml",
        ".credentials.yaml",
        "credentials.json",
        "secrets.json",
        ".netrc",
        "id_rsa",
        "id_dsa",
        "id_ecdsa",
        "id_ed25519",
    }
)
_SECRET_SUFFIXES: Final = (".pem", ".key", ".p12", ".pfx")
_DRIVE: Final = re.compile(r"^[A-Za-z]:[\\/]")


def _paths(arguments: Mapping[str, Any]) -> Iterator[str]:
    for key in _PATH_KEYS:
        value = arguments.get(key)
        if isinstance(value, str):
            yield value
        elif isinstance(value, list):
            yield from (item for item in value if isinstance(item, str))


def _outside(path: str) -> bool:
    if path.startswith(("/", "\\", "~")) or _DRIVE.match(path):
        return True
    return any(segment == ".." for segment in re.split(r"[\\/]+", path))


def _secret(path: str) -> bool:
    name = re.split(r"[\\/]+", path)[-1].lower()
    return name.startswith(".env") or name in _SECRET_NAMES or name.endswith(_SECRET_SUFFIXES)


def blocked_reason(name: str, arguments: Mapping[str, Any], risk: ToolRisk | None) -> str | None:
    """Why RP mode blocks this call, or ``None`` when it may run (a short, body-free text)."""
    if name in BLOCKED_TOOL_NAMES:
        return f"RP mode locks the high-risk tool {name}"
    if "sandbox_permissions" in arguments:
        return "RP mode refuses calls that ask for sandbox permissions"
    if risk is not None and risk != "read-only":
        return f"RP mode locks tools above read-only ({name} is {risk})"
    if name in READ_TOOLS or name == GLOB_TOOL:
        for path in _paths(arguments):
            if _outside(path):
                return f"RP mode keeps {name} inside the workspace"
            if name in READ_TOOLS and _secret(path):
                return f"RP mode refuses to read secret files with {name}"
    return None
