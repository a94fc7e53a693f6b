"""Directory services of the Tavern plugin: ``tavernScopeCatalog`` and ``tavernMemorySources``.

`spec/API.md` "Optional Host scope catalog" and "Current session bound resources"; the keys and
protocols other plugins use are in :mod:`innkeeper_hostapi.catalogs`.
"""
