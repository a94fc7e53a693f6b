"""``ui-settings.json``: the bundled client's language, scale and character-follow RP.

`docs/resources.md#original-data`: ``{locale: zh-CN|en, scale 0.75–1.5 step 0.05,
rpFollowCharacter}``, at most 1 KiB. The default locale here is ``en`` (the original shipped
``zh-CN`` for its audience; this host's docs and defaults are English, and a client that sees
``custom: false`` may follow the browser's language instead). ``rpFollowCharacter`` defaults to
true (`docs/prompt-assembly.md#rp-mode`, "Follow character").
"""

from __future__ import annotations

from typing import Any, Final

from .rules import check_keys, check_scale, require_object
from .store import SettingsInvalid

__all__ = [
    "DEFAULT_UI_LOCALE",
    "UI_LOCALES",
    "UI_SETTINGS_FILE",
    "UI_SETTINGS_INVALID",
    "UI_SETTINGS_MAX_BYTES",
    "default_ui_settings",
    "validate_ui_settings",
]

UI_SETTINGS_FILE: Final = "ui-settings.json"
#: The file is at most 1 KiB (same page).
UI_SETTINGS_MAX_BYTES: Final = 1024
UI_SETTINGS_INVALID: Final = "UI_SETTINGS_INVALID"
UI_LOCALES: Final = ("zh-CN", "en")
DEFAULT_UI_LOCALE: Final = "en"
UI_SCHEMA_VERSION: Final = 1


def default_ui_settings() -> dict[str, Any]:
    """The document served until one is saved."""
    return {
        "schemaVersion": UI_SCHEMA_VERSION,
        "locale": DEFAULT_UI_LOCALE,
        "scale": 1.0,
        "rpFollowCharacter": True,
    }


def validate_ui_settings(value: Any) -> dict[str, Any]:
    """A PUT body (or the saved file) as the normalized document.

    ``locale`` and ``scale`` are required, ``rpFollowCharacter`` defaults to true when omitted,
    ``schemaVersion`` may be echoed back as 1; anything else is refused.
    """
    code = UI_SETTINGS_INVALID
    body = require_object(value, code, "ui-settings")
    check_keys(
        body,
        code,
        "ui-settings",
        required=("locale", "scale"),
        optional=("rpFollowCharacter", "schemaVersion"),
    )
    if "schemaVersion" in body and body["schemaVersion"] != UI_SCHEMA_VERSION:
        raise SettingsInvalid(code, f"schemaVersion must be {UI_SCHEMA_VERSION}")
    locale = body["locale"]
    if locale not in UI_LOCALES:
        raise SettingsInvalid(code, f"locale must be one of {', '.join(UI_LOCALES)}")
    follow = body.get("rpFollowCharacter", True)
    if not isinstance(follow, bool):
        raise SettingsInvalid(code, "rpFollowCharacter must be a boolean")
    return {
        "schemaVersion": UI_SCHEMA_VERSION,
        "locale": locale,
        "scale": check_scale(body["scale"], code, "scale"),
        "rpFollowCharacter": follow,
    }
