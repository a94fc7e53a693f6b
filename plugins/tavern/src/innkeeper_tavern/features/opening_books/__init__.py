"""Session opening world books: the ``tavernOpeningWorldBooks`` service.

- :mod:`.manifest` — the opening manifest (shared with the rendering cache's opening snapshot);
- :mod:`.model` — request shapes, ``sourceIdentity``, digests and stable codes;
- :mod:`.store` — ``opening-world-books.json`` (books and receipts, one atomic write);
- :mod:`.service` — proposals and CAS commits;
- :mod:`.views` — the loader's matcher hook, the bound listing and usage decisions.

The routes are in :mod:`innkeeper_tavern.face.routes.opening_books`; docs/worldbook.md
documents them.
"""

from .service import TAVERN_OPENING_WORLD_BOOKS, OpeningWorldBooks

__all__ = ["TAVERN_OPENING_WORLD_BOOKS", "OpeningWorldBooks"]
