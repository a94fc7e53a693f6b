"""The bundled UI's settings documents (``ui-settings.json``, ``conversation-settings.json``):
their validation and atomic store. The routes are in
:mod:`innkeeper_tavern.face.routes.settings`."""

from .store import SettingsInvalid, SettingsStore

__all__ = ["SettingsInvalid", "SettingsStore"]
