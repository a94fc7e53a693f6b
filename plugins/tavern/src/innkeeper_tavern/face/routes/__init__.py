"""The Tavern plugin's v1 HTTP handlers (`spec/API.md` "v1 bundled UI contract").

:func:`~.routes.v1_routes` lists every route with its limits and media types; ``plugin.py``
registers them through ``ctx``. Handlers translate store and format errors into the spec's error
shape and never log resource bodies.
"""

from innkeeper_tavern.face.routes.v1 import V1_PREFIX, v1_routes

from .common import Route

__all__ = ["V1_PREFIX", "Route", "v1_routes"]
