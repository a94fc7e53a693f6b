"""``TavernProfileLoader``: a session's selection and resources → the compatibility profile.

`docs/contract/loader.md#ownership`, `docs/contract/loader.md#adapters`,
`docs/contract/loader.md#activation-input`, `docs/contract/loader.md#compatibility-renderer`,
`docs/contract/loader.md#parameter-admission` and `docs/contract/audit.md#audit-boundary`.

:meth:`TavernProfileLoader.compile` resolves the selection (never writing it: the
``agent/created`` listener froze it), the preset, and — through the three adapter slots — the
card, the user and the activated lore; it builds the activation context from the durable history
plus this step's claimed inbox batch; it renders the no-strategy compatibility profile within the
profile budget and proposes the preset's call config. The result carries ``assembly_input`` (the
resolved, unrendered models) so an Assembler strategy can place the same resources itself.

A real turn's compile (with a :class:`~innkeeper_hostapi.agents.TurnContext`) is cached for that
request, so the request hook and the request-error listener use exactly the assembly that was
sent, and its timed-effect state is persisted. A preview (``/active``) writes nothing.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

import msgspec

from innkeeper_hostapi import PluginContext, Registration
from innkeeper_hostapi.agents import SESSIONS, TurnContext
from innkeeper_hostapi.sessions import (
    SessionController,
    SessionNotFound,
)
from innkeeper_tavern.features.prompt_render import (
    PROFILE_SECTION,
    AuthorsNoteText,
    CharacterFields,
    Diagnostic,
    LoreEntry,
    ProfileOutcome,
    ProfilePart,
    RenderRequest,
    UserFields,
    render_profile,
)
from innkeeper_tavern.features.prompt_sources.state import strategy_applied
from innkeeper_tavern.pure.formats.macros import MacroEnv, expand_macros
from innkeeper_tavern.pure.formats.preset import Preset
from innkeeper_tavern.pure.worldbook import (
    HostLimits,
    ScanLimits,
    TimedEffectsState,
)
from innkeeper_tavern.state.resources import TavernResources
from innkeeper_tavern.state.resources.errors import ResourceError
from innkeeper_tavern.state.session_bindings.cleared import ClearedBindings
from innkeeper_tavern.state.session_bindings.lifecycle import pending_selection
from innkeeper_tavern.state.session_bindings.model import (
    ResourceKind,
    Selection,
    note_applies,
    note_of,
    selection_wire,
)
from innkeeper_tavern.state.session_bindings.store import SessionSelectionStore

from .adapters import (
    CHARACTER_ADAPTER,
    USER_ADAPTER,
    WORLD_BOOK_ADAPTER,
    ActivationInput,
    AdapterRequest,
    CharacterAdapter,
    RecordCache,
    ResolvedCharacter,
    UserAdapter,
    WorldBookAdapter,
    WorldBookRequest,
    WorldBookSelection,
    compose_world_books,
)
from .audit import AssemblyAuditLog
from .compile_parts import (
    DEFAULT_USER_NAME,
    activation_settings,
    character_fields,
    group_fields,
    macro_env,
    profile_seed,
    propose_call_config,
    resource_summaries,
    with_greeting,
    with_group_greetings,
)
from .group_view import GroupView, GroupViewHook
from .history import ChatHistory, read_history
from .limits import DEFAULT_MAX_PROFILE_BYTES, SNAPSHOT_CACHE_SIZE
from .mvu_macro import (
    MvuDependencyUnavailable,
    expand_mvu_markers,
    resolve_prompt_state,
    world_book_consumer,
)
from .rp_policy import RpPolicyStore
from .sessionless import Sessionless, current_sessionless
from .timed import TimedEffectsStore
from .world_book_adapter import StoreWorldBookAdapter

__all__ = [
    "AssemblyInput",
    "CompiledProfile",
    "TavernProfileLoader",
    "character_fields",
    "propose_call_config",
]

#: Order of the profile section (`docs/contract/loader.md#ownership`).
PROFILE_ORDER: Final = 10
PRESET_NOT_FOUND: Final = "PRESET_NOT_FOUND"
#: A resource bound to the session was deleted (its id was cleared from the selection).
DELETED_CODES: Final[Mapping[ResourceKind, str]] = {
    "preset": "PRESET_DELETED",
    "character-card": "CHARACTER_CARD_DELETED",
    "user": "USER_DELETED",
    "world-book": "WORLD_BOOK_DELETED",
}
ADAPTER_MISSING: Final = "TAVERN_LOADER_ADAPTER_MISSING"
#: Tavern-only ``systemPromptMode: replace`` cannot be honoured by the host's section model.
SYSTEM_PROMPT_MODE_UNSUPPORTED: Final = "TAVERN_SYSTEM_PROMPT_MODE_UNSUPPORTED"
AUDIT_FORMAT: Final = "innkeeper-tavern-assembly-audit"


@dataclass(frozen=True, slots=True)
class AssemblyInput:
    """Resolved, unrendered models: what an Assembler strategy would place itself."""

    preset_id: str | None
    preset: Preset | None
    character: CharacterFields | None
    user: UserFields | None
    lore: tuple[LoreEntry, ...]
    include_greeting: bool
    prefer_system_prompt: bool
    prefer_post_history: bool
    macro_env: MacroEnv
    seed: int
    #: The chat's Author's Note when it goes into this request (its frequency applied).
    authors_note: AuthorsNoteText | None = None
    #: A group turn: the speaker, the members' greetings and names (docs/groups.md).
    group: GroupView | None = None


@dataclass(slots=True)
class CompiledProfile:
    """Everything one compile produced (``audit`` is JSON builtins, body-free)."""

    session_id: str | None
    turn: int | None
    step: int | None
    selection: Selection
    session_selection: Selection
    world_books: WorldBookSelection
    assembly_input: AssemblyInput
    system_text: str
    parts: tuple[ProfilePart, ...]
    macro_context: dict[str, Any]
    resources: dict[str, Any]
    diagnostics: tuple[Diagnostic, ...]
    call_config: dict[str, Any]
    audit: dict[str, Any]
    activation: ActivationInput
    timed_before: TimedEffectsState | None = None
    timed_after: TimedEffectsState | None = None
    timings_ms: dict[str, float] = field(default_factory=dict)
    #: The render of :attr:`assembly_input` within the profile budget for a ``normal`` request
    #: (what :attr:`parts` came from): the ``tavern.profile`` source reuses it for such a request
    #: instead of rendering the same input again.
    outcome: ProfileOutcome | None = None


@dataclass(frozen=True, slots=True)
class _LoreScan:
    """What the lore part of one compile is scanned with (the parts resolved before it)."""

    session_id: str | None
    turn: TurnContext | None
    scope: Sessionless | None
    selection: Selection
    history: ChatHistory
    character: ResolvedCharacter | None
    fields: CharacterFields | None
    user: UserFields | None
    env: MacroEnv
    seed: int
    timed_before: TimedEffectsState
    preset: Preset | None
    world_books: WorldBookSelection
    #: The RP strategy that sends the greeting is applied: the scan sees the greeting too.
    greeting_applied: bool
    #: A group turn: the scan opens with every member's greeting.
    group: GroupView | None = None


@dataclass(frozen=True, slots=True)
class _Lore:
    """The lore part of one compile (empty when no world-book adapter is registered)."""

    entries: tuple[LoreEntry, ...] = ()
    resources: tuple[Any, ...] = ()
    books: tuple[Any, ...] = ()
    activation: dict[str, Any] = field(default_factory=dict)
    timed_after: TimedEffectsState | None = None
    #: MVU leases the marker expansion took; each must still hold when the profile renders.
    leases: list[Callable[[], bool]] = field(default_factory=list)


def render_request(assembly: AssemblyInput, generation_type: str = "normal") -> RenderRequest:
    """The compatibility renderer's request for the resolved models and a request kind (a
    compile renders for ``normal``)."""
    return RenderRequest(
        preset=assembly.preset,
        character=assembly.character,
        user=assembly.user,
        lore=assembly.lore,
        prefer_system_prompt=assembly.prefer_system_prompt,
        prefer_post_history=assembly.prefer_post_history,
        include_greeting=assembly.include_greeting,
        env=assembly.macro_env,
        seed=assembly.seed,
        generation_type=generation_type,
        authors_note=assembly.authors_note,
    )


async def _given(variables: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    return variables


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class TavernProfileLoader:
    """Resolves a session's Tavern resources and renders the compatibility profile."""

    def __init__(
        self,
        ctx: PluginContext,
        resources: TavernResources,
        selections: SessionSelectionStore,
        *,
        timed: TimedEffectsStore,
        audit: AssemblyAuditLog,
        max_profile_bytes: int = DEFAULT_MAX_PROFILE_BYTES,
        scan_limits: ScanLimits | None = None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        cleared: ClearedBindings | None = None,
    ) -> None:
        self.ctx = ctx
        self.cleared = cleared
        self.resources = resources
        self.selections = selections
        self.timed = timed
        self.audit = audit
        self.max_profile_bytes = max_profile_bytes
        self.scan_limits = (scan_limits or ScanLimits()).clamped()
        self.now = now
        self.presets: RecordCache[Preset] = RecordCache(resources.presets)
        #: The store-backed default adapters' slot registrations, by kind (set at install).
        self.default_registrations: dict[str, Registration] = {}
        #: The default world-book adapter (set at install; hooks add session books to it).
        self.store_world_books: StoreWorldBookAdapter | None = None
        #: The RP policy whose text the ``rp:policy`` section sends while RP is on (set at install).
        self.rp_policy: RpPolicyStore | None = None
        self._snapshots: collections.OrderedDict[tuple[str, int, int], CompiledProfile] = (
            collections.OrderedDict()
        )
        #: Group play's hook (set at install): a group session's turn speaks as its speaker.
        self.group_view: GroupViewHook | None = None

    # ------------------------------------------------------------------ adapter slots

    def register_character_adapter(
        self, ctx: PluginContext, adapter: CharacterAdapter
    ) -> Registration:
        """Claim the character slot for ``ctx``'s plugin (a second claim fails)."""
        return ctx.claim_slot(CHARACTER_ADAPTER, adapter)

    def register_user_adapter(self, ctx: PluginContext, adapter: UserAdapter) -> Registration:
        """Claim the user slot for ``ctx``'s plugin (a second claim fails)."""
        return ctx.claim_slot(USER_ADAPTER, adapter)

    def register_world_book_adapter(
        self, ctx: PluginContext, adapter: WorldBookAdapter
    ) -> Registration:
        """Claim the world-book slot for ``ctx``'s plugin (a second claim fails)."""
        return ctx.claim_slot(WORLD_BOOK_ADAPTER, adapter)

    # ------------------------------------------------------------------ snapshots

    def snapshot(self, session_id: str, turn: int, step: int) -> CompiledProfile | None:
        """The compile that assembled this request's system prompt, if any."""
        return self._snapshots.get((session_id, turn, step))

    def latest_snapshot(self, session_id: str, turn: int) -> CompiledProfile | None:
        """The newest step's compile of ``turn``."""
        found = [v for (s, t, _), v in self._snapshots.items() if s == session_id and t == turn]
        return max(found, key=lambda c: c.step or 0) if found else None

    def drop_turn(self, session_id: str, turn: int) -> None:
        """Forget the turn's snapshots (turn end)."""
        for key in [k for k in self._snapshots if k[0] == session_id and k[1] == turn]:
            del self._snapshots[key]

    # ------------------------------------------------------------------ compile

    def _deleted_bindings(self, session_id: str | None) -> list[Diagnostic]:
        """A warning per resource a deletion took out of the session's current selection."""
        if not session_id or self.cleared is None:
            return []
        record = self.selections.record(session_id)
        notes = self.cleared.current(session_id, record.updated_at if record else None)
        return [
            Diagnostic(
                DELETED_CODES[n.kind],
                f"the {n.kind.replace('-', ' ')} bound to this session was deleted; the session "
                "runs without it until another is selected",
                details={"id": n.id, "name": n.name, "clearedAt": n.selection_updated_at},
            )
            for n in notes
        ]

    async def _selection(
        self, session_id: str | None, sessions: SessionController | None
    ) -> Selection:
        if not session_id:
            return self.selections.defaults()
        return await pending_selection(self.selections, session_id, sessions)

    async def _read_mvu(
        self,
        session_id: str | None,
        turn: TurnContext | None,
        book_id: str,
        leases: list[Callable[[], bool]],
    ) -> Mapping[str, Any] | None:
        """MVU variables for ``{{format_message_variable::...}}`` in activated lore of
        ``book_id`` (the read's ``tavern.world-books`` consumer)."""
        state = await resolve_prompt_state(
            self.ctx,
            session_id,
            turn.turn if turn else None,
            # The lore macro's usage and consumer: docs/contract/mvu.md#world-book-macro
            world_book_consumer(book_id),
            leases,
        )
        return None if state is None else state["content"]

    async def _history(
        self,
        session_id: str | None,
        turn: TurnContext | None,
        sessions: SessionController | None,
    ) -> ChatHistory:
        return await read_history(sessions, session_id, turn, self.scan_limits)

    async def _timed_input(
        self, session_id: str | None, clock: int, sessions: SessionController | None
    ) -> TimedEffectsState:
        """The session's own timed-effect state, or (a fork without any) its parent's."""
        if not session_id:
            return TimedEffectsState()
        if self.timed.has(session_id) or sessions is None:
            return self.timed.input_for(session_id, clock)
        try:
            parent = (await sessions.inspect(session_id)).header.parent
        except SessionNotFound:
            return TimedEffectsState()
        if parent is None:
            return TimedEffectsState()
        return self.timed.input_for(parent.session_id, clock)

    def _relation(self, kind: Any, owner: str | None) -> list[str]:
        if owner is None:
            return []
        try:
            return self.resources.world_book_ids(kind, owner)
        except ResourceError:
            return []

    async def compile(
        self, session_id: str | None, turn: TurnContext | None = None
    ) -> CompiledProfile:
        """Resolve and render. With ``turn`` it is a real request: the snapshot is cached for
        the request hook and the timed-effect state is persisted; without, a preview.

        One step per part of the profile, in this order: the selection, the preset, the
        history, the character and the user (through their adapter slots), the macro
        environment, the lore (world books through their slot), the rendered profile, and
        the record of it (resources, call config, audit)."""
        started = time.perf_counter()
        timings: dict[str, float] = {}
        preview = turn is None
        sessions = self.ctx.get_optional(SESSIONS)
        # An opening draft's preview: its selection and variables, no session (sessionless.py).
        scope = current_sessionless() if session_id is None and preview else None
        selection, applied = await self._compile_selection(session_id, sessions, scope)
        diagnostics: list[Diagnostic] = self._deleted_bindings(session_id)
        group: GroupView | None = None
        if self.group_view is not None and session_id and scope is None:
            group = await self.group_view(session_id, turn, selection)
            if group is not None:  # the speaker's card is this request's card
                selection = msgspec.structs.replace(selection, character_card_id=group.speaker_id)
        preset, preset_meta = await self._compile_preset(selection, diagnostics)
        mark = time.perf_counter()
        timings["resolve"] = (mark - started) * 1000
        history = await self._history(session_id, turn, sessions)
        timings["history"] = (time.perf_counter() - mark) * 1000
        mark = time.perf_counter()

        request = AdapterRequest(
            selection=selection, session_id=session_id, activation=history.activation
        )
        character = await self._compile_character(request, diagnostics)
        user, user_updated = await self._compile_user(request, diagnostics)
        fields = character_fields(character, selection) if character else None
        if fields is not None and group is not None:
            fields = group_fields(fields, group, user.name if user else DEFAULT_USER_NAME)
        env = macro_env(
            session_id=session_id,
            selection=selection,
            character=character,
            fields=fields,
            user=user,
            history=history,
            now=self.now(),
            group=group.member_names if group is not None else None,
        )
        clock = history.activation.chat_length
        seed = profile_seed(session_id, clock)
        timed_before = await self._timed_input(session_id, clock, sessions)
        world_books = self._compile_world_book_selection(selection, preset, character)
        lore = await self._compile_lore(
            _LoreScan(
                session_id=session_id,
                turn=turn,
                scope=scope,
                selection=selection,
                history=history,
                character=character,
                fields=fields,
                user=user,
                env=env,
                seed=seed,
                timed_before=timed_before,
                preset=preset,
                world_books=world_books,
                greeting_applied=applied,
                group=group,
            ),
            diagnostics,
        )
        timings["worldBook"] = (time.perf_counter() - mark) * 1000
        mark = time.perf_counter()

        # Recheck every lease after the last await (docs/contract/mvu.md#prompt-read-leases).
        for check_current in lore.leases:
            if not check_current():
                raise MvuDependencyUnavailable("the MVU state changed while assembling")
        assembly_input, outcome = await self._compile_render(
            selection, preset_meta, preset, fields, user, lore, history, applied, env, seed, group
        )
        timings["render"] = (time.perf_counter() - mark) * 1000
        diagnostics.extend(outcome.diagnostics)
        rendered = outcome.rendered

        timings["total"] = (time.perf_counter() - started) * 1000
        compiled = CompiledProfile(
            session_id=session_id,
            turn=turn.turn if turn else None,
            step=turn.step if turn else None,
            selection=msgspec.structs.replace(selection, world_book_ids=world_books.effective_ids),
            session_selection=selection,
            world_books=world_books,
            assembly_input=assembly_input,
            system_text=rendered.text if rendered is not None else "",
            parts=rendered.parts if rendered is not None else (),
            macro_context={"user": env.user, "character": env.char, "chatId": env.chat_id},
            resources=resource_summaries(
                preset_meta=preset_meta,
                character=character,
                user=user,
                user_updated=user_updated,
                world_books=lore.resources,
            ),
            diagnostics=tuple(diagnostics),
            call_config=propose_call_config(preset),
            audit={},
            activation=history.activation,
            timed_before=timed_before,
            timed_after=lore.timed_after,
            timings_ms=timings,
            outcome=outcome,
        )
        compiled.audit = self._audit_record(
            compiled,
            outcome,
            lore.books,
            lore.activation,
            rendered_lore=rendered.lore_ids if rendered else (),
            user_injection=dict(rendered.user_injection) if rendered else {},
            path=rendered.path if rendered else None,
        )
        if not preview and session_id is not None and turn is not None:
            await self._keep_request_compile(compiled, session_id, turn, clock, timed_before)
        return compiled

    async def _compile_selection(
        self,
        session_id: str | None,
        sessions: SessionController | None,
        scope: Sessionless | None,
    ) -> tuple[Selection, bool]:
        """The selection the profile is built from, and whether the RP strategy that sends
        the greeting on every request is applied to it."""
        if scope is not None:
            return scope.selection, scope.strategy_applied
        selection = await self._selection(session_id, sessions)
        return selection, strategy_applied(self.ctx, session_id)

    async def _compile_preset(
        self, selection: Selection, diagnostics: list[Diagnostic]
    ) -> tuple[Preset | None, dict[str, Any] | None]:
        """The selected preset and its summary (``None``, with a diagnostic, when it is gone)."""
        if selection.preset_id is None:
            return None, None
        found = await self.presets.get(selection.preset_id)
        if found is None:
            diagnostics.append(
                Diagnostic(
                    PRESET_NOT_FOUND,
                    "the selected preset does not exist",
                    details={"id": selection.preset_id},
                )
            )
            return None, None
        record, _ = found
        preset = record.body
        if preset.system_prompt_mode == "replace":
            diagnostics.append(
                Diagnostic(
                    SYSTEM_PROMPT_MODE_UNSUPPORTED,
                    "the preset asks to replace the whole system prompt; this host has no "
                    "seam to drop other plugins' sections, so they are still sent",
                    "info",
                )
            )
        return preset, {"id": record.id, "name": preset.name, "updatedAt": record.updated_at}

    async def _compile_character(
        self, request: AdapterRequest, diagnostics: list[Diagnostic]
    ) -> ResolvedCharacter | None:
        """The card, through the character adapter slot."""
        adapter = self.ctx.slot(CHARACTER_ADAPTER)
        if adapter is None:
            diagnostics.append(Diagnostic(ADAPTER_MISSING, "no character adapter is registered"))
            return None
        resolution = await adapter.resolve(request)
        diagnostics.extend(resolution.diagnostics)
        return resolution.character

    async def _compile_user(
        self, request: AdapterRequest, diagnostics: list[Diagnostic]
    ) -> tuple[UserFields | None, str | None]:
        """The user (persona) and when it was last updated, through the user adapter slot."""
        adapter = self.ctx.slot(USER_ADAPTER)
        if adapter is None:
            diagnostics.append(Diagnostic(ADAPTER_MISSING, "no user adapter is registered"))
            return None, None
        resolution = await adapter.resolve(request)
        diagnostics.extend(resolution.diagnostics)
        return resolution.user, resolution.updated_at

    async def _compile_lore(self, scan: _LoreScan, diagnostics: list[Diagnostic]) -> _Lore:
        """The activated lore, through the world-book adapter slot, with its MVU markers
        expanded (the leases taken for that are rechecked before rendering)."""
        adapter = self.ctx.slot(WORLD_BOOK_ADAPTER)
        if adapter is None:
            diagnostics.append(Diagnostic(ADAPTER_MISSING, "no world-book adapter is registered"))
            return _Lore()
        activation = scan.history.activation
        if scan.group is not None:
            activation = with_group_greetings(activation, scan.group)
        elif scan.fields is not None and scan.greeting_applied:
            activation = with_greeting(activation, expand_macros(scan.fields.greeting, scan.env))
        wb = await adapter.resolve(
            WorldBookRequest(
                selection=scan.selection,
                session_id=scan.session_id,
                activation=activation,
                context={
                    "macro_env": scan.env,
                    "char_name": scan.fields.name if scan.fields else "",
                    "user_name": scan.env.user,
                    "character_fields": scan.fields,
                    "seed": scan.seed,
                    "timed_state": scan.timed_before,
                    "dry_run": scan.turn is None,
                    "activation_settings": activation_settings(scan.preset),
                    "host_limits": HostLimits(max_profile_bytes=self.max_profile_bytes),
                    "scan_limits": self.scan_limits,
                },
                character=scan.character,
                user=scan.user,
                world_books=scan.world_books,
            )
        )
        leases: list[Callable[[], bool]] = []
        scope = scan.scope
        entries = await expand_mvu_markers(
            wb.lore_entries,
            lambda book_id: (
                self._read_mvu(scan.session_id, scan.turn, book_id, leases)
                if scope is None
                else _given(scope.variables)
            ),
        )
        diagnostics.extend(wb.diagnostics)
        return _Lore(
            entries=entries,
            resources=wb.resources,
            books=wb.books,
            activation=dict(wb.activation),
            timed_after=wb.timed_state,
            leases=leases,
        )

    def _compile_world_book_selection(
        self, selection: Selection, preset: Preset | None, character: ResolvedCharacter | None
    ) -> WorldBookSelection:
        """The world books the lore comes from: the session's own, then those the user, the
        preset and the card are linked to."""
        return compose_world_books(
            selection.world_book_ids,
            self._relation("user", selection.user_id),
            self._relation("preset", selection.preset_id if preset else None),
            self._relation("character", character.id if character else None),
        )

    async def _compile_render(
        self,
        selection: Selection,
        preset_meta: dict[str, Any] | None,
        preset: Preset | None,
        fields: CharacterFields | None,
        user: UserFields | None,
        lore: _Lore,
        history: ChatHistory,
        applied: bool,
        env: MacroEnv,
        seed: int,
        group: GroupView | None = None,
    ) -> tuple[AssemblyInput, ProfileOutcome]:
        """The resolved models (what a strategy would place itself) and the compatibility
        profile rendered from them within the profile budget (off the event loop)."""
        # The default RP strategy sends the greeting as the first assistant message of every
        # request; the compatibility renderer only until the first reply (its documented rule).
        options = selection.character
        note = note_of(selection)
        authors_note = (
            AuthorsNoteText(text=note.text, depth=note.depth, role=note.role)
            if note is not None and note_applies(note, history.user_count)
            else None
        )
        assembly_input = AssemblyInput(
            preset_id=preset_meta["id"] if preset_meta else None,
            preset=preset,
            character=fields,
            user=user,
            lore=lore.entries,
            # A group's chat starts with the members' greetings (in the scan), not the card's.
            include_greeting=group is None
            and (not history.has_assistant or (fields is not None and applied)),
            prefer_system_prompt=options.prefer_character_system_prompt is not False,
            prefer_post_history=options.prefer_character_post_history is not False,
            macro_env=env,
            seed=seed,
            authors_note=authors_note,
            group=group,
        )
        outcome = await asyncio.to_thread(
            render_profile, render_request(assembly_input), self.max_profile_bytes
        )
        return assembly_input, outcome

    async def _keep_request_compile(
        self,
        compiled: CompiledProfile,
        session_id: str,
        turn: TurnContext,
        clock: int,
        timed_before: TimedEffectsState,
    ) -> None:
        """A real request's compile: its audit is kept, it is cached for the request hook and
        the request-error listener, and its timed-effect state is persisted."""
        self.audit.add(compiled.audit)
        self._snapshots[(session_id, turn.turn, turn.step)] = compiled
        while len(self._snapshots) > SNAPSHOT_CACHE_SIZE:
            self._snapshots.popitem(last=False)
        if compiled.timed_after is not None:
            await self.timed.commit(
                session_id, clock, timed_before, compiled.timed_after, time.time()
            )

    # ------------------------------------------------------------------ audit / views

    def _audit_record(
        self,
        compiled: CompiledProfile,
        outcome: ProfileOutcome,
        books: tuple[Any, ...],
        activation: dict[str, Any],
        *,
        rendered_lore: tuple[str, ...],
        user_injection: dict[str, Any],
        path: str | None,
    ) -> dict[str, Any]:
        parts = []
        for part in compiled.parts:
            meta = part.metadata()
            meta["sha256"] = hashlib.sha256(part.text.encode()).hexdigest()
            parts.append(meta)
        text_bytes = compiled.system_text.encode()
        record: dict[str, Any] = {
            "format": AUDIT_FORMAT,
            "schemaVersion": 1,
            "recordId": uuid.uuid4().hex,
            "createdAt": _iso(self.now()),
            "sessionId": compiled.session_id,
            "turn": compiled.turn,
            "step": compiled.step,
            "preview": compiled.turn is None,
            "selection": selection_wire(compiled.selection),
            "sessionSelection": selection_wire(compiled.session_selection),
            "worldBookSelection": compiled.world_books.wire(),
            "resources": compiled.resources,
            "diagnostics": [d.wire() for d in compiled.diagnostics],
            "activationContext": dict(compiled.activation.metadata),
            "lore": {
                "activation": activation,
                "renderedLoreIds": list(rendered_lore),
                "books": [dict(b) for b in books],
            },
            "composition": {
                "section": {"name": PROFILE_SECTION, "order": PROFILE_ORDER},
                "systemPromptMode": (
                    compiled.assembly_input.preset.system_prompt_mode
                    if compiled.assembly_input.preset
                    else "append"
                ),
                "path": path,
                "parts": parts,
                "profileBytes": len(text_bytes),
                "profileSha256": hashlib.sha256(text_bytes).hexdigest() if text_bytes else None,
                "maxProfileBytes": outcome.max_bytes,
                "retainedLoreEntries": outcome.retained_lore,
                "omittedLoreEntries": outcome.omitted_lore,
                "tooLarge": outcome.too_large,
                "userInjection": user_injection,
                "includeGreeting": compiled.assembly_input.include_greeting,
            },
            "parameters": {
                "proposed": dict(compiled.call_config),
                "requested": None,
                "effective": None,
                "omitted": [],
                "attempts": [],
            },
            "timingsMs": {k: round(v, 3) for k, v in compiled.timings_ms.items()},
        }
        fingerprint_source = {
            k: v for k, v in record.items() if k not in ("recordId", "createdAt", "timingsMs")
        }
        record["fingerprint"] = hashlib.sha256(msgspec.json.encode(fingerprint_source)).hexdigest()
        return record

    def active_view(self, compiled: CompiledProfile) -> dict[str, Any]:
        """The ``GET /active`` body (no prompt text)."""
        preset = compiled.resources.get("preset")
        return {
            "sessionId": compiled.session_id,
            "selected": {"id": preset["id"], "name": preset["name"]} if preset else None,
            "selection": selection_wire(compiled.selection),
            "sessionSelection": selection_wire(compiled.session_selection),
            "worldBookSelection": compiled.world_books.wire(),
            "resources": compiled.resources,
            "callConfig": compiled.call_config,
            "macroContext": compiled.macro_context,
            "diagnostics": [d.wire() for d in compiled.diagnostics],
            "audit": compiled.audit,
        }
