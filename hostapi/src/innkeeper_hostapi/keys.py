"""Typed keys: services, adapter slots and events are looked up by key objects, not strings."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, TypeVar, final

if TYPE_CHECKING:
    import aiohttp

    from .events import EventBus

T = TypeVar("T")


@final
class ServiceKey(Generic[T]):
    """Names a service and carries its type, like aiohttp's ``AppKey``.

    ``ctx.get(key)`` is typed as ``T``. Keys compare by identity of their name string, so a key
    re-created by a reloaded module still finds the same service.
    """

    __slots__ = ("name", "type")

    def __init__(self, name: str, type: type[T] | Any = object) -> None:
        self.name = name
        self.type = type

    def __repr__(self) -> str:
        return f"ServiceKey({self.name!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ServiceKey) and other.name == self.name

    def __hash__(self) -> int:
        return hash(("service", self.name))


@final
class AdapterSlot(Generic[T]):
    """Names a singleton adapter slot: at most one implementation at a time.

    A second claim fails at once naming both owners; releasing frees only one's own claim.
    """

    __slots__ = ("name", "type")

    def __init__(self, name: str, type: type[T] | Any = object) -> None:
        self.name = name
        self.type = type

    def __repr__(self) -> str:
        return f"AdapterSlot({self.name!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AdapterSlot) and other.name == self.name

    def __hash__(self) -> int:
        return hash(("slot", self.name))


@final
class EventKey(Generic[T]):
    """Names an event type and the payload type its listeners receive."""

    __slots__ = ("name", "type")

    def __init__(self, name: str, type: type[T] | Any = object) -> None:
        self.name = name
        self.type = type

    def __repr__(self) -> str:
        return f"EventKey({self.name!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EventKey) and other.name == self.name

    def __hash__(self) -> int:
        return hash(("event", self.name))


#: The host's shared aiohttp client session (one per server, as aiohttp advises).
HTTP_CLIENT: ServiceKey[aiohttp.ClientSession] = ServiceKey("host.http_client")
#: The host event bus; plugins normally use ``ctx.on`` / ``ctx.emit`` instead.
EVENT_BUS: ServiceKey[EventBus] = ServiceKey("host.event_bus")
