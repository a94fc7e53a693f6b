"""Registrations: the undo handle every state-changing context call returns."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import final

Disposer = Callable[[], Awaitable[None] | None]


@final
class Registration:
    """One thing a plugin added to the host, and the way to take exactly that thing back.

    ``dispose()`` is idempotent: the first call runs the disposer, later calls (and concurrent
    ones) return once it has finished. Unloading a plugin disposes its registrations in reverse
    order of creation.
    """

    __slots__ = ("_disposer", "_done", "_task", "key", "kind", "owner")

    def __init__(self, owner: str, kind: str, key: str, disposer: Disposer) -> None:
        self.owner = owner
        self.kind = kind
        self.key = key
        self._disposer: Disposer | None = disposer
        self._done = False
        self._task: asyncio.Future[None] | None = None

    @property
    def disposed(self) -> bool:
        """True once the disposer has run (successfully or not)."""
        return self._done

    async def dispose(self) -> None:
        """Undo the registration; harmless to call more than once."""
        if self._done:
            return
        if self._task is not None:
            await asyncio.shield(self._task)
            return
        disposer = self._disposer
        assert disposer is not None
        self._task = asyncio.get_running_loop().create_future()
        try:
            result = disposer()
            if inspect.isawaitable(result):
                await result
        except BaseException as exc:
            self._task.set_exception(exc)
            self._task.exception()  # mark retrieved: the caller sees the error below
            raise
        else:
            self._task.set_result(None)
        finally:
            self._done = True
            self._disposer = None

    def __repr__(self) -> str:
        state = "disposed" if self._done else "active"
        return f"<Registration {self.kind} {self.key!r} owner={self.owner!r} {state}>"
