"""The Assembler plugin: strategies, the ``dshPromptSources`` registry, placement and preview.

The public types live in :mod:`innkeeper_hostapi.assembly` (plugins never import this package);
this package implements them:

- :mod:`.registry` — the source registry (``dshPromptSources`` / ``tavernRequestSources``);
- :mod:`.store` — stored strategies and per-session applied snapshots (atomic JSON files);
- :mod:`.placement` — pure placement: plan, budgets, projection;
- :mod:`.service` — the ``dshPromptAssembler`` service, its system section and projector;
- :mod:`.http` — routes under ``/dsh-assembler/api/v1``; :mod:`.plugin` — host wiring.
"""

from typing import Final

#: The distribution version, also ``dshPromptAssembler.version``.
VERSION: Final = "1.1.3"

__all__ = ["VERSION"]
