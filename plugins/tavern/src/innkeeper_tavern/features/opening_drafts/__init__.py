"""Card openings: sessionless opening drafts with each greeting's opening variables
(:mod:`.drafts`, :mod:`.records`, :mod:`.cards`, :mod:`.snapshots`, :mod:`.prompt`). The routes
and :func:`~innkeeper_tavern.face.routes.opening_drafts_install.install_openings` are in the
face tier."""

from .drafts import Drafts

__all__ = ["Drafts"]
