"""Rendering cache storage: the inert store of the bundled renderer's dependency graphs, their
sources and the opening snapshot (:mod:`.model`, :mod:`.store`). The routes are in
:mod:`innkeeper_tavern.face.routes.opening_rendering_cache`; docs/rendering-cache.md documents
them."""

from .store import RenderingCacheStore

__all__ = ["RenderingCacheStore"]
