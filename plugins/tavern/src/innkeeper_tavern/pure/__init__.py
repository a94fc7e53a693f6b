"""The pure tier: SillyTavern formats, the world-book engine, the MVU engine and its DSL, and
the HTTP path prefixes (:mod:`.api_paths`).

No I/O and no host import (an import-linter contract holds it); imports nothing from the
state, features or face tiers. See docs/architecture.md "The Tavern plugin's tiers".
"""
