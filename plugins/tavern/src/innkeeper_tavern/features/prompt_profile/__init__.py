"""The Tavern profile loader and the no-strategy compatibility renderer.

`docs/contract/loader.md#ownership`: :class:`TavernProfileLoader` resolves a session's selection
into normalized models through three singleton adapter slots (character, user, world book), builds
the activation context from durable history plus the step's claimed input, renders the compatibility
profile within the profile budget and proposes the preset's call config;
:func:`innkeeper_tavern.face.routes.prompt_profile.install_loader` registers it with the host
(sections ``pmp-dsh-tavern:profile`` / ``rp:policy``, the call-config hook, the request-error
fallback, ``GET /active`` and ``/rp-policy``).

- :mod:`innkeeper_tavern.features.prompt_render` — the renderer (pure);
- :mod:`.adapters` — slots, adapter protocols, store-backed character/user adapters;
- :mod:`.world_book_adapter` — the store-backed world-book adapter;
- :mod:`.profile` — the loader;
- :mod:`.timed` — per-session timed-effect state; :mod:`.audit` — assembly audit records;
- :mod:`.rp_policy` — ``rp-policy.json``; :mod:`.keys` — its service keys.
"""

from innkeeper_tavern.features.prompt_render import (
    CharacterFields,
    Diagnostic,
    LoreEntry,
    ProfilePart,
    RenderRequest,
    UserFields,
    render,
    render_profile,
)

from .adapters import (
    CHARACTER_ADAPTER,
    USER_ADAPTER,
    WORLD_BOOK_ADAPTER,
    ActivationInput,
    AdapterRequest,
    CharacterAdapter,
    CharacterResolution,
    ResolvedCharacter,
    UserAdapter,
    UserResolution,
    WorldBookAdapter,
    WorldBookRequest,
    WorldBookResolution,
    WorldBookSelection,
    compose_world_books,
)
from .audit import AssemblyAuditLog
from .keys import ASSEMBLY_AUDIT, PROFILE_LOADER
from .profile import AssemblyInput, CompiledProfile, TavernProfileLoader

__all__ = [
    "ASSEMBLY_AUDIT",
    "CHARACTER_ADAPTER",
    "PROFILE_LOADER",
    "USER_ADAPTER",
    "WORLD_BOOK_ADAPTER",
    "ActivationInput",
    "AdapterRequest",
    "AssemblyAuditLog",
    "AssemblyInput",
    "CharacterAdapter",
    "CharacterFields",
    "CharacterResolution",
    "CompiledProfile",
    "Diagnostic",
    "LoreEntry",
    "ProfilePart",
    "RenderRequest",
    "ResolvedCharacter",
    "TavernProfileLoader",
    "UserAdapter",
    "UserFields",
    "UserResolution",
    "WorldBookAdapter",
    "WorldBookRequest",
    "WorldBookResolution",
    "WorldBookSelection",
    "compose_world_books",
    "render",
    "render_profile",
]
