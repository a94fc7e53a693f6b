"""Session templates and session configurations (`docs/contract/http-api.md#prefixes`:
``/session-templates*`` and ``/session-configurations/*``).

- :mod:`.model` — the template struct, strict explicit selections, the portable Tavern JSON;
- :mod:`.store` — ``SessionTemplateStore`` over ``session-templates.json``;
- :mod:`.configuration` — preview/apply of a session's or a template's selection projection with
  missing-resource diagnostics;
- :mod:`.errors` — stable codes.

The HTTP side is ``innkeeper_tavern.face.routes.session_templates.install_session_templates``.
"""

from __future__ import annotations

from innkeeper_hostapi import ServiceKey

from .configuration import SessionConfigurations, Source, parse_source
from .errors import TemplateError
from .model import Template
from .store import SessionTemplateStore

#: The template store, for other Tavern parts (resolve at call time).
SESSION_TEMPLATES: ServiceKey[SessionTemplateStore] = ServiceKey(
    "tavern.session_templates", SessionTemplateStore
)
#: Preview/apply of configurations, for other Tavern parts (the play workspace's new-chat flow).
SESSION_CONFIGURATIONS: ServiceKey[SessionConfigurations] = ServiceKey(
    "tavern.session_configurations", SessionConfigurations
)

__all__ = [
    "SESSION_CONFIGURATIONS",
    "SESSION_TEMPLATES",
    "SessionConfigurations",
    "SessionTemplateStore",
    "Source",
    "Template",
    "TemplateError",
    "parse_source",
]
