"""The ``tavernMvu`` service: MVU state per session, its files and turns (:mod:`.service`).
:func:`~innkeeper_tavern.face.routes.mvu_install.install_mvu` wires it into the plugin and
:mod:`innkeeper_tavern.face.routes.mvu` holds its HTTP primitives."""

from .service import MvuService
from .templates import character_mvu_id

__all__ = ["MvuService", "character_mvu_id"]
