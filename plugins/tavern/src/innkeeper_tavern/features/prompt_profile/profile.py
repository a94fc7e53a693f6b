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
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Final

import msgspec

from innkeeper_hostapi import PluginContext, Registration
from innkeeper_hostapi.agents import SESSIONS, TurnContext
from innkeeper_hostapi.providers import PARAMETER_FIELDS
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
    PromptRole,
    RenderRequest,
    UserFields,
    render_profile,
)
from innkeeper_tavern.features.prompt_sources.state import strategy_applied
from innkeeper_tavern.pure.formats.macros import MacroEnv, expand_macros
from innkeeper_tavern.pure.formats.preset import Preset
from innkeeper_tavern.pure.worldbook import (
    ActivationMessage,
    ActivationSettings,
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
from .history import ChatHistory, read_history
from .limits import DEFAULT_MAX_PROFILE_BYTES, SNAPSHOT_CACHE_SIZE
from .mvu_macro import (
    MvuDependencyUnavailable,
    expand_mvu_markers,
    resolve_prompt_state,
    world_book_consumer,
)
from .rp_policy import RpPolicyStore
from .sessionless import current_sessionless
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
#: ``{{char}}`` / ``{{user}}`` without a bound card / user (the original loader's defaults,
#: `reference/original-implementation.md` §5.1).
DEFAULT_CHARACTER_NAME: Final = "Assistant"
DEFAULT_USER_NAME: Final = "User"
ADAPTER_MISSING: Final = "TAVERN_LOADER_ADAPTER_MISSING"
#: Tavern-only ``systemPromptMode: replace`` cannot be honoured by the host's section model.
SYSTEM_PROMPT_MODE_UNSUPPORTED: Final = "TAVERN_SYSTEM_PROMPT_MODE_UNSUPPORTED"
#: The four preset sampling fields a request may carry
#: (`docs/contract/loader.md#parameter-admission`), spec name → preset sampling attribute. Preset
#: sampler → call-config parameter (spec name → ``Sampling`` attribute): every Chat Completion
#: sampler the host can send (issue 10, item 4).
CALL_CONFIG_FIELDS: Final[dict[str, str]] = {k: v for k, v in PARAMETER_FIELDS.items()}
#: SillyTavern's own ``reasoning_effort`` choices mapped as SillyTavern sends them: ``auto`` is
#: not sent (the server decides), ``min``/``max`` become the API's ends. Any other stored value
#: is a provider id and is proposed as authored; the request hook then admits it only if the
#: provider profile takes it (`docs/contract/loader.md#parameter-admission`: no alternative effort
#: name is guessed).
REASONING_EFFORT_SENT: Final[dict[str, str | None]] = {
    "auto": None,
    "min": "minimal",
    "max": "high",
}
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


def propose_call_config(preset: Preset | None) -> dict[str, Any]:
    """The preset's supported sampling overrides (only fields the preset sets)."""
    if preset is None:
        return {}
    out: dict[str, Any] = {}
    for name, attr in CALL_CONFIG_FIELDS.items():
        value = sent_value(name, getattr(preset.sampling, attr))
        if value is not None:
            out[name] = value
    return out


def sent_value(name: str, value: Any) -> Any:
    """A preset sampler as the OpenAI-compatible request carries it, or ``None`` (not sent):
    ``stop`` as a non-empty list, ``reasoningEffort`` mapped (:data:`REASONING_EFFORT_SENT`),
    ``topK`` and ``seed`` as integers (a negative seed is SillyTavern's "random": not sent)."""
    if value is None:
        return None
    if name == "stop":
        return list(value) if value else None
    if name == "reasoningEffort":
        return REASONING_EFFORT_SENT.get(str(value), str(value))
    if name == "topK":
        return int(value) if value > 0 else None
    if name == "seed":
        return int(value) if value >= 0 else None
    return value


#: Id of the greeting in the activation input (it is no durable message).
GREETING_MESSAGE_ID: Final = "greeting"


def _with_greeting(activation: ActivationInput, greeting: str) -> ActivationInput:
    """The activation input with the selected greeting as the chat's first message, as
    SillyTavern scans it (the default RP strategy sends it as the first assistant message of
    every request). The timed-effects clock is unchanged."""
    if not greeting.strip():
        return activation
    first = ActivationMessage(id=GREETING_MESSAGE_ID, role="assistant", text=greeting)
    messages = (first, *activation.messages)
    metadata = {**activation.metadata, "greetingScanned": True}
    return replace(
        activation,
        messages=messages,
        text="\n".join(m.text for m in messages),
        metadata=metadata,
    )


def _greeting(character: ResolvedCharacter, index: int | None) -> str:
    data = character.card.data
    if not index or index <= 0:
        return data.first_message
    greetings = data.alternate_greetings
    if not greetings:
        return data.first_message
    # A stored index past the card's greetings reads as the last one (selection routes).
    return greetings[min(index, len(greetings)) - 1]


def _role(value: Any) -> PromptRole:
    if value == "user" or value == 1:
        return "user"
    if value == "assistant" or value == 2:
        return "assistant"
    return "system"


def character_fields(character: ResolvedCharacter, selection: Selection) -> CharacterFields:
    """The renderer's view of a card (switches applied: off means truly suppressed)."""
    data = character.card.data
    options = selection.character
    depth = data.extensions.get("depth_prompt")
    depth_prompt, depth_value = "", 4
    depth_role: PromptRole = "system"
    if isinstance(depth, dict):
        prompt = depth.get("prompt")
        depth_prompt = prompt if isinstance(prompt, str) else ""
        raw_depth = depth.get("depth")
        if (
            isinstance(raw_depth, int | float)
            and not isinstance(raw_depth, bool)
            and raw_depth >= 0
        ):
            depth_value = int(raw_depth)
        depth_role = _role(depth.get("role"))
    return CharacterFields(
        id=character.id,
        name=data.nickname or data.name or character.name,
        description=data.description,
        personality=data.personality,
        scenario=data.scenario,
        message_example=data.message_example,
        system_prompt=data.system_prompt,
        post_history_instructions=data.post_history_instructions,
        greeting=_greeting(character, options.greeting_index),
        depth_prompt=depth_prompt,
        depth_prompt_depth=depth_value,
        depth_prompt_role=depth_role,
    )


async def _given(variables: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    return variables


def _seed(session_id: str | None, clock: int) -> int:
    digest = hashlib.blake2b(f"{session_id or ''}|{clock}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big")


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
        the request hook and the timed-effect state is persisted; without, a preview."""
        started = time.perf_counter()
        timings: dict[str, float] = {}
        preview = turn is None
        sessions = self.ctx.get_optional(SESSIONS)
        # An opening draft's preview: its selection and variables, no session (sessionless.py).
        scope = current_sessionless() if session_id is None and preview else None
        if scope is not None:
            session_selection = scope.selection
            applied = scope.strategy_applied
        else:
            session_selection = await self._selection(session_id, sessions)
            applied = strategy_applied(self.ctx, session_id)
        diagnostics: list[Diagnostic] = self._deleted_bindings(session_id)

        preset: Preset | None = None
        preset_meta: dict[str, Any] | None = None
        if session_selection.preset_id is not None:
            found = await self.presets.get(session_selection.preset_id)
            if found is None:
                diagnostics.append(
                    Diagnostic(
                        PRESET_NOT_FOUND,
                        "the selected preset does not exist",
                        details={"id": session_selection.preset_id},
                    )
                )
            else:
                record, _ = found
                preset = record.body
                preset_meta = {"id": record.id, "name": preset.name, "updatedAt": record.updated_at}
                if preset.system_prompt_mode == "replace":
                    diagnostics.append(
                        Diagnostic(
                            SYSTEM_PROMPT_MODE_UNSUPPORTED,
                            "the preset asks to replace the whole system prompt; this host has no "
                            "seam to drop other plugins' sections, so they are still sent",
                            "info",
                        )
                    )
        mark = time.perf_counter()
        timings["resolve"] = (mark - started) * 1000
        history = await self._history(session_id, turn, sessions)
        timings["history"] = (time.perf_counter() - mark) * 1000
        mark = time.perf_counter()

        base_request = AdapterRequest(
            selection=session_selection, session_id=session_id, activation=history.activation
        )
        character = None
        character_adapter = self.ctx.slot(CHARACTER_ADAPTER)
        if character_adapter is None:
            diagnostics.append(Diagnostic(ADAPTER_MISSING, "no character adapter is registered"))
        else:
            resolution = await character_adapter.resolve(base_request)
            character = resolution.character
            diagnostics.extend(resolution.diagnostics)
        user: UserFields | None = None
        user_updated: str | None = None
        user_adapter = self.ctx.slot(USER_ADAPTER)
        if user_adapter is None:
            diagnostics.append(Diagnostic(ADAPTER_MISSING, "no user adapter is registered"))
        else:
            user_resolution = await user_adapter.resolve(base_request)
            user, user_updated = user_resolution.user, user_resolution.updated_at
            diagnostics.extend(user_resolution.diagnostics)

        fields = character_fields(character, session_selection) if character else None
        options = session_selection.character
        prefer_system = options.prefer_character_system_prompt is not False
        prefer_phi = options.prefer_character_post_history is not False
        user_name = user.name if user is not None else DEFAULT_USER_NAME
        env = MacroEnv(
            char=fields.name if fields else DEFAULT_CHARACTER_NAME,
            user=user_name,
            # A description placed in the chat or nowhere is not repeated by {{persona}}.
            persona=user.description if user and user.description_position == "inPrompt" else "",
            description=fields.description if fields else "",
            personality=fields.personality if fields else "",
            scenario=fields.scenario if fields else "",
            mes_examples=fields.message_example if fields else "",
            char_prompt=fields.system_prompt if fields and prefer_system else "",
            char_instruction=fields.post_history_instructions if fields and prefer_phi else "",
            char_version=character.card.data.character_version if character else "",
            char_depth_prompt=fields.depth_prompt if fields else "",
            creator_notes=character.card.data.creator_notes if character else "",
            input=history.last_user,
            last_message=history.last_message,
            last_message_id=history.message_count - 1 if history.message_count else None,
            last_user_message=history.last_user,
            last_char_message=history.last_char,
            chat_id=session_id or "",
            now=self.now(),
        )
        clock = history.activation.chat_length
        seed = _seed(session_id, clock)
        timed_before = await self._timed_input(session_id, clock, sessions)
        world_books = compose_world_books(
            session_selection.world_book_ids,
            self._relation("user", session_selection.user_id),
            self._relation("preset", session_selection.preset_id if preset else None),
            self._relation("character", character.id if character else None),
        )
        settings = ActivationSettings()
        if preset is not None and preset.sampling.max_context:
            room = preset.sampling.max_context - (preset.sampling.max_tokens or 0)
            settings = ActivationSettings(max_context_tokens=max(1, room))
        lore: tuple[LoreEntry, ...] = ()
        mvu_leases: list[Callable[[], bool]] = []
        wb_resources: tuple[Any, ...] = ()
        wb_books: tuple[Any, ...] = ()
        wb_activation: dict[str, Any] = {}
        timed_after: TimedEffectsState | None = None
        world_book_adapter = self.ctx.slot(WORLD_BOOK_ADAPTER)
        if world_book_adapter is None:
            diagnostics.append(Diagnostic(ADAPTER_MISSING, "no world-book adapter is registered"))
        else:
            activation = history.activation
            if fields is not None and applied:
                activation = _with_greeting(activation, expand_macros(fields.greeting, env))
            wb_request = WorldBookRequest(
                selection=session_selection,
                session_id=session_id,
                activation=activation,
                context={
                    "macro_env": env,
                    "char_name": fields.name if fields else "",
                    "user_name": user_name,
                    "character_fields": fields,
                    "seed": seed,
                    "timed_state": timed_before,
                    "dry_run": preview,
                    "activation_settings": settings,
                    "host_limits": HostLimits(max_profile_bytes=self.max_profile_bytes),
                    "scan_limits": self.scan_limits,
                },
                character=character,
                user=user,
                world_books=world_books,
            )
            wb = await world_book_adapter.resolve(wb_request)
            lore, wb_resources, wb_books = wb.lore_entries, wb.resources, wb.books
            lore = await expand_mvu_markers(
                lore,
                lambda book_id: (
                    self._read_mvu(session_id, turn, book_id, mvu_leases)
                    if scope is None
                    else _given(scope.variables)
                ),
            )
            wb_activation = dict(wb.activation)
            timed_after = wb.timed_state
            diagnostics.extend(wb.diagnostics)
        timings["worldBook"] = (time.perf_counter() - mark) * 1000
        mark = time.perf_counter()

        # Recheck every lease after the last await (docs/contract/mvu.md#prompt-read-leases).
        for check_current in mvu_leases:
            if not check_current():
                raise MvuDependencyUnavailable("the MVU state changed while assembling")
        # The default RP strategy sends the greeting as the first assistant message of every
        # request; the compatibility renderer only until the first reply (its documented rule).
        include_greeting = not history.has_assistant or (fields is not None and applied)
        note = note_of(session_selection)
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
            lore=lore,
            include_greeting=include_greeting,
            prefer_system_prompt=prefer_system,
            prefer_post_history=prefer_phi,
            macro_env=env,
            seed=seed,
            authors_note=authors_note,
        )
        render_request = RenderRequest(
            preset=preset,
            character=fields,
            user=user,
            lore=lore,
            prefer_system_prompt=prefer_system,
            prefer_post_history=prefer_phi,
            include_greeting=include_greeting,
            env=env,
            seed=seed,
            authors_note=authors_note,
        )
        outcome = await asyncio.to_thread(render_profile, render_request, self.max_profile_bytes)
        timings["render"] = (time.perf_counter() - mark) * 1000
        diagnostics.extend(outcome.diagnostics)
        rendered = outcome.rendered
        system_text = rendered.text if rendered is not None else ""
        parts = rendered.parts if rendered is not None else ()

        effective = msgspec.structs.replace(
            session_selection, world_book_ids=world_books.effective_ids
        )
        summaries: dict[str, Any] = {
            "preset": preset_meta,
            "characterCard": (
                {"id": character.id, "name": character.name, "updatedAt": character.updated_at}
                if character
                else None
            ),
            "user": (
                {"id": user.id, "name": user.name, "updatedAt": user_updated} if user else None
            ),
            "worldBooks": [dict(r) for r in wb_resources],
        }
        call_config = propose_call_config(preset)
        macro_context = {"user": env.user, "character": env.char, "chatId": env.chat_id}
        timings["total"] = (time.perf_counter() - started) * 1000
        compiled = CompiledProfile(
            session_id=session_id,
            turn=turn.turn if turn else None,
            step=turn.step if turn else None,
            selection=effective,
            session_selection=session_selection,
            world_books=world_books,
            assembly_input=assembly_input,
            system_text=system_text,
            parts=parts,
            macro_context=macro_context,
            resources=summaries,
            diagnostics=tuple(diagnostics),
            call_config=call_config,
            audit={},
            activation=history.activation,
            timed_before=timed_before,
            timed_after=timed_after,
            timings_ms=timings,
        )
        compiled.audit = self._audit_record(
            compiled,
            outcome,
            wb_books,
            wb_activation,
            rendered_lore=rendered.lore_ids if rendered else (),
            user_injection=dict(rendered.user_injection) if rendered else {},
            path=rendered.path if rendered else None,
        )
        if not preview and session_id is not None and turn is not None:
            self.audit.add(compiled.audit)
            key = (session_id, turn.turn, turn.step)
            self._snapshots[key] = compiled
            while len(self._snapshots) > SNAPSHOT_CACHE_SIZE:
                self._snapshots.popitem(last=False)
            if timed_after is not None:
                await self.timed.commit(session_id, clock, timed_before, timed_after, time.time())
        return compiled

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
