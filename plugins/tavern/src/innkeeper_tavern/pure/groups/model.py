"""The group model: several characters who share one chat, and how a reply's speaker is chosen.

A group names its members by character id, in their order; a muted member is kept in the list
but never chosen automatically (SillyTavern's ``disabled_members``). The rest mirrors a
SillyTavern group file (docs/resources.md "Groups" lists each field and its ST name); ST
fields Innkeeper does not use are kept verbatim in ``st_extra`` so an export gives them back.

Everything here is pure: :func:`parse_new_group` and :func:`apply_patch` validate a request body
strictly (unknown fields, wrong types and values past a bound are a :class:`GroupError` 400) and
never touch the store.
"""

from __future__ import annotations

import unicodedata
from typing import Any, Final, Literal

import msgspec

from innkeeper_tavern.pure.formats.errors import FormatError
from innkeeper_tavern.pure.formats.user import js_length, validate_avatar

ActivationStrategy = Literal["natural", "list", "manual", "pooled"]
GenerationMode = Literal["swap", "join", "join-with-muted"]

ACTIVATION_STRATEGIES: Final[tuple[ActivationStrategy, ...]] = (
    "natural",
    "list",
    "manual",
    "pooled",
)
GENERATION_MODES: Final[tuple[GenerationMode, ...]] = ("swap", "join", "join-with-muted")

#: Longest group name (characters, as JavaScript counts them).
MAX_GROUP_NAME_CHARS: Final = 200
#: Most members of one group (SillyTavern has no limit; every member's card is read per turn in
#: join mode, so the bound keeps a turn's assembly finite).
MAX_MEMBERS: Final = 64
#: Longest join prefix or suffix.
MAX_JOIN_AFFIX_CHARS: Final = 10_000
#: Auto mode delay bounds, seconds (SillyTavern's default is 5).
MIN_AUTO_MODE_DELAY: Final = 1
MAX_AUTO_MODE_DELAY: Final = 999
DEFAULT_AUTO_MODE_DELAY: Final = 5
#: Encoded size of the kept SillyTavern fields of one group.
MAX_ST_EXTRA_BYTES: Final = 256 << 10
#: Character ids, as the resource library spells them.
MAX_CHARACTER_ID_CHARS: Final = 100

#: A body, field or value the group routes do not accept (400).
GROUP_INVALID: Final = "GROUP_INVALID"
#: A member names a character that is not stored (400).
GROUP_MEMBER_UNKNOWN: Final = "GROUP_MEMBER_UNKNOWN"
#: No group has this id (404).
GROUP_NOT_FOUND: Final = "GROUP_NOT_FOUND"
#: The write named a revision that is not the group's current one (409).
GROUP_REVISION_CONFLICT: Final = "GROUP_REVISION_CONFLICT"
#: The store holds its maximum number of groups (409).
GROUP_LIMIT_REACHED: Final = "GROUP_LIMIT_REACHED"
#: The serialized store would exceed its byte limit (413).
GROUP_STORAGE_LIMIT_REACHED: Final = "GROUP_STORAGE_LIMIT_REACHED"
#: The disk refused the write; nothing changed (500).
GROUP_WRITE_FAILED: Final = "GROUP_WRITE_FAILED"
#: ``groups.json`` is oversized or has a newer schema; left untouched (the plugin does not start).
GROUPS_FILE_UNSUPPORTED: Final = "GROUPS_FILE_UNSUPPORTED"


class GroupError(Exception):
    """A group operation was refused; nothing changed. ``details``: structured facts the
    answer carries (``currentRevision`` of a conflict)."""

    def __init__(
        self, status: int, code: str, message: str, *, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details


class Member(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """One member: a character id, muted or not (order is the list's order)."""

    character_id: str
    muted: bool = False


class Group(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """One stored group (``groups[]`` of ``groups.json``)."""

    id: str
    name: str
    members: tuple[Member, ...] = ()
    avatar: str | None = None
    activation_strategy: ActivationStrategy = "natural"
    allow_self_responses: bool = False
    auto_mode: bool = False
    auto_mode_delay: int = DEFAULT_AUTO_MODE_DELAY
    generation_mode: GenerationMode = "swap"
    join_prefix: str = ""
    join_suffix: str = ""
    hide_muted_sprites: bool = True
    favorite: bool = False
    #: SillyTavern group-file fields Innkeeper does not interpret, kept for the export.
    st_extra: dict[str, Any] = {}
    revision: int = 1
    created_at: str = ""
    updated_at: str = ""


#: Body field (camelCase) → what it must be; ``members`` and ``avatar`` are checked apart.
_EDITABLE: Final = frozenset(
    {
        "name",
        "members",
        "avatar",
        "activationStrategy",
        "allowSelfResponses",
        "autoMode",
        "autoModeDelay",
        "generationMode",
        "joinPrefix",
        "joinSuffix",
        "hideMutedSprites",
        "favorite",
        "stAvatars",
    }
)
#: ``st_extra`` keys of the SillyTavern avatar file of each member (character id → file) and
#: of the members whose card was not imported (``[[index, avatar, muted]]``).
AVATARS_KEY: Final = "innkeeper:memberAvatars"
MISSING_KEY: Final = "innkeeper:missingMembers"
#: Longest SillyTavern avatar file name kept.
MAX_AVATAR_FILE_CHARS: Final = 255
_FLAGS: Final = {
    "allowSelfResponses": "allow_self_responses",
    "autoMode": "auto_mode",
    "hideMutedSprites": "hide_muted_sprites",
    "favorite": "favorite",
}


def _invalid(message: str) -> GroupError:
    return GroupError(400, GROUP_INVALID, message)


def check_name(value: object) -> str:
    """A trimmed, non-empty name without control characters, within the bound."""
    if not isinstance(value, str):
        raise _invalid("name must be a string")
    name = value.strip()
    if not name:
        raise _invalid("name must not be empty")
    if any(unicodedata.category(ch) == "Cc" for ch in name):
        raise _invalid("name must not contain control characters")
    if js_length(name) > MAX_GROUP_NAME_CHARS:
        raise _invalid(f"name is longer than {MAX_GROUP_NAME_CHARS} characters")
    return name


def check_members(value: object) -> tuple[Member, ...]:
    """``[{characterId, muted?}]``: unique ids, at most :data:`MAX_MEMBERS`."""
    if not isinstance(value, list):
        raise _invalid("members must be an array of {characterId, muted}")
    if len(value) > MAX_MEMBERS:
        raise _invalid(f"a group has at most {MAX_MEMBERS} members")
    members: list[Member] = []
    seen: set[str] = set()
    for at, item in enumerate(value):
        if not isinstance(item, dict) or set(item) - {"characterId", "muted"}:
            raise _invalid(f"members[{at}] must be {{characterId, muted?}}")
        cid = item.get("characterId")
        if not isinstance(cid, str) or not cid or len(cid) > MAX_CHARACTER_ID_CHARS:
            raise _invalid(f"members[{at}].characterId must be a character id")
        muted = item.get("muted", False)
        if not isinstance(muted, bool):
            raise _invalid(f"members[{at}].muted must be true or false")
        if cid in seen:
            raise _invalid(f"character {cid!r} is a member twice")
        seen.add(cid)
        members.append(Member(character_id=cid, muted=muted))
    return tuple(members)


def _affix(value: object, field: str) -> str:
    if not isinstance(value, str):
        raise _invalid(f"{field} must be a string")
    if js_length(value) > MAX_JOIN_AFFIX_CHARS:
        raise _invalid(f"{field} is longer than {MAX_JOIN_AFFIX_CHARS} characters")
    return value


def _changes(body: dict[str, Any]) -> dict[str, Any]:
    """The struct fields a body sets, each validated."""
    unknown = sorted(k for k in body if k not in _EDITABLE)
    if unknown:
        raise _invalid(f"unsupported field {unknown[0][:60]!r}")
    out: dict[str, Any] = {}
    if "name" in body:
        out["name"] = check_name(body["name"])
    if "members" in body:
        out["members"] = check_members(body["members"])
    if "avatar" in body:
        try:
            out["avatar"] = validate_avatar(body["avatar"], "$.avatar")
        except FormatError as exc:
            raise _invalid(exc.message) from None
    if "activationStrategy" in body:
        strategy = body["activationStrategy"]
        if strategy not in ACTIVATION_STRATEGIES:
            raise _invalid(f"activationStrategy must be one of {', '.join(ACTIVATION_STRATEGIES)}")
        out["activation_strategy"] = strategy
    if "generationMode" in body:
        mode = body["generationMode"]
        if mode not in GENERATION_MODES:
            raise _invalid(f"generationMode must be one of {', '.join(GENERATION_MODES)}")
        out["generation_mode"] = mode
    for field, attr in _FLAGS.items():
        if field in body:
            if not isinstance(body[field], bool):
                raise _invalid(f"{field} must be true or false")
            out[attr] = body[field]
    if "autoModeDelay" in body:
        delay = body["autoModeDelay"]
        if (
            not isinstance(delay, int)
            or isinstance(delay, bool)
            or not MIN_AUTO_MODE_DELAY <= delay <= MAX_AUTO_MODE_DELAY
        ):
            raise _invalid(
                f"autoModeDelay must be a whole number of seconds from {MIN_AUTO_MODE_DELAY} "
                f"to {MAX_AUTO_MODE_DELAY}"
            )
        out["auto_mode_delay"] = delay
    if "joinPrefix" in body:
        out["join_prefix"] = _affix(body["joinPrefix"], "joinPrefix")
    if "joinSuffix" in body:
        out["join_suffix"] = _affix(body["joinSuffix"], "joinSuffix")
    if "stAvatars" in body:
        avatars = body["stAvatars"]
        if (
            not isinstance(avatars, dict)
            or len(avatars) > MAX_MEMBERS
            or not all(
                isinstance(v, str) and 0 < len(v) <= MAX_AVATAR_FILE_CHARS for v in avatars.values()
            )
        ):
            raise _invalid("stAvatars must map character ids to SillyTavern avatar file names")
        out["st_avatars"] = avatars
    return out


def _with_avatars(group: Group, avatars: dict[str, str]) -> dict[str, Any]:
    """``st_extra`` naming these members' avatar files; a member missing at import whose avatar
    is now named is no longer missing."""
    extra = dict(group.st_extra)
    extra[AVATARS_KEY] = {**extra.get(AVATARS_KEY, {}), **avatars}
    named = set(avatars.values())
    missing = [m for m in extra.get(MISSING_KEY, []) if m[1] not in named]
    if missing:
        extra[MISSING_KEY] = missing
    else:
        extra.pop(MISSING_KEY, None)
    return extra


def parse_new_group(body: object, *, group_id: str, now: str) -> Group:
    """A group from a create body (``name`` required, everything else defaulted)."""
    if not isinstance(body, dict):
        raise _invalid("request body must be a JSON object")
    if "name" not in body:
        raise _invalid("name is required")
    changes = _changes(body)
    avatars = changes.pop("st_avatars", None)
    group = Group(id=group_id, created_at=now, updated_at=now, **changes)
    if avatars:
        group = msgspec.structs.replace(group, st_extra=_with_avatars(group, avatars))
    return group


def apply_patch(group: Group, body: object, *, now: str) -> Group:
    """``group`` with the fields of a PATCH body replaced (``revision`` is the store's)."""
    if not isinstance(body, dict):
        raise _invalid("request body must be a JSON object")
    changes = _changes({k: v for k, v in body.items() if k != "revision"})
    avatars = changes.pop("st_avatars", None)
    if avatars:
        changes["st_extra"] = check_st_extra(_with_avatars(group, avatars))
    if not changes:
        return group
    return msgspec.structs.replace(group, **changes, revision=group.revision + 1, updated_at=now)


def check_st_extra(extra: dict[str, Any]) -> dict[str, Any]:
    """The kept SillyTavern fields, bounded by their encoded size."""
    if len(msgspec.json.encode(extra)) > MAX_ST_EXTRA_BYTES:
        raise _invalid(f"the kept SillyTavern fields exceed {MAX_ST_EXTRA_BYTES} bytes")
    return extra


def group_wire(group: Group, names: dict[str, str | None]) -> dict[str, Any]:
    """The group as the routes answer it: members carry their card's ``name`` (``null`` and
    ``missing: true`` when the card is no longer stored); ``stExtra`` is left out."""
    doc: dict[str, Any] = msgspec.to_builtins(group)
    doc.pop("stExtra", None)
    doc["members"] = [
        {
            "characterId": m.character_id,
            "muted": m.muted,
            "name": names.get(m.character_id),
            "missing": names.get(m.character_id) is None,
        }
        for m in group.members
    ]
    return doc


__all__ = [
    "ACTIVATION_STRATEGIES",
    "AVATARS_KEY",
    "GENERATION_MODES",
    "GROUPS_FILE_UNSUPPORTED",
    "GROUP_INVALID",
    "GROUP_LIMIT_REACHED",
    "GROUP_MEMBER_UNKNOWN",
    "GROUP_NOT_FOUND",
    "GROUP_REVISION_CONFLICT",
    "GROUP_STORAGE_LIMIT_REACHED",
    "GROUP_WRITE_FAILED",
    "MAX_MEMBERS",
    "MISSING_KEY",
    "ActivationStrategy",
    "GenerationMode",
    "Group",
    "GroupError",
    "Member",
    "apply_patch",
    "check_members",
    "check_name",
    "check_st_extra",
    "group_wire",
    "parse_new_group",
]
