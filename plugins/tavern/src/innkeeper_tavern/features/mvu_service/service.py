"""``tavernMvu``: MVU state instances, their ledger, turns, seeds and command processors.

docs/contract/mvu.md#host-service and docs/contract/mvu.md#durable-history. One :class:`MvuService`
owns ``mvu-instances.json`` (an :class:`~.store.InstancesFile` around the pure ledger of
:mod:`innkeeper_tavern.pure.mvu.ledger`). Every write runs under one asyncio lock, builds a new
document without touching the current one, encodes and size-checks it off the event loop and
publishes it atomically; only then does the in-memory document change. A refused or failed save
therefore changes nothing, in memory or on disk.

Turns: a reply is applied when its turn has ended ``completed`` — the last non-interrupted,
non-tool-call assistant message of the turn, once. Application is keyed by session id + the
assistant event's seq and recorded (with the new state) in the same atomic save, and a
per-session watermark says which events were already considered, so neither a replayed
``TURN_ENDED`` nor a host restart applies a reply twice. Inherited events of a fork (seq at or
below its ``seedLength``) are never applied in the child.

The class is composed of one part per responsibility, each in its own module:

* :mod:`.core` — state, the file and its atomic commits, facts, session/template lookups,
  access checks, the record shape;
* :mod:`.instances` — instance allocation and the ledger edits (``update``, ``copy``,
  ``setManagementMode``);
* :mod:`.turns` — turn application, checkpoints, usage and observer registrations;
* :mod:`.processors` — command processors: plugin registrations and card declarations in a VM;
* :mod:`.seeds` — forks and captured seeds;
* :mod:`.discovery` — ``discover`` and ``validateConfig``;
* :mod:`.prompt_reads` — ``resolvePromptDependency`` and ``getManagementDefaults``;
* :mod:`.request_facts` — ``triggered`` / ``dsh-request-observed`` facts of model requests;
* :mod:`.views` — ``list``, ``read``, ``history``, ``facts`` and ``/mvu/snapshot``.

Helpers and constants shared by them live in :mod:`.common`.
"""

from __future__ import annotations

from .common import LOCAL_AUTHORITY, MANAGER_PROVIDER_ID, RESOURCE_TYPE, parse_scope, utc_now
from .discovery import MvuDiscovery
from .instances import MvuInstances
from .processors import MvuProcessors
from .prompt_reads import MvuPromptReads
from .request_facts import MvuRequestFacts
from .seeds import MvuSeeds
from .templates import character_mvu_id
from .turns import MvuTurns
from .views import MvuViews


class MvuService(
    MvuViews,
    MvuPromptReads,
    MvuRequestFacts,
    MvuSeeds,
    MvuTurns,
    MvuProcessors,
    MvuDiscovery,
    MvuInstances,
):
    """The ``tavernMvu`` service (implements :class:`innkeeper_hostapi.mvu.TavernMvuService`).

    ``sessions``/``agents`` resolve the host's controllers at call time. ``clock`` is injected
    so tests are deterministic.
    """


__all__ = [
    "LOCAL_AUTHORITY",
    "MANAGER_PROVIDER_ID",
    "RESOURCE_TYPE",
    "MvuService",
    "character_mvu_id",
    "parse_scope",
    "utc_now",
]
