"""A long scripted story keeps the conversation projection and the store's caches in bounds.

Three sessions play interleaved turns through the real agent (a section renders a ~24 KB system
prompt that changes one paragraph per turn, the synthetic provider answers). The conversation
cache is given small bounds; after every round of turns its per-session and total sizes, the
chunk-body cache and the append-state cache stay within theirs, while what each request sends
is still the whole chat (checked against the log at the end).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import closing

from innkeeper_core.sessions import StoreSessionController, derive_messages
from innkeeper_core.sessions.bodies import MAX_CACHED_CHUNK_CHARS, unpack_chunk
from innkeeper_core.sessions.projection import MAX_INLINE_MESSAGE_CHARS, ConversationCache
from innkeeper_core.sessions.store import MAX_CACHED_CHAINS
from innkeeper_hostapi.agents import SESSIONS
from innkeeper_hostapi.testing import RunningHost

from .conftest import Api

PROMPT = """
from innkeeper_hostapi import hookimpl
from innkeeper_hostapi.agents import SYSTEM_PROMPT

RULES = [f"Rule {i}: " + "the inn keeps its doors open at night. " * 6 for i in range(100)]

@hookimpl
def innkeeper_plugin_setup(ctx):
    def prompt(turn):
        rules = list(RULES)
        rules[turn.turn % 100] = f"Roll for turn {turn.turn}: {turn.turn * 7 % 40}"
        return "\\n\\n".join(rules)

    ctx.get(SYSTEM_PROMPT).section(ctx, "rules", 0, prompt)
"""

SESSION_BOUND = 6_000
TOTAL_BOUND = 10_000


async def test_long_story_keeps_projection_and_caches_within_bounds(
    innkeeper_host: RunningHost, api: Api, plugin_dir: Callable[[str, str], str]
) -> None:
    await innkeeper_host.load("rules", plugin_dir("rules", PROMPT))
    controller = innkeeper_host.get(SESSIONS)
    assert isinstance(controller, StoreSessionController)
    controller.conversations.close()  # replace the default cache by one with small bounds
    store = controller.store
    cache = ConversationCache(store, max_session_chars=SESSION_BOUND, max_total_chars=TOTAL_BOUND)
    controller.conversations = cache
    sessions = [await api.new_session(f"story {i}") for i in range(3)]
    for round_ in range(60):
        for n, session in enumerate(sessions):
            await api.prompt(session, f"Round {round_} of story {n}: " + "we walk on. " * 8)
            await api.idle(session)
        stats = cache.stats()
        assert all(chars <= SESSION_BOUND for chars in stats.per_session.values())
        assert stats.chars <= TOTAL_BOUND
        assert stats.chars == sum(stats.per_session.values())
        caches = store.cache_stats()
        assert caches["chunkChars"] <= MAX_CACHED_CHUNK_CHARS
        assert caches["appendStates"] <= MAX_CACHED_CHAINS
        assert caches["chains"] <= MAX_CACHED_CHAINS
    # Bounded memory did not cost correctness: every session's chat is whole.
    for session in sessions:
        events = await store.read_all(session)
        expected = [m for m in derive_messages(events) if m.role in ("user", "assistant")]
        got = await controller.messages(session, roles=("user", "assistant"))
        assert list(got.messages) == expected
        assert len(expected) == 120
        system = [m for m in derive_messages(events) if m.role == "system"]
        assert len(system) == 60 and all(len(m.text) > MAX_INLINE_MESSAGE_CHARS for m in system)
    # 180 prompts of ~24 KB were stored as shared chunks, not copies.
    assert cache.stats().deferred > 0
    with closing(sqlite3.connect(store.path)) as conn:
        bodies = conn.execute("SELECT body FROM text_chunks")
        chunk_chars = sum(len(unpack_chunk(body)) for (body,) in bodies)
    assert chunk_chars < 3 * 60 * len(system[0].text) / 10
