"""Regex scripts of a SillyTavern folder: the global ones, and ST's allow-lists of scoped ones.

**Global** scripts (``settings.json`` ``extension_settings.regex``, and ``regex/*.json``) go onto
every preset of ``OpenAI Settings/``: Innkeeper keeps regex on presets and cards, and one preset
is in play in every session, so that is where a global script applies everywhere. They are put
before the preset's own scripts (SillyTavern runs global scripts first); a script whose ``id``
(else ``scriptName``) the preset already carries is left alone, so re-runs add nothing.

**Scoped** scripts travel inside their card or preset (native ``regex_scripts``), but SillyTavern
runs them only where the user allowed it: a card's when its file (its avatar) is listed in
``extension_settings.character_allowed_regex``, a Chat Completion preset's when its name is in
``extension_settings.preset_allowed_regex.openai``. Innkeeper has no allow-list — a resource's
scripts run — so when the folder's settings carry such a list, the scripts of a card or preset
that is not on it are imported with ``disabled: true`` (as they behaved in SillyTavern; enabling
them is one edit on the regex page), and the report says so. Only resources this run imported
are touched, so a script re-enabled in Innkeeper stays enabled on a re-run. Without the list
(SillyTavern before it existed) every scoped script ran, and stays enabled.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Final, Literal

from innkeeper_tavern.features.migration.backends import (
    Backend,
    CommandError,
    OfflineBackend,
    OnlineBackend,
    problem_message,
)
from innkeeper_tavern.pure.api_paths import V1_PREFIX
from innkeeper_tavern.pure.formats.card import card_regex_scripts
from innkeeper_tavern.pure.formats.errors import FormatError, field_message
from innkeeper_tavern.pure.formats.preset import preset_regex_scripts
from innkeeper_tavern.pure.formats.regex_script import check_script_list, parse_regex_file
from innkeeper_tavern.state.resources import ResourceError

from .layout import read_settings
from .report import Item, Status

if TYPE_CHECKING:
    from .run import Migration

Owner = Literal["presets", "characters"]
#: The API id of Chat Completion presets in ``preset_allowed_regex`` (``OpenAI Settings/``).
CHAT_COMPLETION_API: Final = "openai"


def _refusal(exc: FormatError) -> str:
    return f"{exc.code}: {field_message(exc.message, exc.path)}"


def _script_id(script: dict[str, Any]) -> str:
    return str(script.get("id") or script.get("scriptName") or "")


async def scripts_of(backend: Backend, owner: Owner, owner_id: str) -> list[dict[str, Any]]:
    """The native regex scripts of one preset or card."""
    if isinstance(backend, OnlineBackend):
        path = f"{V1_PREFIX}/{owner}/{owner_id}/regex-scripts"
        status, doc = await backend.request_json("GET", path)
        if status != 200:
            raise CommandError(f"{doc.get('code')}: {problem_message(doc)}")
        return [x for x in doc.get("regexScripts", []) if isinstance(x, dict)]
    if isinstance(backend, OfflineBackend):
        if owner == "presets":
            return preset_regex_scripts((await backend.resources.presets.get(owner_id)).body)
        return card_regex_scripts((await backend.resources.characters.get(owner_id)).body)
    raise CommandError("cannot read regex scripts here")


async def put_scripts(
    backend: Backend, owner: Owner, owner_id: str, scripts: list[dict[str, Any]]
) -> None:
    """Replace the native regex scripts of one preset or card (full ordered replace)."""
    if isinstance(backend, OnlineBackend):
        path = f"{V1_PREFIX}/{owner}/{owner_id}/regex-scripts"
        status, doc = await backend.request_json("PUT", path, {"regexScripts": scripts})
        if status != 200:
            raise CommandError(f"{doc.get('code')}: {problem_message(doc)}")
        return
    if not isinstance(backend, OfflineBackend):
        raise CommandError("cannot write regex scripts here")
    try:
        if owner == "presets":
            await backend.resources.set_preset_regex(owner_id, scripts)
        else:
            await backend.resources.set_character_regex(owner_id, scripts)
    except (FormatError, ResourceError) as exc:
        if isinstance(exc, FormatError):
            raise CommandError(_refusal(exc)) from None
        raise CommandError(f"{exc.code}: {exc.message}") from None


async def attach_regex(backend: Backend, preset_id: str, scripts: list[dict[str, Any]]) -> int:
    """Put the ``scripts`` a preset does not carry yet before its own (SillyTavern runs global
    scripts before scoped ones); how many were added."""
    current = await scripts_of(backend, "presets", preset_id)
    have = {_script_id(x) for x in current}
    new = [x for x in scripts if _script_id(x) not in have]
    if new:
        await put_scripts(backend, "presets", preset_id, new + current)
    return len(new)


async def _settings(run: Migration) -> dict[str, Any]:
    if run.folder.settings is None:
        return {}
    try:
        return await asyncio.to_thread(read_settings, run.folder.settings)
    except (OSError, ValueError):
        return {}  # already reported by personas()


async def global_regex(run: Migration) -> None:
    """Attach the folder's global scripts to its presets (module docstring)."""
    scripts: list[dict[str, Any]] = []
    sources: list[str] = []
    if run.folder.settings is not None:
        doc = await _settings(run)
        ext = doc.get("extension_settings")
        found = ext.get("regex") if isinstance(ext, dict) else None
        label = f"{run.rel(run.folder.settings)}: extension_settings.regex"
        if isinstance(found, list) and found:
            try:
                scripts += check_script_list(found, "$.extension_settings.regex")
                sources.append(label)
            except FormatError as exc:
                run.add(Item("regex", label, "refused", _refusal(exc)))
    for path in run.folder.regex_files:
        try:
            data = await asyncio.to_thread(path.read_bytes)
        except OSError as exc:
            run.add(Item("regex", run.rel(path), "refused", f"unreadable: {exc}"))
            continue
        try:
            scripts += parse_regex_file(data)
        except FormatError as exc:
            # The whole file or nothing: a script dropped silently would be lost.
            run.add(Item("regex", run.rel(path), "refused", _refusal(exc)))
            continue
        sources.append(run.rel(path))
    if not scripts:
        return
    source = " + ".join(sources) if len(sources) <= 2 else f"{len(sources)} sources"
    if not run.presets:
        reason = f"{len(scripts)} global script(s) and no preset to attach them to"
        run.add(Item("regex", source, "unsupported", reason))
        return
    for preset_id in run.presets:
        try:
            added = 0 if run.dry_run else await attach_regex(run.backend, preset_id, scripts)
        except CommandError as exc:
            run.add(Item("regex", f"{source} → {preset_id}", "refused", str(exc)))
            continue
        status: Status = "imported" if added or run.dry_run else "duplicate"
        detail = f"{added} of {len(scripts)} global script(s) attached to {preset_id}"
        run.add(Item("regex", f"{source} → {preset_id}", status, detail, preset_id))


def _allow_lists(doc: dict[str, Any]) -> tuple[set[str] | None, set[str] | None]:
    """ST's allowed card files and allowed Chat Completion preset names (``None``: no list)."""
    ext = doc.get("extension_settings")
    if not isinstance(ext, dict):
        return None, None
    cards = ext.get("character_allowed_regex")
    presets = ext.get("preset_allowed_regex")
    card_list = {str(x) for x in cards} if isinstance(cards, list) else None
    preset_list = None
    if isinstance(presets, dict):
        names = presets.get(CHAT_COMPLETION_API)
        preset_list = {str(x) for x in names} if isinstance(names, list) else set()
    return card_list, preset_list


async def scoped_regex(run: Migration) -> None:
    """Disable the scoped scripts SillyTavern did not allow (module docstring)."""
    if run.dry_run or not run.fresh:
        return
    card_list, preset_list = _allow_lists(await _settings(run))
    for kind, owner_id, path in run.fresh:
        owner: Owner = "characters" if kind == "character" else "presets"
        allowed = card_list if kind == "character" else preset_list
        name = path.name if kind == "character" else path.stem
        if allowed is None or name in allowed:
            continue
        field = (
            "character_allowed_regex"
            if kind == "character"
            else f"preset_allowed_regex.{CHAT_COMPLETION_API}"
        )
        source = f"{run.rel(path)}: scoped regex"
        try:
            scripts = await scripts_of(run.backend, owner, owner_id)
            off = [x for x in scripts if x.get("disabled") is not True]
            if not off:
                continue
            disabled = [{**x, "disabled": True} for x in scripts]
            await put_scripts(run.backend, owner, owner_id, disabled)
        except CommandError as exc:
            run.add(Item("regex", source, "refused", str(exc), owner_id))
            continue
        detail = (
            f"{len(off)} scoped script(s) of {owner_id} imported disabled: SillyTavern did not "
            f"allow them ({name!r} is not in extension_settings.{field})"
        )
        run.add(Item("regex", source, "imported", detail, owner_id))
