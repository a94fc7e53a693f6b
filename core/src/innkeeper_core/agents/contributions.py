"""Ordered plugin contributions to every turn: system-prompt sections and request hooks."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Generic, TypeVar

from innkeeper_hostapi import PluginContext, Registration, RegistrationConflict
from innkeeper_hostapi.agents import (
    CallConfigDraft,
    RequestHook,
    SectionRender,
    TurnContext,
)

F = TypeVar("F")


@dataclass(frozen=True, slots=True, eq=False)
class Contribution(Generic[F]):
    """One registered section or hook; removed by identity."""

    name: str
    order: int
    seq: int
    owner: str
    func: F


class OrderedContributions(Generic[F]):
    """Copy-on-write list of named contributions sorted by (order, registration order)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: tuple[Contribution[F], ...] = ()
        self._seq = 0

    def add(self, ctx: PluginContext, name: str, order: int, func: F) -> Registration:
        for item in self._items:
            if item.name == name:
                raise RegistrationConflict(self.kind, name, item.owner, ctx.plugin_id)
        self._seq += 1
        entry = Contribution(name, order, self._seq, ctx.plugin_id, func)
        self._items = tuple(sorted((*self._items, entry), key=lambda c: (c.order, c.seq)))

        def remove() -> None:
            self._items = tuple(c for c in self._items if c is not entry)

        return ctx.on_dispose(remove)

    @property
    def items(self) -> tuple[Contribution[F], ...]:
        return self._items

    def snapshot(self) -> frozenset[tuple[str, str, int]]:
        return frozenset((c.name, c.owner, c.order) for c in self._items)

    def owned_by(self, owner: str) -> list[str]:
        return [c.name for c in self._items if c.owner == owner]


class SystemPromptSections(OrderedContributions[SectionRender]):
    """Implements :class:`innkeeper_hostapi.agents.SystemPromptService`."""

    def __init__(self) -> None:
        super().__init__("system prompt section")

    def section(
        self, ctx: PluginContext, name: str, order: int, render: SectionRender
    ) -> Registration:
        return self.add(ctx, name, order, render)

    async def render(self, turn: TurnContext) -> list[tuple[str, str]]:
        """Render every section in order; empty ones are left out. Returns (name, text)."""
        out: list[tuple[str, str]] = []
        for item in self.items:
            result = item.func(turn)
            text = await result if inspect.isawaitable(result) else result
            if text:
                out.append((item.name, text))
        return out


class RequestHookChain(OrderedContributions[RequestHook]):
    """Implements :class:`innkeeper_hostapi.agents.RequestHooks`."""

    def __init__(self) -> None:
        super().__init__("request hook")

    def adjust(self, ctx: PluginContext, name: str, order: int, hook: RequestHook) -> Registration:
        return self.add(ctx, name, order, hook)

    async def apply(self, turn: TurnContext, draft: CallConfigDraft) -> None:
        for item in self.items:
            result = item.func(turn, draft)
            if inspect.isawaitable(result):
                await result
