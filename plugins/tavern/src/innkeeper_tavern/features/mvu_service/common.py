"""Constants, small helpers and scope parsing shared by the parts of the MVU service."""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, TypeAlias, TypeVar

import msgspec

from innkeeper_hostapi.agents import AgentService
from innkeeper_hostapi.mvu import CommandProcessor, CommandProcessorReceipt, MvuServiceError
from innkeeper_hostapi.sessions import SessionController, SessionEvent
from innkeeper_tavern.pure.mvu import MvuError, UpdateResult
from innkeeper_tavern.pure.mvu.ledger import MAX_OPERATION_ID_CHARS

#: A list of JSON records (an alias: the service has a method named ``list``).
JsonList: TypeAlias = list[dict[str, Any]]

_T = TypeVar("_T")

log = logging.getLogger("innkeeper.plugin.tavern.mvu")

#: ``type`` of every MVU resource record (docs/contract/mvu.md#host-service: ``type:'mvu-state'``).
RESOURCE_TYPE: Final = "mvu-state"
#: The only accepted authority (docs/contract/mvu.md#host-service).
LOCAL_AUTHORITY: Final = "local"
#: Provider id of the optional manager (docs/contract/mvu.md#management).
MANAGER_PROVIDER_ID: Final = "dsh-memory-manager"
#: Supported strategy chains (docs/contract/mvu.md#management).
STORE_TRIGGER: Final = "assistant_message_committed"
STORE_CHAIN: Final = ("parse_mvu_update", "validate_update", "apply_update")
RETRIEVE_TRIGGER: Final = "before_model_request"
RETRIEVE_CHAIN: Final = ("read_content", "render_state_and_update_instructions", "provide_to_model")
#: Events read per page while scanning a session for completed turns.
SCAN_PAGE: Final = 1000
#: Times a reply is re-run when its processor was replaced during the run (a revoked run saves
#: no receipt that would consume the reply: docs/contract/mvu-vm.md#recheck).
MAX_PROCESSOR_RERUNS: Final = 3
#: Captured seeds awaiting installation (each holds a frozen state and its history, so they
#: count against the 32 MiB ledger of docs/contract/mvu.md#budgets; the number is ours).
MAX_PENDING_SEEDS: Final = 64
#: Characters of a copied resource id.
MAX_RESOURCE_ID_CHARS: Final = 200
#: Session format version the coordinates in this service refer to (docs/sessions.md).
SESSION_FORMAT_VERSION: Final = 4

Clock = Callable[[], str]
SessionsLookup = Callable[[], SessionController | None]
AgentsLookup = Callable[[], AgentService | None]

_ENCODER: Final = msgspec.json.Encoder(order="sorted")


def utc_now() -> str:
    """ISO 8601 UTC with milliseconds."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def json_sha256(value: Any) -> str:
    return hashlib.sha256(_ENCODER.encode(value)).hexdigest()


def detached(value: Any) -> Any:
    """A deep, JSON-only copy (callers can never change stored content)."""
    return msgspec.json.decode(_ENCODER.encode(value))


def service_error(code: str, message: str, status: int = 400) -> MvuServiceError:
    return MvuServiceError(code, message, status)


async def off_loop(fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    """Run a ledger operation off the event loop (they encode and hash up to 32 MiB)."""
    return await asyncio.to_thread(fn, *args, **kwargs)


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_resource_id(value: object) -> bool:
    return isinstance(value, str) and 0 < len(value) <= MAX_RESOURCE_ID_CHARS


def is_variables(value: object) -> bool:
    return isinstance(value, Mapping) and isinstance(value.get("stat_data"), dict)


def is_sync_callable(value: object) -> bool:
    return callable(value) and not inspect.iscoroutinefunction(value)


def close_awaitable(value: object) -> bool:
    """True (after closing a coroutine) when a processor returned an awaitable."""
    if inspect.iscoroutine(value):
        value.close()
    return inspect.isawaitable(value)


def check_operation_id(value: object) -> None:
    if not isinstance(value, str) or not 0 < len(value) <= MAX_OPERATION_ID_CHARS:
        raise service_error("MVU_INVALID_OPERATION", "operationId must be 1-200 characters")


def ledger_error(exc: MvuError) -> MvuServiceError:
    status = {
        "MVU_REVISION_CONFLICT": 409,
        "MVU_OPERATION_CONFLICT": 409,
        "MVU_NOT_FOUND": 404,
        "MVU_LEDGER_TOO_LARGE": 507,
        "MVU_SEED_CONFLICT": 409,
    }.get(exc.code, 400)
    return MvuServiceError(exc.code, exc.message, status)


@dataclass(slots=True)
class Processor:
    target: str
    fn: CommandProcessor
    generation: int
    receipt: CommandProcessorReceipt


#: A synchronous recheck of everything a processor run relied on (docs/contract/mvu-vm.md#recheck:
#: the save "synchronously rechecks" it).
Lease = Callable[[], bool]


@dataclass(frozen=True, slots=True)
class ReplyRun:
    """One run of a reply: the engine's result, the processor registration that chose its
    commands (``None``: native) and the lease to recheck before saving it (``None``: none)."""

    result: UpdateResult
    registration_id: str | None
    lease: Lease | None


@dataclass(frozen=True, slots=True)
class Scope:
    session_id: str | None
    message_id: str | None
    end_event_id: int | None

    @property
    def historical(self) -> bool:
        return self.message_id is not None or self.end_event_id is not None


async def newest_after(
    controller: SessionController, session_id: str, after: int
) -> AsyncIterator[SessionEvent]:
    """The session's events with seq > ``after``, newest first, over one pinned snapshot
    (paged, so a caller that stops early reads only the newest pages)."""
    before: int | None = None
    through: int | None = None
    while True:
        page = await controller.page(
            session_id, before_seq=before, limit=SCAN_PAGE, through_seq=through
        )
        through = page.through_seq
        for event in page.events:
            if event.seq <= after:
                return
            yield event
        if not page.has_more or page.next_before_seq is None:
            return
        before = page.next_before_seq


async def event_after(
    controller: SessionController,
    session_id: str,
    after: int,
    kind: type[Any] | tuple[type[Any], ...],
) -> bool:
    """Whether the session has an event whose data is a ``kind`` after seq ``after``."""
    async for event in newest_after(controller, session_id, after):
        if isinstance(event.data, kind):
            return True
    return False


def parse_scope(scope: Mapping[str, Any] | None, *, require_session: bool = False) -> Scope:
    """Check ``{authority:'local', sessionId?, messageId?, endEventId?}``."""
    if scope is None:
        scope = {"authority": LOCAL_AUTHORITY}
    if not isinstance(scope, Mapping):
        raise service_error("MVU_SCOPE_INVALID", "scope must be an object")
    if scope.get("authority", LOCAL_AUTHORITY) != LOCAL_AUTHORITY:
        raise service_error("MVU_SCOPE_INVALID", "only local authority is accepted")
    unknown = set(scope) - {"authority", "sessionId", "messageId", "endEventId"}
    if unknown:
        raise service_error("MVU_SCOPE_INVALID", f"unknown scope field {sorted(unknown)[0]!r}")
    session_id = scope.get("sessionId")
    if session_id is not None and (not isinstance(session_id, str) or not session_id):
        raise service_error("MVU_SCOPE_INVALID", "sessionId must be a non-empty string")
    if require_session and session_id is None:
        raise service_error("MVU_SCOPE_INVALID", "this scope needs {authority:'local', sessionId}")
    message_id = scope.get("messageId")
    if message_id is not None and (not isinstance(message_id, str) or not message_id):
        raise service_error("MVU_SCOPE_INVALID", "messageId must be a non-empty string")
    end = scope.get("endEventId")
    if end is not None and (isinstance(end, bool) or not isinstance(end, int) or end < 1):
        raise service_error("MVU_SCOPE_INVALID", "endEventId must be a positive integer")
    if (message_id is not None or end is not None) and session_id is None:
        raise service_error("MVU_SCOPE_INVALID", "historical coordinates need a sessionId")
    return Scope(session_id, message_id, end)


@dataclass(frozen=True, slots=True)
class RequestNote:
    """What a source placed into one turn's request (body-free)."""

    state_id: str
    revision: int
    #: The placed text (memory only).
    text: str
    #: Events at or below this seq belong to earlier turns.
    since: int
