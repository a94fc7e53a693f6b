"""Selection among one loop's candidates and the timed-effect clock.

The rules: docs/worldbook.md#wi-selection and docs/worldbook.md#wi-timed-effects.

Pure functions of their inputs: rolls are derived from the request seed, timed-effect state comes
in and goes out as a value.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from innkeeper_tavern.pure.worldbook.candidates import Item, Verdict
from innkeeper_tavern.pure.worldbook.model import (
    Reason,
    TimedEffect,
    TimedEffectsState,
)
from innkeeper_tavern.pure.worldbook.request import ActivationRequest

__all__ = ["apply_groups", "pre_checks", "roll", "start_timed_effects"]


def roll(seed: int, purpose: str, key: str, loop: int) -> float:
    """A reproducible uniform draw in [0, 1) for one decision (auditable: seed + what + loop)."""
    digest = hashlib.blake2b(f"{seed}|{purpose}|{key}|{loop}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def pre_checks(
    item: Item,
    request: ActivationRequest,
    cooldown_active: set[str],
    sticky: bool,
    clock: int,
) -> Reason | None:
    """The first checks: disabled, triggers, character filter, delay, cooldown.

    docs/worldbook.md#wi-entry-checks.
    """
    entry = item.entry.entry
    if entry.disable:
        return Reason.DISABLED
    if entry.triggers and request.generation_type not in entry.triggers:
        return Reason.TRIGGER
    filt = entry.character_filter
    if filt is not None:
        character = request.character
        if filt.names:
            included = character is not None and character.name in filt.names
            if included == filt.is_exclude:
                return Reason.CHARACTER_FILTER
        if filt.tags:
            included = character is not None and any(t in filt.tags for t in character.tags)
            if included == filt.is_exclude:
                return Reason.CHARACTER_FILTER
    if entry.delay and clock < entry.delay:
        return Reason.DELAY
    if item.entry.lore_id in cooldown_active and not sticky:
        return Reason.COOLDOWN
    return None


def start_timed_effects(
    state: TimedEffectsState, by_lore_id: Callable[[str], Item | None], clock: int
) -> tuple[set[str], set[str], TimedEffectsState]:
    """docs/worldbook.md#wi-timed-effects: age the persisted effects at the start of a scan.

    Effects set when the chat was no longer than now are dropped unless protected (the chat did
    not advance: swipe, regenerate, deletion). Effects of an entry that no longer configures them
    are dropped; effects of unknown or edited entries are kept until they end. An ending sticky
    effect starts a protected cooldown when the entry has one.
    """
    sticky: dict[str, TimedEffect] = {}
    cooldown: dict[str, TimedEffect] = {}

    def current(key: str, effect: TimedEffect) -> Item | None:
        item = by_lore_id(key)
        if item is not None and item.entry.fingerprint == effect.hash:
            return item
        return None

    for key, effect in state.sticky.items():
        if clock <= effect.start and not effect.protected:
            continue
        item = current(key, effect)
        if item is not None and not item.entry.entry.sticky:
            continue
        if clock >= effect.end:
            if item is not None and item.entry.entry.cooldown:
                cooldown[key] = TimedEffect(
                    hash=effect.hash,
                    start=clock,
                    end=clock + item.entry.entry.cooldown,
                    protected=True,
                )
            continue
        sticky[key] = effect
    for key, effect in state.cooldown.items():
        if key in cooldown:
            continue
        if clock <= effect.start and not effect.protected:
            continue
        item = current(key, effect)
        if item is not None and not item.entry.entry.cooldown:
            continue
        if clock >= effect.end:
            continue
        cooldown[key] = effect
    sticky_active = {k for k, e in sticky.items() if current(k, e) is not None}
    cooldown_active = {k for k, e in cooldown.items() if current(k, e) is not None}
    return sticky_active, cooldown_active, TimedEffectsState(sticky=sticky, cooldown=cooldown)


def apply_groups(
    now: list[tuple[Item, Verdict]],
    request: ActivationRequest,
    sticky_active: set[str],
    activated_groups: set[str],
    loop: int,
) -> list[tuple[Item, Verdict]]:
    """Inclusion groups over one loop's candidates, before probability.

    docs/worldbook.md#wi-selection.
    """
    settings = request.settings
    members_of: dict[str, list[int]] = {}
    for index, (item, _) in enumerate(now):
        for name in item.entry.groups:
            members_of.setdefault(name, []).append(index)
    if not members_of:
        return now
    removed: set[int] = set()

    def lose(index: int, reason: Reason, detail: str, winner: str | None = None) -> None:
        removed.add(index)
        verdict = now[index][1]
        verdict.activated = False
        verdict.reason = reason
        verdict.detail = detail
        verdict.group_winner = winner

    for name, members in members_of.items():
        live = [m for m in members if m not in removed]
        if not live:
            continue
        sticky_members = [m for m in live if now[m][0].entry.lore_id in sticky_active]
        if sticky_members:
            winner = now[sticky_members[0]][0].entry.lore_id
            for m in live:
                if m not in sticky_members:
                    lose(m, Reason.GROUP_LOST, f"group {name!r}: a sticky member holds it", winner)
            continue
        scoring = settings.use_group_scoring or any(
            now[m][0].entry.entry.use_group_scoring for m in live
        )
        if scoring:
            best = max(now[m][1].score for m in live)
            for m in live:
                entry = now[m][0].entry.entry
                opted = (
                    entry.use_group_scoring
                    if entry.use_group_scoring is not None
                    else settings.use_group_scoring
                )
                if opted and now[m][1].score < best:
                    lose(m, Reason.GROUP_SCORE, f"group {name!r}: score {now[m][1].score} < {best}")
            live = [m for m in live if m not in removed]
        if name in activated_groups:
            for m in live:
                lose(m, Reason.GROUP_ALREADY_ACTIVATED, f"group {name!r} already has an entry")
            continue
        if len(live) <= 1:
            continue
        overriding = [m for m in live if now[m][0].entry.entry.group_override]
        if overriding:
            chosen = max(overriding, key=lambda m: (now[m][0].entry.entry.order, -m))
            detail = f"group {name!r}: override by highest order"
        else:
            weights = [max(0.0, now[m][0].entry.entry.group_weight) for m in live]
            total = sum(weights)
            drawn = roll(request.seed, "group", name, loop) * total
            chosen = live[-1]
            cumulative = 0.0
            for m, weight in zip(live, weights, strict=True):
                cumulative += weight
                if drawn <= cumulative:
                    chosen = m
                    break
            detail = f"group {name!r}: weighted roll {drawn:.2f} of {total:g}"
        winner = now[chosen][0].entry.lore_id
        for m in live:
            if m != chosen:
                lose(m, Reason.GROUP_LOST, detail, winner)
    return [pair for index, pair in enumerate(now) if index not in removed]
