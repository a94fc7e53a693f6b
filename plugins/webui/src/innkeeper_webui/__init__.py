"""The bundled web client: static ES-module assets served at ``/`` plus a Markdown render route.

The client talks to the server only through the public Tavern v1/v2/v3 routes and the host's
session routes and event stream, the same contract a third-party client gets. See
``docs/webui.md``.
"""

__version__ = "0.1.0"
