"""Placement, pure: a strategy and its sources' contributions → a :class:`Plan` → the array.

`docs/contract/loader.md#ownership` (module placement, standard delivery),
`docs/contract/world-info.md#profile-budget` (two limits) and
`docs/contract/audit.md#audit-boundary` (advanced requests are recorded by the host as
``request/assembly``). No I/O, no host services.

Walk: modules in strategy order; each takes its source's items (filtered by key prefix) and
places each where the module says, or where the item asks. Then:

- **standard** backend: system items become the system text; in-chat items (``AtDepth``,
  ``ChatStart``, in-chat Author's Note) are degraded to system text after them, in the order
  SillyTavern would give them inside the chat, reported as ``ASSEMBLER_DEPTH_NATIVE``;
  ``Context`` items become durable context messages.
- **advanced** backend: in-chat items become request-only *carriers*: one message per
  (depth, order, role) group, texts joined by a newline (SillyTavern joins one depth's prompts
  of one role), placed by :func:`project`; ``Context`` items are ``user`` carriers at depth 0.

Budgets: the **profile budget** (``Strategy.max_profile_bytes``, ≤ 2 MiB) bounds the logical
UTF-8 bytes of everything placed; ranked items (lore) are dropped from the highest rank down
(``ASSEMBLER_PROFILE_LIMITED``); if unranked content alone is over, the assembly is rejected
(``ASSEMBLER_PROFILE_TOO_LARGE``). The **system snapshot ceiling** (fixed 2 MiB) bounds the
physical bytes: the serialized system message plus every serialized carrier or context message;
it is never raised by a looser profile budget and rejects the assembly
(``ASSEMBLER_SYSTEM_SNAPSHOT_TOO_LARGE``). A rejected plan delivers nothing: never half a
strategy, never a crashed turn.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from innkeeper_hostapi.assembly import (
    SYSTEM_SNAPSHOT_MAX_BYTES,
    AssemblyDiagnostic,
    AtDepth,
    AuthorsNote,
    Backend,
    ChatStart,
    Context,
    Contribution,
    HistoryBudget,
    InSystem,
    Module,
    Placement,
    PromptRole,
    RequestShape,
    Strategy,
    serialized_bytes,
)
from innkeeper_hostapi.providers import ChatMessage

from .wire import (
    REPLY_RESERVE_TOKENS,
    Carrier,
    estimate_tokens,
    project,
    shape_request,
    trim_history,
)

__all__ = [
    "ASSEMBLER_DEPTH_NATIVE",
    "ASSEMBLER_PROFILE_LIMITED",
    "ASSEMBLER_PROFILE_TOO_LARGE",
    "ASSEMBLER_SYSTEM_SNAPSHOT_TOO_LARGE",
    "REPLY_RESERVE_TOKENS",
    "SYSTEM_JOINER",
    "Carrier",
    "ModuleItems",
    "Placed",
    "Plan",
    "build_plan",
    "estimate_tokens",
    "project",
    "shape_request",
    "trim_history",
]


#: How the host joins system sections; the Assembler joins its system items the same way.
SYSTEM_JOINER: Final = "\n\n"
#: How one carrier's texts are joined.
CARRIER_JOINER: Final = "\n"
ASSEMBLER_DEPTH_NATIVE: Final = "ASSEMBLER_DEPTH_NATIVE"
ASSEMBLER_PROFILE_LIMITED: Final = "ASSEMBLER_PROFILE_LIMITED"
ASSEMBLER_PROFILE_TOO_LARGE: Final = "ASSEMBLER_PROFILE_TOO_LARGE"
ASSEMBLER_SYSTEM_SNAPSHOT_TOO_LARGE: Final = "ASSEMBLER_SYSTEM_SNAPSHOT_TOO_LARGE"
#: `docs/prompt-assembly.md#st-in-chat-order` (as the Tavern renderer applies it): inside one
#: depth and order the chat reads assistant, user, then system.
_ROLE_RANK: Final[dict[str, int]] = {"assistant": 0, "user": 1, "system": 2}
#: Context items come after every other depth-0 item.
_CONTEXT_ORDER: Final = 1 << 30
#: The id the Assembler uses for what it contributes itself (the Author's Note text).
SELF_SOURCE: Final = "assembler"

Where = Literal["system", "depth", "chat-start", "context"]


@dataclass(frozen=True, slots=True)
class Placed:
    """One contribution after placement."""

    source: str
    key: str
    kind: str
    text: str
    where: Where
    role: PromptRole = "system"
    depth: int = 0
    order: int = 0
    rank: int | None = None
    provenance: tuple[str, ...] = ()
    name: str | None = None
    chat: bool = False
    merge: bool = True

    def metadata(self) -> dict[str, Any]:
        """Body-free: where it went, its size and hash (for the audit and the preview)."""
        data = self.text.encode()
        out: dict[str, Any] = {
            "source": self.source,
            "key": self.key,
            "kind": self.kind,
            "where": self.where,
            "role": self.role,
            "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
        }
        if self.where == "depth":
            out["depth"], out["order"] = self.depth, self.order
        if self.rank is not None:
            out["rank"] = self.rank
        if self.provenance:
            out["provenance"] = list(self.provenance)
        if self.name is not None:
            out["name"] = self.name
        return out


@dataclass(frozen=True, slots=True)
class ModuleItems:
    """One module and what its source returned for this request."""

    module: Module
    items: Sequence[Contribution]


@dataclass(frozen=True, slots=True)
class Plan:
    """The placed assembly of one request."""

    strategy_id: str
    backend: Backend
    system: tuple[Placed, ...]
    carriers: tuple[Carrier, ...]
    context: tuple[Placed, ...]
    dropped: tuple[Placed, ...]
    diagnostics: tuple[AssemblyDiagnostic, ...]
    profile_bytes: int
    max_profile_bytes: int
    snapshot_bytes: int
    rejected: bool
    #: The smallest :class:`HistoryBudget` a source gave (``None``: the history is not trimmed).
    history_tokens: int | None = None
    #: The combined :class:`RequestShape` of the sources (``None``: the array is not reshaped).
    shape: RequestShape | None = None

    @property
    def system_text(self) -> str:
        """The Assembler's system section ("" when rejected or empty)."""
        if self.rejected:
            return ""
        return SYSTEM_JOINER.join(p.text for p in self.system)

    def metadata(self) -> dict[str, Any]:
        """Body-free description of the plan."""
        return {
            "strategyId": self.strategy_id,
            "backend": self.backend,
            "rejected": self.rejected,
            "profileBytes": self.profile_bytes,
            "maxProfileBytes": self.max_profile_bytes,
            "snapshotBytes": self.snapshot_bytes,
            "maxSnapshotBytes": SYSTEM_SNAPSHOT_MAX_BYTES,
            "system": [p.metadata() for p in self.system],
            "carriers": [
                {
                    "depth": c.depth,
                    "order": c.order,
                    "role": c.message.role,
                    "keys": list(c.keys),
                    "bytes": serialized_bytes(c.message),
                }
                for c in self.carriers
            ],
            "context": [p.metadata() for p in self.context],
            "dropped": [p.metadata() for p in self.dropped],
            "diagnostics": [_wire(d) for d in self.diagnostics],
            "historyTokens": self.history_tokens,
            "shape": None if self.shape is None else _shape_wire(self.shape),
        }


def _wire(diagnostic: AssemblyDiagnostic) -> dict[str, Any]:
    out: dict[str, Any] = {
        "code": diagnostic.code,
        "message": diagnostic.message,
        "severity": diagnostic.severity,
    }
    if diagnostic.details:
        out["details"] = dict(diagnostic.details)
    return out


def _shape_wire(shape: RequestShape) -> dict[str, Any]:
    """Body-free: the flags only (the speakers' names are not recorded)."""
    return {
        "squashSystem": shape.squash_system,
        "historyNames": shape.history_names,
        "continuePrefill": shape.continue_prefill,
    }


def _keep(module: Module, item: Contribution) -> bool:
    return not module.keys or any(item.key.startswith(prefix) for prefix in module.keys)


def _place(source: str, item: Contribution, placement: Placement) -> Placed:
    common: dict[str, Any] = {
        "source": source,
        "key": item.key,
        "kind": item.kind,
        "text": item.text.strip(),
        "rank": item.rank,
        "provenance": item.provenance,
    }
    if isinstance(placement, AtDepth):
        return Placed(
            **common,
            where="depth",
            role=placement.role,
            depth=placement.depth,
            order=placement.order,
            name=placement.name,
            merge=placement.merge,
        )
    if isinstance(placement, ChatStart):
        return Placed(
            **common,
            where="chat-start",
            role=placement.role,
            order=placement.order,
            name=placement.name,
            chat=placement.chat,
            merge=placement.merge,
        )
    if isinstance(placement, Context):
        return Placed(**common, where="context", role="user", order=_CONTEXT_ORDER)
    return Placed(**common, where="system")


def _in_chat_key(p: Placed) -> tuple[int, int, int, int]:
    """Chronological order inside the chat: chat start, then deeper first, lower order first,
    then assistant, user, system."""
    if p.where == "chat-start":
        return (0, p.order, 0, 0)
    return (1, -p.depth, p.order, _ROLE_RANK.get(p.role, 2))


def _history_tokens(modules: Sequence[ModuleItems]) -> int | None:
    """The smallest :class:`HistoryBudget` of the enabled modules' selected items."""
    found = [
        item.placement.tokens
        for entry in modules
        if entry.module.enabled
        for item in entry.items
        if isinstance(item.placement, HistoryBudget) and _keep(entry.module, item)
    ]
    return min(found) if found else None


def _shape(modules: Sequence[ModuleItems]) -> RequestShape | None:
    """The enabled modules' :class:`RequestShape` items combined (flags or-ed, the last item
    naming speakers wins)."""
    found = [
        item.placement
        for entry in modules
        if entry.module.enabled
        for item in entry.items
        if isinstance(item.placement, RequestShape) and _keep(entry.module, item)
    ]
    if not found:
        return None
    named = [s for s in found if s.history_names != "none"]
    last = named[-1] if named else None
    return RequestShape(
        squash_system=any(s.squash_system for s in found),
        history_names=last.history_names if last else "none",
        user_name=last.user_name if last else "",
        assistant_name=last.assistant_name if last else "",
        continue_prefill=any(s.continue_prefill for s in found),
        assistant_names=last.assistant_names if last else (),
    )


def _walk(strategy: Strategy, modules: Sequence[ModuleItems]) -> list[Placed]:
    """Place every selected item in module order; the Author's Note becomes one block."""
    placed: list[Placed] = []
    top: list[Placed] = []
    bottom: list[Placed] = []
    for entry in modules:
        module = entry.module
        if not module.enabled:
            continue
        for item in entry.items:
            if not item.text.strip() or not _keep(module, item):
                continue
            placement = module.placement or item.placement
            if isinstance(placement, HistoryBudget | RequestShape) or isinstance(
                item.placement, HistoryBudget | RequestShape
            ):
                continue
            if isinstance(placement, AuthorsNote):
                target = top if placement.edge == "top" else bottom
                target.append(_place(module.source, item, InSystem()))
                continue
            placed.append(_place(module.source, item, placement))
    setting = strategy.authors_note
    note = setting.text.strip()
    if top or bottom or note:
        members = [*top, *bottom]
        texts = [p.text for p in top] + ([note] if note else []) + [p.text for p in bottom]
        ranks = [p.rank for p in members if p.rank is not None]
        block_common: dict[str, Any] = {
            "source": SELF_SOURCE,
            "key": "authors-note",
            "kind": "authors-note",
            "text": CARRIER_JOINER.join(texts),
            "rank": None if note or len(ranks) < len(members) else max(ranks),
            "provenance": tuple(f"{p.source}:{p.key}" for p in members),
        }
        if setting.position == "in-chat":
            placed.append(
                Placed(
                    **block_common,
                    where="depth",
                    role=setting.role,
                    depth=setting.depth,
                    order=100,
                )
            )
        elif setting.position == "system-top":
            placed.insert(0, Placed(**block_common, where="system"))
        else:
            placed.append(Placed(**block_common, where="system"))
    return placed


_GroupKey = tuple[str, int, int, PromptRole, str | None, bool, bool]


def _carriers(in_chat: Sequence[Placed]) -> tuple[Carrier, ...]:
    groups: dict[_GroupKey, list[Placed]] = {}
    for p in sorted(in_chat, key=_in_chat_key):
        key = (p.where, p.depth, p.order, p.role, p.name, p.chat, p.merge)
        groups.setdefault(key, []).append(p)
    out: list[Carrier] = []
    for (where, depth, order, role, name, chat, merge), members in groups.items():
        text = CARRIER_JOINER.join(p.text for p in members)
        message = ChatMessage(role=role, content=text, name=name)
        out.append(
            Carrier(
                depth=None if where == "chat-start" else depth,
                order=order,
                message=message,
                keys=tuple(f"{p.source}:{p.key}" for p in members),
                chat=chat,
                merge=merge,
            )
        )
    return tuple(out)


def _bytes(placed: Sequence[Placed]) -> int:
    return sum(len(p.text.encode()) for p in placed)


def build_plan(
    strategy: Strategy,
    modules: Sequence[ModuleItems],
    diagnostics: Sequence[AssemblyDiagnostic] = (),
) -> Plan:
    """Place, apply the profile budget, then the system snapshot ceiling."""
    notes = list(diagnostics)
    placed = _walk(strategy, modules)
    budget = strategy.max_profile_bytes
    dropped: list[Placed] = []
    total = _bytes(placed)
    if total > budget:
        trimmable = sorted(
            (p for p in placed if p.rank is not None), key=lambda p: p.rank or 0, reverse=True
        )
        for candidate in trimmable:
            if total <= budget:
                break
            placed.remove(candidate)
            dropped.append(candidate)
            total -= len(candidate.text.encode())
        if total > budget:
            notes.append(
                AssemblyDiagnostic(
                    code=ASSEMBLER_PROFILE_TOO_LARGE,
                    message=f"the assembly is {total} bytes without any trimmable item, over the "
                    f"{budget}-byte profile budget: nothing of it is sent this turn",
                    severity="error",
                    details={"actualBytes": total, "maxBytes": budget},
                )
            )
            return _rejected(strategy, notes, total, 0)
        notes.append(
            AssemblyDiagnostic(
                code=ASSEMBLER_PROFILE_LIMITED,
                message=f"{len(dropped)} ranked items were dropped (highest rank first) to fit "
                f"the {budget}-byte profile budget",
                details={
                    "maxProfileBytes": budget,
                    "droppedItems": len(dropped),
                    "droppedKeys": [f"{p.source}:{p.key}" for p in dropped][:32],
                },
            )
        )
    system = [p for p in placed if p.where == "system"]
    in_chat = [p for p in placed if p.where in ("depth", "chat-start")]
    context = [p for p in placed if p.where == "context"]
    carriers: tuple[Carrier, ...] = ()
    if strategy.backend == "standard":
        if in_chat:
            degraded = [
                Placed(
                    source=c.source,
                    key=c.key,
                    kind=c.kind,
                    text=c.text,
                    where="system",
                    role=c.role,
                    rank=c.rank,
                    provenance=c.provenance,
                )
                for c in sorted(in_chat, key=_in_chat_key)
            ]
            system.extend(degraded)
            notes.append(
                AssemblyDiagnostic(
                    code=ASSEMBLER_DEPTH_NATIVE,
                    message=f"{len(in_chat)} in-chat items are system text under the standard "
                    "backend (the advanced backend places them at their depth and role)",
                    severity="info",
                    details={"items": len(in_chat)},
                )
            )
    else:
        carriers = _carriers([*in_chat, *(_as_depth_zero(p) for p in context)])
        context = []
    system_text = SYSTEM_JOINER.join(p.text for p in system)
    snapshot = serialized_bytes(ChatMessage(role="system", content=system_text)) if system else 0
    snapshot += sum(serialized_bytes(c.message) for c in carriers)
    snapshot += sum(serialized_bytes(ChatMessage(role="user", content=p.text)) for p in context)
    if snapshot > SYSTEM_SNAPSHOT_MAX_BYTES:
        notes.append(snapshot_too_large(snapshot))
        return _rejected(strategy, notes, total, snapshot)
    return Plan(
        strategy_id=strategy.id,
        backend=strategy.backend,
        system=tuple(system),
        carriers=carriers,
        context=tuple(context),
        dropped=tuple(dropped),
        diagnostics=tuple(notes),
        profile_bytes=total,
        max_profile_bytes=budget,
        snapshot_bytes=snapshot,
        rejected=False,
        history_tokens=_history_tokens(modules),
        shape=_shape(modules) if strategy.backend == "advanced" else None,
    )


def snapshot_too_large(
    actual: int, consequence: str = "the strategy's assembly is not sent this turn"
) -> AssemblyDiagnostic:
    """The ceiling diagnostic (also used by the projector on the complete array)."""
    return AssemblyDiagnostic(
        code=ASSEMBLER_SYSTEM_SNAPSHOT_TOO_LARGE,
        message=f"the complete system snapshot would be {actual} bytes, over the fixed "
        f"{SYSTEM_SNAPSHOT_MAX_BYTES}-byte ceiling (no profile budget raises it): {consequence}",
        severity="error",
        details={"actualBytes": actual, "maxBytes": SYSTEM_SNAPSHOT_MAX_BYTES},
    )


def _as_depth_zero(p: Placed) -> Placed:
    return Placed(
        source=p.source,
        key=p.key,
        kind=p.kind,
        text=p.text,
        where="depth",
        role="user",
        depth=0,
        order=_CONTEXT_ORDER,
        rank=p.rank,
        provenance=p.provenance,
    )


def _rejected(
    strategy: Strategy, notes: list[AssemblyDiagnostic], total: int, snapshot: int
) -> Plan:
    return Plan(
        strategy_id=strategy.id,
        backend=strategy.backend,
        system=(),
        carriers=(),
        context=(),
        dropped=(),
        diagnostics=tuple(notes),
        profile_bytes=total,
        max_profile_bytes=strategy.max_profile_bytes,
        snapshot_bytes=snapshot,
        rejected=True,
    )
