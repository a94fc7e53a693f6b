"""``innkeeper import <SillyTavern data folder>``: the whole folder in one command.

Order: worlds (so a card's linked world is known), presets, cards (each card's
``extensions.world`` bound as its standalone book relation), personas (``settings.json`` and
persona backups), ST's scoped-regex allow-lists and the global regex scripts (``regex.py``),
chats (as playthroughs, through a host: the running server, or the one the command started in
its process), groups and group chats (``groups.py``, through the host too), then the folders
Innkeeper does not import. Every item is looked up in the ledger
first (``ledger.py``) and skipped as a duplicate when it is already there.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from innkeeper_tavern.features.migration.backends import (
    MAX_IMPORT_FILE_BYTES,
    Backend,
    CommandError,
    ExportKind,
    OfflineBackend,
    OnlineBackend,
)
from innkeeper_tavern.pure.api_paths import V1_PREFIX
from innkeeper_tavern.pure.formats.card import parse_card_bytes
from innkeeper_tavern.pure.formats.errors import FormatError, field_message
from innkeeper_tavern.state.resources.classify import FileKind, classify, refusal
from innkeeper_tavern.state.resources.service import file_stem

from . import chats
from .groups import import_groups
from .layout import StFolder, read_settings, scan
from .ledger import Ledger, content_key
from .personas import build_personas
from .play_import import BindingsFull, PlayImporter
from .regex import global_regex, scoped_regex
from .report import Bar, Item

_LIBRARY: dict[str, ExportKind] = {
    "character": "characters",
    "preset": "presets",
    "world-book": "world-books",
    "persona": "users",
}


#: A chat file that is not UTF-8 (its lines cannot be JSON): the file is refused whole.
CHAT_NOT_UTF8: Final = "CHAT_NOT_UTF8"
#: Chats whose catalog rows are written together (``play_import``: one catalog write per batch).
CATALOG_BATCH: Final = 250
#: Chats imported at once: each is a chain of small requests the server mostly spends waiting
#: for fsync, so a few in flight overlap that wait (each chat's steps stay in order).
CHAT_CONCURRENCY: Final = 4


@dataclass(frozen=True, slots=True)
class _Row:
    """An imported chat waiting for its catalog row: ledger key, row, report item."""

    key: str
    row: dict[str, Any]
    item: Item


@dataclass(slots=True)
class Migration:
    """One run over one folder."""

    folder: StFolder
    backend: Backend
    ledger: Ledger
    tavern_dir: Path
    dry_run: bool
    bar: Bar
    items: list[Item] = field(default_factory=list)
    known: dict[str, set[str]] = field(default_factory=dict)
    worlds: dict[str, str] = field(default_factory=dict)
    cards: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: Persona name → user id, and the default persona's user id (bound to imported chats).
    users: dict[str, str] = field(default_factory=dict)
    default_user: str | None = None
    presets: list[str] = field(default_factory=list)
    #: (kind, id, file) of each card and preset this run imported (``regex.scoped_regex``).
    fresh: list[tuple[str, str, Path]] = field(default_factory=list)
    #: SHA-256 of each stored card's imported file → (id, name): a card imported another way
    #: (the web client, a loose file) is a duplicate too.
    card_hashes: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: Imported chats whose catalog rows are not written yet (see ``play_import``).
    _rows: list[_Row] = field(default_factory=list)
    #: Unrecorded sessions a killed run created, by title (see ``_orphans_of_killed_runs``).
    _orphans: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    #: Set once the server's import-context bindings are full: later chats are refused unstarted.
    _full: str | None = None
    #: Playthrough ids a chat of this run started on (two identical chats make one).
    _claimed: set[str] = field(default_factory=set)

    def rel(self, path: Path) -> str:
        """``path`` as the report shows it (relative to the folder)."""
        try:
            return str(path.relative_to(self.folder.root))
        except ValueError:
            return str(path)

    def add(self, item: Item) -> None:
        self.items.append(item)
        self.bar.step(item.source[-32:])

    async def _known(self, kind: str) -> set[str]:
        return self.known.setdefault(_LIBRARY[kind], set())

    async def _duplicate(self, kind: str, key: str) -> dict[str, Any] | None:
        entry = self.ledger.get(key)
        if entry is None or entry.get("kind") != kind:
            return None
        if kind == "chat":
            return entry
        return entry if str(entry.get("id")) in await self._known(kind) else None

    async def resume(self) -> None:
        """Settle the imports a killed run left pending, then record this run's start."""
        names = {lib: await self.backend.names(lib) for lib in set(_LIBRARY.values())}
        self.known = {lib: set(found) for lib, found in names.items()}
        self.card_hashes = await self.backend.card_hashes()
        if self.dry_run:
            return
        done = self.ledger.done_ids()
        for pending in self.ledger.pending():
            library = _LIBRARY.get(pending.kind)
            if library is None:
                continue
            before = pending.known.get(library, set())
            found = [
                i
                for i, name in names[library].items()
                if i not in before and i not in done and pending.name in (None, name)
            ]
            if len(found) == 1:
                self.ledger.record(
                    pending.key,
                    kind=pending.kind,
                    id=found[0],
                    name=names[library][found[0]],
                    source="(recovered after an interrupted run)",
                )
                done.add(found[0])
        self.ledger.start_run(self.known)

    async def resource(
        self,
        kind: str,
        file_kind: FileKind,
        path: Path,
        data: bytes,
        source: str,
        name: str | None = None,
    ) -> str | None:
        """Import one resource unless the ledger has it; the id either way (None if refused)."""
        key = content_key(kind, data, path.stem.encode() if kind == "preset" else b"")
        entry = await self._duplicate(kind, key)
        digest = hashlib.sha256(data).hexdigest()
        same = self.card_hashes.get(digest) if kind == "character" else None
        if entry is None and same is not None:
            entry = {"id": same[0]}
            if not self.dry_run:
                self.ledger.record(key, kind=kind, id=same[0], name=same[1], source=source)
        if entry is not None:
            self.add(Item(kind, source, "duplicate", f"already {entry['id']}", str(entry["id"])))
            return str(entry["id"])
        if self.dry_run:
            self.add(Item(kind, source, "imported", "would import"))
            return None
        self.ledger.begin(key, kind, name)
        try:
            new_id, name = await self.backend.import_file(file_kind, path, data)
        except CommandError as exc:
            self.ledger.abandon(key)
            self.add(Item(kind, source, "refused", str(exc)))
            return None
        self.ledger.record(key, kind=kind, id=new_id, name=name, source=source)
        self.known.setdefault(_LIBRARY[kind], set()).add(new_id)
        self.add(Item(kind, source, "imported", f"{new_id} ({name})", new_id))
        return new_id

    def _read(self, kind: str, path: Path) -> bytes | None:
        try:
            if path.stat().st_size > MAX_IMPORT_FILE_BYTES:
                reason = f"larger than {MAX_IMPORT_FILE_BYTES} bytes"
                self.add(Item(kind, self.rel(path), "refused", reason))
                return None
            return path.read_bytes()
        except OSError as exc:
            self.add(Item(kind, self.rel(path), "refused", f"unreadable: {exc}"))
            return None

    async def files(self, kind: str, wanted: FileKind, paths: list[Path]) -> None:
        for path in paths:
            data = await asyncio.to_thread(self._read, kind, path)
            if data is None:
                continue
            found, reason = classify(data)
            if found != wanted:
                # Its folder says what it should be: that parser's own error names the field.
                problem = refusal(wanted, data, reason)
                detail = f"{problem.code}: {field_message(problem.message, problem.path)}"
                self.add(Item(kind, self.rel(path), "refused", detail))
                continue
            name = _expected_name(kind, path, data)
            new_id = await self.resource(kind, wanted, path, data, self.rel(path), name)
            if kind == "world-book" and new_id is not None:
                self.worlds[path.stem] = new_id
            if kind == "preset" and new_id is not None:
                self.presets.append(new_id)
            if new_id is not None and self.items[-1].status == "imported" and kind != "world-book":
                self.fresh.append((kind, new_id, path))
            if kind == "character":
                await self._card_done(path, data, new_id)

    async def _card_done(self, path: Path, data: bytes, card_id: str | None) -> None:
        try:
            card = parse_card_bytes(data, file_name=path.name)
        except FormatError:
            return
        if card_id is None:
            if self.dry_run and self.items and self.items[-1].status == "imported":
                self.cards[path.stem] = ("(would be imported)", card.name)
            return
        self.cards[path.stem] = (card_id, card.name)
        world = card.data.extensions.get("world")
        if not isinstance(world, str) or not world:
            return
        book = self.worlds.get(world)
        if book is None:
            reason = f"linked world {world!r} is not in worlds/"
            self.add(Item("world-book", self.rel(path), "refused", reason))
            return
        await link_book(self.backend, "character", card_id, book)

    async def personas(self) -> None:
        sources: list[tuple[str, dict[str, Any]]] = []
        for path in [p for p in [self.folder.settings] if p] + self.folder.persona_backups:
            try:
                sources.append((self.rel(path), await asyncio.to_thread(read_settings, path)))
            except FormatError as exc:
                detail = f"{exc.code}: {field_message(exc.message, exc.path)}"
                self.add(Item("persona", self.rel(path), "refused", detail))
            except OSError as exc:
                self.add(Item("persona", self.rel(path), "refused", f"unreadable: {exc}"))
        for source, doc in sources:
            for persona in build_personas(doc, self.folder.avatars_dir):
                label = f"{source}: {persona.name}"
                new_id = await self.resource(
                    "persona", "user", Path(persona.key), persona.body, label, persona.name
                )
                if persona.note and new_id is not None and self.items[-1].status == "imported":
                    self.items[-1].detail += f"; {persona.note}"
                if new_id is None:
                    continue
                self.users.setdefault(persona.name, new_id)
                if persona.is_default and self.default_user is None:
                    self.default_user = new_id
                if persona.lorebook:
                    book = self.worlds.get(persona.lorebook)
                    if book is None:
                        reason = f"{persona.name}'s lorebook {persona.lorebook!r} is not in worlds/"
                        self.add(Item("world-book", label, "refused", reason))
                    else:
                        await link_book(self.backend, "user", new_id, book)

    async def chats(self) -> None:
        if not self.folder.chats:
            return
        if not isinstance(self.backend, OnlineBackend):
            reason = "chats need a host and this command could not start one: start innkeeper serve"
            for path in self.folder.chats:
                self.add(Item("chat", self.rel(path), "refused", reason + " and run again"))
            return
        play = PlayImporter(self.backend)
        try:
            root = await play.ensure_workspace(self.tavern_dir, dry_run=self.dry_run)
            existing = await play.existing() if not root.endswith("(would be bound)") else set()
        except CommandError as exc:
            for path in self.folder.chats:
                self.add(Item("chat", self.rel(path), "refused", str(exc)))
            return
        if not self.dry_run:
            try:
                await self._orphans_of_killed_runs(play)
            except CommandError as exc:
                for path in self.folder.chats:
                    self.add(Item("chat", self.rel(path), "refused", str(exc)))
                return
        start = len(self.items)
        order = {self.rel(path): i for i, path in enumerate(self.folder.chats)}
        gate = asyncio.Semaphore(CHAT_CONCURRENCY)

        async def one(path: Path) -> None:
            async with gate:
                await self._chat(play, path, existing)

        paths = self.folder.chats
        for at in range(0, len(paths), CATALOG_BATCH):
            await asyncio.gather(*(one(path) for path in paths[at : at + CATALOG_BATCH]))
            await self._flush(play)
        # Chats finish in any order; the report lists them in the folder's order.
        self.items[start:] = sorted(self.items[start:], key=lambda i: order.get(i.source, -1))

    async def _orphans_of_killed_runs(self, play: PlayImporter) -> None:
        """Record the newest host session before this run creates any (``ledger.py``), and pool
        the sessions a killed run created without recording them, by title, for :meth:`_adopt`."""
        newest, bare = await play.bare_sessions()
        self.ledger.sessions_before(newest)
        taken = self.ledger.recorded_sessions() | await play.roots()
        for sid, title, created in bare:
            if sid not in taken:
                self._orphans.setdefault(title, []).append((sid, created))

    def _adopt(self, key: str, title: str) -> str | None:
        """The session to finish the chat ``key`` on: the one its ledger line names, else an
        unrecorded bare session of its title created after its first run began."""
        recorded = self.ledger.session(key)
        pending = self.ledger.pending_of(key)
        if recorded is not None or pending is None or pending.sessions_after is None:
            return recorded
        pool = self._orphans.get(title[:200], [])
        for entry in pool:
            if entry[1] > pending.sessions_after:
                pool.remove(entry)
                return entry[0]
        return None

    async def _chat(self, play: PlayImporter, path: Path, existing: set[str]) -> None:
        source = self.rel(path)
        data = await asyncio.to_thread(self._read, "chat", path)
        if data is None:
            return
        owner = self.folder.chat_owner(path)
        key = content_key("chat", data, owner.encode())
        playthrough_id = f"import-{key[:16]}"
        if playthrough_id in self._claimed:  # the same chat twice in the folder
            self.add(Item("chat", source, "duplicate", f"already {playthrough_id}", playthrough_id))
            return
        self._claimed.add(playthrough_id)
        if playthrough_id in existing:
            self.ledger.record(key, kind="chat", id=playthrough_id, source=source)
            self.add(Item("chat", source, "duplicate", f"already {playthrough_id}", playthrough_id))
            return
        card = self.cards.get(owner)
        if card is None:
            reason = f"its character {owner!r} was not imported from characters/"
            self.add(Item("chat", source, "refused", reason))
            return
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            self.add(Item("chat", source, "refused", f"{CHAT_NOT_UTF8}: not UTF-8 text"))
            return
        parsed = chats.parse_chat(text)
        if self.dry_run:
            self.add(Item("chat", source, "imported", f"would import {len(parsed.messages)} msgs"))
            return
        original = chats.split_original(text)
        doc = chats.context_document(parsed, chat_name=path.stem, original_parts=len(original))
        context = chats.encode_context(doc)
        if self._full is not None:  # no session for a chat that cannot be bound
            self.add(Item("chat", source, "refused", self._full))
            return
        books: list[str] = []
        world = _chat_world(parsed.header)
        if world is not None:
            book = self.worlds.get(world)
            if book is None:
                reason = f"chat lorebook {world!r} (chat_metadata.world_info) is not in worlds/"
                self.add(Item("world-book", source, "refused", reason))
            else:
                books.append(book)
        self.ledger.begin(key, "chat", playthrough_id)
        try:
            adopt = self._adopt(key, path.stem)
            session_id, adopted = await play.open_session(adopt, path.stem)
            if session_id != self.ledger.session(key):
                self.ledger.created_session(key, session_id)
            row = await play.prepare_chat(
                session_id,
                playthrough_id=playthrough_id,
                folder=owner,
                title=path.stem,
                card_id=card[0],
                card_name=card[1],
                user_id=self.users.get(str(parsed.header.get("user_name")), self.default_user),
                world_book_ids=books,
                context=context,
                original=original,
                source_file=source,
            )
        except CommandError as exc:
            # The session (if created) stays recorded as pending: the re-run adopts it.
            if isinstance(exc, BindingsFull):
                self._full = f"{exc}; not started"
            self.add(Item("chat", source, "refused", str(exc)))
            return
        notes = [f"{playthrough_id}, session {session_id}, {len(parsed.messages)} messages"]
        if adopted:
            notes.append("finished on the session an interrupted run created")
        if books:
            notes.append(f"lorebook {world!r} bound to the session")
        if parsed.broken_lines:
            notes.append(f"{len(parsed.broken_lines)} unreadable line(s) kept in the original")
        omitted = json.loads(context)["source"]["omittedQa"]
        if omitted:
            notes.append(f"oldest {omitted} QA left out of the context (kept in the original)")
        item = Item("chat", source, "imported", "; ".join(notes), playthrough_id)
        self._rows.append(_Row(key, row, item))
        self.bar.step(source[-32:])  # reported once its row is written

    async def _flush(self, play: PlayImporter) -> None:
        """Write the pending chats' catalog rows at once; then they are done in the ledger."""
        rows, self._rows = self._rows, []
        try:
            await play.add_rows([r.row for r in rows])
        except CommandError as exc:
            self.items.extend(Item("chat", r.item.source, "refused", str(exc)) for r in rows)
            return
        for r in rows:
            self.ledger.record(r.key, kind="chat", id=r.row["id"], source=r.item.source)
            self.items.append(r.item)

    def unsupported(self) -> None:
        for path, reason in self.folder.unsupported:
            self.add(Item("folder", self.rel(path) + "/", "unsupported", reason))


def _chat_world(header: dict[str, Any]) -> str | None:
    """The world a SillyTavern chat has as its own lorebook (``chat_metadata.world_info``)."""
    meta = header.get("chat_metadata")
    world = meta.get("world_info") if isinstance(meta, dict) else None
    return world if isinstance(world, str) and world else None


def _expected_name(kind: str, path: Path, data: bytes) -> str | None:
    """The name the library will give an import (``None`` when only the import knows it)."""
    if kind == "character":
        try:
            return parse_card_bytes(data, file_name=path.name).name
        except FormatError:
            return None
    if kind == "preset":
        return file_stem(path.name)
    return None


async def book_ids(
    backend: Backend, owner: Literal["character", "user"], owner_id: str
) -> list[str]:
    """The owner's world-book relation (a card's standalone books, a persona's lorebooks)."""
    if isinstance(backend, OnlineBackend):
        status, doc = await backend.request_json("GET", _books_path(owner, owner_id))
        return list(doc.get("binding", {}).get("worldBookIds", [])) if status == 200 else []
    if isinstance(backend, OfflineBackend):
        return list(backend.resources.world_book_ids(owner, owner_id))
    return []


def _books_path(owner: Literal["character", "user"], owner_id: str) -> str:
    folder = "characters" if owner == "character" else "users"
    return f"{V1_PREFIX}/{folder}/{owner_id}/world-books"


async def link_book(
    backend: Backend, owner: Literal["character", "user"], owner_id: str, book_id: str
) -> None:
    """Add ``book_id`` to the owner's world-book relation (a card's standalone book, a persona's
    lorebook); nothing changes when it is already bound."""
    ids = await book_ids(backend, owner, owner_id)
    if book_id in ids:
        return
    if isinstance(backend, OnlineBackend):
        await backend.request_json(
            "PUT", _books_path(owner, owner_id), {"worldBookIds": [*ids, book_id]}
        )
    elif isinstance(backend, OfflineBackend):
        await backend.resources.set_world_book_ids(owner, owner_id, [*ids, book_id])


def total_items(folder: StFolder) -> int:
    """An estimate of the report's length, for the progress bar."""
    return (
        len(folder.cards)
        + len(folder.worlds)
        + len(folder.presets)
        + len(folder.chats)
        + len(folder.groups)
        + len(folder.group_chats)
        + len(folder.unsupported)
        + 1
    )


async def migrate(
    root: Path, backend: Backend, tavern_dir: Path, *, dry_run: bool, bar: Bar | None = None
) -> list[Item]:
    """Import the SillyTavern folder ``root`` through ``backend``; one item per thing found."""
    folder = await asyncio.to_thread(scan, root)
    ledger = Ledger(tavern_dir, read_only=dry_run)
    run = Migration(folder, backend, ledger, tavern_dir, dry_run, bar or Bar(io.StringIO(), 0))
    try:
        await run.resume()
        await run.files("world-book", "world-book", folder.worlds)
        await run.files("preset", "preset", folder.presets)
        await run.files("character", "character", folder.cards)
        await run.personas()
        await scoped_regex(run)  # before the global scripts join the presets
        await global_regex(run)
        await run.chats()
        await import_groups(run)
        run.unsupported()
    finally:
        run.bar.close()
        ledger.close()
    return run.items
