"""Directory services of the Tavern plugin: ``tavernScopeCatalog`` and ``tavernMemorySources``.

`docs/contract/catalogs.md#scope-catalog` and `docs/contract/catalogs.md#bound-resources`; the keys
and protocols other plugins use are in :mod:`innkeeper_hostapi.catalogs`.
"""
