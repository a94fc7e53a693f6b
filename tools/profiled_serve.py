#!/usr/bin/env python3
"""``innkeeper serve`` with a cProfile window a benchmark opens and closes by signal.

Used by ``tools/bench_story.py --profile``: the benchmark starts the server through this script
instead of ``python -m innkeeper_core``, sends ``SIGUSR1`` just before the turns it times and
``SIGUSR2`` just after, and reads the statistics this script then dumps (``pstats`` format) to
the path in ``INNKEEPER_PROFILE_OUT`` (the event loop's thread) and to that path with
``.workers`` added (every other thread's work while the window was open: ``asyncio.to_thread``
and the session store's read pool, which are ``concurrent.futures`` work items, and the store's
writer thread, one batch of jobs at a time), and to that path with ``.gc`` added (the garbage
collector's runs per generation: count and seconds, which cProfile charges to whichever function
allocated). Times are wall time while a function ran on its thread: on a loaded machine they
include the time the thread waited for a core, so compare the profile's shares, and take the
CPU figures from the benchmark. Nothing is profiled outside the
window, so start-up, the imports of the profile and the matcher's first build stay out.

    INNKEEPER_PROFILE_OUT=/tmp/turn.prof python tools/profiled_serve.py serve --port 8123 ...
"""

from __future__ import annotations

import cProfile
import gc
import os
import pstats
import signal
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import thread as futures_thread
from types import FrameType
from typing import Any

from innkeeper_core.cli import main
from innkeeper_core.sessions.store import writer

_loop_profiler: cProfile.Profile | None = None
#: One profiler per worker thread, made the first time the thread runs work in a window.
_workers: dict[int, cProfile.Profile] = {}
_workers_lock = threading.Lock()
_open = False


def _profiler() -> cProfile.Profile:
    # cProfile's own clock (wall time, read in C). A per-thread CPU clock (time.thread_time)
    # would leave out the time a thread waits for its core on a shared machine, but it is a
    # Python-level call and a system call on every profiled call and return, which charges a
    # function that makes many small calls with several times its real cost.
    return cProfile.Profile()


def _profiled(run: Callable[..., Any]) -> Callable[..., Any]:
    """``run`` under this thread's worker profiler while the window is open."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not _open:
            return run(*args, **kwargs)
        ident = threading.get_ident()
        with _workers_lock:
            profiler = _workers.setdefault(ident, _profiler())
        profiler.enable()
        try:
            return run(*args, **kwargs)
        finally:
            profiler.disable()

    return wrapper


#: Per generation: collections and their CPU seconds while the window is open.
_gc: dict[int, list[float]] = {}
_gc_started: list[float] = [0.0]


def _on_gc(phase: str, info: dict[str, int]) -> None:
    """Collections are charged to whatever function allocated when they ran: time them."""
    if not _open:
        return
    if phase == "start":
        _gc_started[0] = time.thread_time()
    else:
        seen = _gc.setdefault(info["generation"], [0, 0.0])
        seen[0] += 1
        seen[1] += time.thread_time() - _gc_started[0]


def _start(_signum: int, _frame: FrameType | None) -> None:
    """A fresh window: each SIGUSR1 starts counting from zero."""
    global _loop_profiler, _open
    with _workers_lock:
        _workers.clear()
    _gc.clear()
    _open = True
    _loop_profiler = _profiler()
    _loop_profiler.enable()


def _dump(stats: pstats.Stats | cProfile.Profile | None, out: str) -> None:
    """Written beside the target, then renamed, so a reader that waits for the file never
    reads half of it."""
    if stats is None:
        stats = _profiler()  # nothing ran: an empty profile
    stats.dump_stats(out + ".part")
    os.replace(out + ".part", out)


def _stop(_signum: int, _frame: FrameType | None) -> None:
    global _open
    if _loop_profiler is None:
        return
    _loop_profiler.disable()
    _open = False
    out = os.environ["INNKEEPER_PROFILE_OUT"]
    with _workers_lock:
        profilers = list(_workers.values())
    workers: pstats.Stats | None = None
    for profiler in profilers:
        profiler.create_stats()
        if workers is None:
            workers = pstats.Stats(profiler)
        else:
            workers.add(profiler)
    _dump(workers, out + ".workers")
    with open(out + ".gc.part", "w") as gc_out:
        gc_out.write(repr({gen: tuple(seen) for gen, seen in sorted(_gc.items())}))
    os.replace(out + ".gc.part", out + ".gc")
    _dump(_loop_profiler, out)


if __name__ == "__main__":
    # Private hooks, on purpose: this is a measuring tool, and these two are where the server's
    # work leaves the loop's thread.
    futures_thread._WorkItem.run = _profiled(futures_thread._WorkItem.run)  # type: ignore[method-assign]
    writer._WriterThread._run_batch = _profiled(writer._WriterThread._run_batch)  # type: ignore[method-assign]
    gc.callbacks.append(_on_gc)
    signal.signal(signal.SIGUSR1, _start)
    signal.signal(signal.SIGUSR2, _stop)
    sys.exit(main(sys.argv[1:]))
