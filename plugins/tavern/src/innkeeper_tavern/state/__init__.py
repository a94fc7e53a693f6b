"""The state tier: what the Tavern keeps on disk — resource libraries, session bindings,
session templates, settings, assembly traces and thumbnails.

Imports the pure tier only (and the host API); see docs/architecture.md "The Tavern plugin's
tiers".
"""
