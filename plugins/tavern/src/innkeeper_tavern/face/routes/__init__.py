"""The Tavern plugin's v1 HTTP handlers (`docs/contract/http-api.md#prefixes`).

:func:`~.v1.v1_routes` lists every route with its limits and media types; ``plugin.py``
registers them through ``ctx``. Handlers translate store and format errors into the spec's error
shape and never log resource bodies.
"""

from innkeeper_tavern.pure.api_paths import V1_PREFIX

from .common import Route
from .v1 import v1_routes

__all__ = ["V1_PREFIX", "Route", "v1_routes"]
