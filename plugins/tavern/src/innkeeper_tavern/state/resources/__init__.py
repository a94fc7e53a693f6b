"""Tavern resource libraries: atomic, bounded stores under the plugin's data directory.

:class:`~.service.TavernResources` owns every store (presets, characters and covers, users,
standalone world books, world-book relations, character library state). This layer does file I/O
but never talks to the host: the HTTP layer and the CLI use it.
"""

from .errors import ResourceError
from .service import CharacterImport, TavernResources

__all__ = ["CharacterImport", "ResourceError", "TavernResources"]
