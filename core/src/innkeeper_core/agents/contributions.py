"""Ordered plugin contributions: system-prompt sections and request hooks (every turn) and
session-list annotations (every ``GET /host/api/sessions`` page)."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

from innkeeper_hostapi import PluginContext, Registration, RegistrationConflict
from innkeeper_hostapi.agents import (
    CallConfigDraft,
    RequestHook,
    SectionPart,
    SectionRender,
    SessionAnnotator,
    TurnContext,
)
from innkeeper_hostapi.sessions import SystemSection

F = TypeVar("F")

#: How the system assembly joins sections into the system message (a blank line).
SECTION_JOINER: Final = "\n\n"


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
        r"""Render every section in order; empty ones are left out. Returns (name, text); a
        renderer returning :class:`SectionPart`\ s contributes each non-empty part under its own
        name, in its order."""
        out: list[tuple[str, str]] = []
        for item in self.items:
            result = item.func(turn)
            output = await result if inspect.isawaitable(result) else result
            if isinstance(output, str):
                if output:
                    out.append((item.name, output))
                continue
            parts: Sequence[object] = output or ()  # a plugin's value: checked, not trusted
            for part in parts:
                if not isinstance(part, SectionPart) or not isinstance(part.text, str):
                    raise TypeError(
                        f"system prompt section {item.name} of {item.owner} returned "
                        f"{type(part).__name__}; expected str or SectionPart items"
                    )
                if part.text:
                    out.append((part.name or item.name, part.text))
        return out


def section_spans(sections: Sequence[tuple[str, str]], joiner: str) -> tuple[SystemSection, ...]:
    """Where each rendered section sits in ``joiner.join(texts)`` (UTF-8 byte offsets)."""
    spans: list[SystemSection] = []
    offset = 0
    gap = len(joiner.encode())
    for name, text in sections:
        size = len(text.encode())
        spans.append(SystemSection(name=name, start=offset, end=offset + size))
        offset += size + gap
    return tuple(spans)


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


log = logging.getLogger("innkeeper.sessions.annotations")


class SessionAnnotationChain(OrderedContributions[SessionAnnotator]):
    """Implements :class:`innkeeper_hostapi.agents.SessionAnnotations`."""

    def __init__(self) -> None:
        super().__init__("session annotation")

    def annotate(self, ctx: PluginContext, name: str, annotator: SessionAnnotator) -> Registration:
        return self.add(ctx, name, 0, annotator)

    async def collect(self, session_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """session id → {annotator name: its object}; a failing annotator is logged and left
        out (the list never fails because of a plugin)."""
        out: dict[str, dict[str, Any]] = {sid: {} for sid in session_ids}
        for item in self.items:
            try:
                found: Mapping[str, Mapping[str, Any]] = await item.func(session_ids)
            except Exception:
                log.exception("session annotator %s of %s failed", item.name, item.owner)
                continue
            for sid, value in found.items():
                if sid in out:
                    out[sid][item.name] = dict(value)
        return out
