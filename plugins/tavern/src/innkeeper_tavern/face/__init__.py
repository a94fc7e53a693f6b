"""The face tier: how the Tavern meets the world — every HTTP route (v1 and v2) in
:mod:`.routes`, with the ``install_*`` calls that register them, and every command line in
:mod:`.cli`.

Nothing below imports it; :mod:`innkeeper_tavern.plugin` composes it.
"""
