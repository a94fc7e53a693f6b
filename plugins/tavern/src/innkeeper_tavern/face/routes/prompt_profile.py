"""Wiring of the profile loader into the host, all through ``ctx`` (unloading takes it back).

- system-prompt section ``pmp-dsh-tavern:profile`` (order 10): the rendered compatibility
  profile, contributed as the contract's real named sections — one
  ``pmp-dsh-tavern:part:<identifier>`` section per profile part, in order, at the profile's
  position (`docs/contract/loader.md#preset-only`: official sections carry only
  name and text). The host records them in ``system/message.sections``; identifiers, roles and
  provenance stay in the audit.
- system-prompt section ``rp:policy`` (order 45): ``rp-policy.json`` while the session is in RP.
- request hook ``pmp-dsh-tavern:call-config``: the preset's sampling from the assembly's
  snapshot, admitted against the provider profile first (:mod:`.admission`); ``request/error``
  listener: omit an active preset override after an explicit
  rejection; ``turn/ended``: complete the audit with the host's ``request/header`` evidence.
- routes ``GET /active``, ``GET|PUT|DELETE /rp-policy`` under ``/pmp-dsh-tavern/api/v1``.
- the three adapter slots with the store-backed defaults; the services
  ``tavern.profile_loader`` and ``tavern.assembly_audit``.

A profile that cannot be built never crashes the turn: the section is left out, the reason is
logged (codes only, no bodies), kept in the audit and, for errors such as
``TAVERN_PROFILE_TOO_LARGE``, appended to the session as a body-free ``ext`` event
``pmp-dsh-tavern:profile-diagnostic`` so a client can show it.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec
from aiohttp import web

from innkeeper_hostapi import HttpProblem, PluginContext, json_response, read_json
from innkeeper_hostapi.agents import (
    PROVIDER,
    REQUEST_ERROR,
    REQUEST_HOOKS,
    SESSIONS,
    SYSTEM_PROMPT,
    TURN_ENDED,
    CallConfigDraft,
    RequestErrorNotice,
    SectionPart,
    TurnContext,
    TurnEnded,
)
from innkeeper_hostapi.providers import PARAMETER_FIELDS
from innkeeper_hostapi.sessions import ExtensionEvent, RequestHeader, SessionError
from innkeeper_tavern.features.prompt_profile.adapters import (
    StoreCharacterAdapter,
    StoreUserAdapter,
)
from innkeeper_tavern.features.prompt_profile.admission import admit
from innkeeper_tavern.features.prompt_profile.audit import AssemblyAuditLog
from innkeeper_tavern.features.prompt_profile.keys import (
    ASSEMBLY_AUDIT,
    PROFILE_LOADER,
    RP_POLICY_ORDER,
    RP_POLICY_SECTION,
)
from innkeeper_tavern.features.prompt_profile.limits import (
    DEFAULT_MAX_PROFILE_BYTES,
    DEFAULT_SCAN_CHARS,
    DEFAULT_SCAN_MESSAGES,
    HARD_MAX_PROFILE_BYTES,
    MAX_PROFILE_BYTES_OPTION,
    MAX_SCAN_CHARS_OPTION,
    MAX_SCAN_MESSAGES_OPTION,
    RP_POLICY_MAX_BYTES,
)
from innkeeper_tavern.features.prompt_profile.profile import PROFILE_ORDER, TavernProfileLoader
from innkeeper_tavern.features.prompt_profile.rp_policy import RpPolicyStore
from innkeeper_tavern.features.prompt_profile.timed import TimedEffectsStore
from innkeeper_tavern.features.prompt_profile.world_book_adapter import StoreWorldBookAdapter
from innkeeper_tavern.features.prompt_render import PROFILE_SECTION, Diagnostic
from innkeeper_tavern.features.prompt_sources.state import strategy_applied
from innkeeper_tavern.pure.api_paths import V1_PREFIX
from innkeeper_tavern.pure.worldbook import ScanLimits
from innkeeper_tavern.state.resources import TavernResources
from innkeeper_tavern.state.session_bindings.cleared import ClearedBindings
from innkeeper_tavern.state.session_bindings.lifecycle import pending_selection, require_session
from innkeeper_tavern.state.session_bindings.store import SessionSelectionStore
from innkeeper_tavern.state.trace.capture import TurnReads

__all__ = ["install_loader"]

CALL_CONFIG_HOOK: Final = "pmp-dsh-tavern:call-config"
#: After the host's own defaults, before hooks that want the last word.
CALL_CONFIG_ORDER: Final = 10
DIAGNOSTIC_EVENT: Final = "pmp-dsh-tavern:profile-diagnostic"
#: An unexpected failure while building the profile (the turn goes on without it).
PROFILE_FAILED: Final = "TAVERN_PROFILE_FAILED"
RP_POLICY_INVALID: Final = "RP_POLICY_INVALID"
RP_POLICY_TOO_LARGE: Final = "RP_POLICY_TOO_LARGE"

_PARAM_FIELDS: Final = PARAMETER_FIELDS


def _int_option(ctx: PluginContext, name: str, default: int, hard: int) -> int:
    value = ctx.config.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive integer (at most {hard})")
    if value > hard:
        ctx.logger.warning("%s=%d is above the hard cap; using %d", name, value, hard)
        return hard
    return value


def _draft_params(draft: CallConfigDraft) -> dict[str, Any]:
    return {
        name: (list(getattr(draft, attr)) if name == "stop" else getattr(draft, attr))
        for name, attr in _PARAM_FIELDS.items()
        if getattr(draft, attr) is not None
    }


async def install_loader(
    ctx: PluginContext,
    resources: TavernResources,
    selections: SessionSelectionStore,
    *,
    cleared: ClearedBindings | None = None,
    reads: TurnReads | None = None,
) -> TavernProfileLoader:
    """Create the loader and register everything it needs (one call from the plugin setup).

    ``reads`` keeps the events its ``turn/ended`` listener reads back for the assembly recorder
    (:func:`~innkeeper_tavern.face.routes.trace.install_traces`), which reads the same turn next.
    """
    turn_reads = reads if reads is not None else TurnReads()
    max_bytes = _int_option(
        ctx, MAX_PROFILE_BYTES_OPTION, DEFAULT_MAX_PROFILE_BYTES, HARD_MAX_PROFILE_BYTES
    )
    from innkeeper_tavern.features.prompt_profile.limits import HARD_SCAN_CHARS, HARD_SCAN_MESSAGES

    scan = ScanLimits(
        max_messages=_int_option(
            ctx, MAX_SCAN_MESSAGES_OPTION, DEFAULT_SCAN_MESSAGES, HARD_SCAN_MESSAGES
        ),
        max_chars=_int_option(ctx, MAX_SCAN_CHARS_OPTION, DEFAULT_SCAN_CHARS, HARD_SCAN_CHARS),
    )
    timed = TimedEffectsStore(ctx.data_dir, logger=ctx.logger)
    await timed.open()
    policy = RpPolicyStore(ctx.data_dir, logger=ctx.logger)
    await policy.open()
    audit = AssemblyAuditLog()
    loader = TavernProfileLoader(
        ctx,
        resources,
        selections,
        timed=timed,
        audit=audit,
        max_profile_bytes=max_bytes,
        scan_limits=scan,
        cleared=cleared,
    )
    loader.rp_policy = policy
    ctx.provide(PROFILE_LOADER, lambda: loader)
    ctx.provide(ASSEMBLY_AUDIT, lambda: audit)
    # The default adapters hold the slots; their registrations are kept so a plugin that
    # brings its own adapter can revoke a default first (its own claim would fail otherwise).
    loader.store_world_books = StoreWorldBookAdapter(resources)
    loader.default_registrations = {
        "character": loader.register_character_adapter(ctx, StoreCharacterAdapter(resources)),
        "user": loader.register_user_adapter(ctx, StoreUserAdapter(resources)),
        "world-book": loader.register_world_book_adapter(ctx, loader.store_world_books),
    }
    log = ctx.logger

    async def report(turn: TurnContext, diagnostic: Diagnostic) -> None:
        """Log the code and append a body-free ``ext`` event the client can show."""
        log.warning("session %s turn %d: %s", turn.session_id, turn.turn, diagnostic.code)
        sessions = ctx.get_optional(SESSIONS)
        if sessions is None:
            return
        try:
            await sessions.append(
                turn.session_id,
                ExtensionEvent(
                    name=DIAGNOSTIC_EVENT,
                    payload={"turn": turn.turn, "step": turn.step, **diagnostic.wire()},
                ),
            )
        except SessionError as exc:
            log.warning("diagnostic event not written (%s)", exc.code)

    async def profile_section(turn: TurnContext) -> tuple[SectionPart, ...] | None:
        try:
            compiled = await loader.compile(turn.session_id, turn)
        except Exception as exc:  # never crash the turn (Honest degradation)
            failure = Diagnostic(
                PROFILE_FAILED,
                f"the Tavern profile could not be built ({type(exc).__name__}); "
                "this turn is sent without it",
                "error",
            )
            audit.add(
                {
                    "sessionId": turn.session_id,
                    "turn": turn.turn,
                    "step": turn.step,
                    "preview": False,
                    "diagnostics": [failure.wire()],
                }
            )
            await report(turn, failure)
            return None
        for diagnostic in compiled.diagnostics:
            if diagnostic.severity == "error":
                await report(turn, diagnostic)
        if strategy_applied(ctx, turn.session_id):
            # The Assembler places Tavern's sources for this session; the compile still feeds
            # the call config, the audit, timed effects and the ``tavern.profile`` source.
            return None
        # Each profile part is a real section of the system assembly, named
        # ``pmp-dsh-tavern:part:<identifier>`` (recorded in ``system/message.sections``).
        return tuple(SectionPart(part.name, part.text) for part in compiled.parts) or None

    async def rp_policy_section(turn: TurnContext) -> str | None:
        selection = await pending_selection(selections, turn.session_id, ctx.get_optional(SESSIONS))
        return policy.text or None if selection.rp.active else None

    system = ctx.get(SYSTEM_PROMPT)
    system.section(ctx, PROFILE_SECTION, PROFILE_ORDER, profile_section)
    system.section(ctx, RP_POLICY_SECTION, RP_POLICY_ORDER, rp_policy_section)

    def call_config(turn: TurnContext, draft: CallConfigDraft) -> None:
        compiled = loader.snapshot(turn.session_id, turn.turn, turn.step)
        if compiled is None:
            return
        # Preflight: only what the configured provider profile sends is merged.
        admission = admit(compiled.call_config, ctx.get_optional(PROVIDER))
        config = admission.admitted
        for name, attr in _PARAM_FIELDS.items():
            if name in config:
                value = config[name]
                setattr(draft, attr, tuple(value) if name == "stop" else value)
        parameters = compiled.audit["parameters"]
        parameters["admission"] = admission.wire()
        parameters["requested"] = {k: config[k] for k in _PARAM_FIELDS if k in config}
        parameters["draft"] = _draft_params(draft)

    ctx.get(REQUEST_HOOKS).adjust(ctx, CALL_CONFIG_HOOK, CALL_CONFIG_ORDER, call_config)

    async def on_request_error(notice: RequestErrorNotice) -> None:
        parameter = notice.parameter
        if parameter is None:
            return
        compiled = loader.latest_snapshot(notice.session_id, notice.turn)
        if compiled is None:
            return
        parameters = compiled.audit["parameters"]
        if parameter not in (parameters.get("requested") or {}):
            return  # not an admitted preset override: other plugins' parameters aren't ours
        omitted: list[str] = parameters["omitted"]
        if parameter in omitted:
            return
        if notice.retry_without(parameter):
            omitted.append(parameter)
            parameters.setdefault("fallbacks", []).append(
                {
                    "attempt": notice.attempt,
                    "parameter": parameter,
                    "kind": notice.kind,
                    "status": notice.status,
                }
            )

    ctx.on(REQUEST_ERROR, on_request_error)

    async def on_turn_ended(event: TurnEnded) -> None:
        compiled = loader.latest_snapshot(event.session_id, event.turn)
        loader.drop_turn(event.session_id, event.turn)
        sessions = ctx.get_optional(SESSIONS)
        if compiled is None or sessions is None:
            return
        try:
            # The turn's own events only (paged back to its turn/start): a long story's earlier
            # turns are never decoded here.
            events, _ = await turn_reads.read(sessions, event.session_id, event.turn)
        except SessionError:
            return
        headers = [
            e.data
            for e in events
            if isinstance(e.data, RequestHeader) and e.data.turn == event.turn
        ]
        if not headers:
            return
        parameters = compiled.audit["parameters"]
        parameters["attempts"] = [
            {
                "attempt": h.attempt,
                "provider": h.provider,
                "model": h.model,
                "requested": msgspec.to_builtins(h.requested),
                "effective": msgspec.to_builtins(h.effective),
                "omitted": list(h.omitted),
            }
            for h in headers
        ]
        parameters["effective"] = msgspec.to_builtins(headers[-1].effective)
        parameters["turnEnd"] = event.reason

    ctx.on(TURN_ENDED, on_turn_ended)

    # ---------------------------------------------------------------- routes

    async def active(request: web.Request) -> web.StreamResponse:
        session_id = request.query.get("sessionId") or None
        if session_id is not None:
            await require_session(selections, session_id, ctx.get_optional(SESSIONS))
        compiled = await loader.compile(session_id, None)
        return json_response({"ok": True, **loader.active_view(compiled)})

    def policy_body() -> dict[str, Any]:
        return {"ok": True, "policy": {"text": policy.text, "custom": policy.custom}}

    async def get_policy(request: web.Request) -> web.StreamResponse:
        return json_response(policy_body())

    async def put_policy(request: web.Request) -> web.StreamResponse:
        body = await read_json(request)
        if not isinstance(body, dict) or set(body) != {"text"} or not isinstance(body["text"], str):
            raise HttpProblem(400, RP_POLICY_INVALID, "body must be {text: string}")
        if len(body["text"].encode()) > RP_POLICY_MAX_BYTES:
            raise HttpProblem(
                413, RP_POLICY_TOO_LARGE, f"policy text is over {RP_POLICY_MAX_BYTES} bytes"
            )
        await policy.save(body["text"])
        return json_response(policy_body())

    async def delete_policy(request: web.Request) -> web.StreamResponse:
        await policy.reset()
        return json_response(policy_body())

    ctx.add_route("GET", V1_PREFIX + "/active", active, name="tavern.active")
    ctx.add_route("GET", V1_PREFIX + "/rp-policy", get_policy, name="tavern.rp-policy.get")
    ctx.add_route(
        "PUT",
        V1_PREFIX + "/rp-policy",
        put_policy,
        name="tavern.rp-policy.put",
        max_body=RP_POLICY_MAX_BYTES + 1024,
    )
    ctx.add_route("DELETE", V1_PREFIX + "/rp-policy", delete_policy, name="tavern.rp-policy.delete")
    return loader
