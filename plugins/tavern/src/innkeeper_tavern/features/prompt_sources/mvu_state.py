"""The ``tavern.mvu/state`` request source (`docs/contract/mvu.md#request-source`): explicitly
selected, role system, lifetime request.

A strategy that names this source in one of its modules gets the session's MVU variables
(``stat_data``, ``$``-keys removed) as block YAML followed by the update instructions (the
``<UpdateVariable>``/``<JSONPatch>`` command language the MVU engine parses from the reply),
placed as system text for that request only, with resource/config/strategy version diagnostics
in the contribution's provenance (audit only, never model-visible;
docs/contract/mvu.md#request-source). Nothing is sent unless a strategy selects it. The read goes
through ``resolvePromptDependency`` (a send reads its turn's pre-turn checkpoint, a branch its own
state) and the lease is rechecked before the text is handed over; a denied or missing state raises,
which leaves the source out of the request with a diagnostic — never a raw read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from innkeeper_hostapi import PluginContext, Registration
from innkeeper_hostapi.assembly import Contribution, InSystem, PromptSourceRegistry, SourceRequest
from innkeeper_hostapi.mvu import TAVERN_MVU
from innkeeper_tavern.features.mvu_service import MvuService
from innkeeper_tavern.features.mvu_service.common import RETRIEVE_CHAIN, RETRIEVE_TRIGGER
from innkeeper_tavern.features.prompt_profile.mvu_macro import (
    MvuDependencyUnavailable,
    resolve_prompt_state,
    strip_dollar_keys,
    to_yaml,
)

__all__ = [
    "INSTRUCTIONS_VERSION",
    "TAVERN_MVU_STATE_SOURCE",
    "UPDATE_INSTRUCTIONS",
    "MvuStateSource",
    "register_mvu_state_source",
]

TAVERN_MVU_STATE_SOURCE: Final = "tavern.mvu/state"
#: The variables shown; a module may pick another top-level key with ``options.path``.
DEFAULT_PATH: Final = "stat_data"
#: Version of :data:`UPDATE_INSTRUCTIONS` (bumped whenever the text changes; reported as the
#: strategy version, ``mvu-strategy:<trigger>/<chain>@<version>``).
INSTRUCTIONS_VERSION: Final = 1
#: What the model is told after the state: the JSON Patch dialect the engine applies
#: (``replace``, ``delta``, ``insert`` with ``-`` to append, ``remove``; docs/mvu.md). ``move``
#: is left out: the built-in engine does not execute it.
UPDATE_INSTRUCTIONS: Final = """\
Variable updates: when this reply changes any of the variables above, end the reply with one
update block in exactly this form:
<UpdateVariable>
<JSONPatch>
[
  {"op": "replace", "path": "/key/sub_key", "value": "new value"},
  {"op": "delta", "path": "/key/number", "value": -5},
  {"op": "insert", "path": "/key/list/-", "value": "appended item"},
  {"op": "remove", "path": "/key/obsolete"}
]
</JSONPatch>
</UpdateVariable>
- "replace" sets the value at "path"; "delta" adds the number "value" to a number;
  "insert" adds a key to an object or an item to a list ("-" as the last segment appends);
  "remove" deletes the key or list item at "path".
- A path starts with "/" and names keys (or list indexes) of the variables above, separated
  by "/".
- Only change what the story changed; leave out the block when nothing changed.
"""


class MvuStateSource:
    """Implements the Assembler's ``PromptSource`` protocol for MVU state."""

    def __init__(self, ctx: PluginContext) -> None:
        self.ctx = ctx

    @property
    def id(self) -> str:
        """``tavern.mvu/state``."""
        return TAVERN_MVU_STATE_SOURCE

    async def render(self, request: SourceRequest) -> Sequence[Contribution]:
        leases: list[Callable[[], bool]] = []
        result = await resolve_prompt_state(
            self.ctx,
            request.session_id,
            request.turn.turn if request.turn else None,
            None,  # the Tavern's own request source: the service fixes its consumer
            leases,
        )
        if result is None:
            if not request.session_id:
                return []
            raise MvuDependencyUnavailable("the session's MVU state is denied or unavailable")
        path = str(request.options.get("path", DEFAULT_PATH))
        value = result["content"].get(path)
        if value is None:
            return []
        text = (
            f"Current variables ({path}, YAML):\n{to_yaml(strip_dollar_keys(value))}\n\n"
            f"{UPDATE_INSTRUCTIONS}"
        )
        if not all(check() for check in leases):
            raise MvuDependencyUnavailable("the MVU state changed while assembling")
        service = self.ctx.get_optional(TAVERN_MVU)
        if request.turn is not None and isinstance(service, MvuService):
            await service.note_request_injection(
                request.turn.session_id, request.turn.turn, result["id"], result["revision"], text
            )
        return [
            Contribution(
                key=f"mvu:{path}",
                text=text,
                placement=InSystem(),
                kind="tavern-mvu-state",
                provenance=(f"mvu:{path}", *version_diagnostics(result)),
            )
        ]


def version_diagnostics(result: Mapping[str, Any]) -> tuple[str, ...]:
    """The versions a ``tavern.mvu/state`` contribution was built from: the state resource and
    the revision read (the turn's checkpoint when sending), the source config revision
    (``none`` when the source has no config) and the retrieve strategy with the instructions'
    version."""
    config = result.get("configRevision")
    return (
        f"mvu-resource:{result.get('adapterId', 'tavern.mvu')}/{result['id']}@{result['revision']}",
        f"mvu-config:{'none' if config is None else config}",
        f"mvu-strategy:{RETRIEVE_TRIGGER}/{'+'.join(RETRIEVE_CHAIN)}@{INSTRUCTIONS_VERSION}",
    )


def register_mvu_state_source(ctx: PluginContext, registry: PromptSourceRegistry) -> Registration:
    """Register ``tavern.mvu/state`` for Tavern's ``ctx`` (disposed when Tavern unloads)."""
    return registry.register(ctx, MvuStateSource(ctx))
