"""Applying one reply's commands to a variables object (the native MVU engine).

:func:`apply_reply` is the whole update of docs/mvu.md#one-reply for one message, as a pure
function: extract commands, run them in order on a private copy-on-write candidate, regenerate
the schema when ``stat_data`` changed, strip metadata, check the budgets, and return either the
new variables or the untouched input with the reason.

docs/contract/mvu.md#commands: ordinary schema or missing-path rejections are
diagnostics and later commands still run; interpreter budgets and invalid syntax are fatal and
nothing of the reply commits. When the variables carry a schema declaration (``mvu_schema``), the
commands run under the schema DSL instead (:mod:`.dsl`), validated after every command.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from .cow import CowTree
from .dates import format_iso_ms, parse_iso_ms
from .extract import ALIASES, Command, ExtractIssue, extract_commands
from .jsvalue import (
    UNDEFINED,
    Json,
    clone,
    deep_equal,
    is_number,
    js_to_number,
    normalize_number,
    round12,
    stringify,
    to_js_string,
)
from .limits import (
    MAX_KEY_CHARS,
    MAX_STATE_DEPTH,
    MAX_STATE_NODES,
    MAX_STEPS_PER_REPLY,
    Budget,
    MvuBudgetError,
    MvuFatalError,
    check_variables,
    state_bytes,
)
from .native_schema import (
    TemplateMismatch,
    apply_template,
    build_schema,
    empty_schema,
    generate_schema,
    lodash_merge,
    schema_for_path,
    strip_metadata,
)
from .paths import PROTOTYPE_KEYS, array_index, cast_path, path_fix, unsafe_segment
from .results import Change, Diagnostic, UpdateResult
from .values import parse_command_value, trim_quotes_and_backslashes

# The result types and the per-state check live below both this engine and the schema DSL
# (which builds the same results); they stay importable from here, where callers look first.
__all__ = [
    "Change",
    "Diagnostic",
    "UpdateResult",
    "apply_commands",
    "apply_greeting",
    "apply_reply",
    "check_variables",
    "js_to_number",
    "with_display_data",
]


class _Reject(Exception):
    """A command is rejected: record a diagnostic and continue with the next command."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _reason_suffix(reason: str) -> str:
    return f"({reason})" if reason else ""


def _pointer(segments: Sequence[str]) -> str:
    return "".join("/" + s.replace("~", "~0").replace("/", "~1") for s in segments)


def _is_vwd(value: Json) -> bool:
    """MVU's structural value-with-description test used by ``set``."""
    return (
        isinstance(value, list)
        and len(value) == 2
        and isinstance(value[1], str)
        and not isinstance(value[0], list)
    )


def _finite_json(value: Json) -> Json:
    """The JSON form of a command value.

    Rejects a bare ``undefined``, non-finite numbers and prototype-style keys anywhere inside
    (a JSON ``{"__proto__": ...}`` member would become a prototype write in JavaScript readers).
    """
    if value is UNDEFINED:
        raise _Reject("MVU_INVALID_VALUE", "the value is undefined")
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, float) and not math.isfinite(node):
            raise _Reject(
                "MVU_NOT_FINITE",
                "the value is not a finite number (NaN/Infinity cannot be stored as JSON)",
            )
        if isinstance(node, dict):
            bad = PROTOTYPE_KEYS.intersection(node)
            if bad:
                raise _Reject(
                    "MVU_UNSAFE_PATH", f"the value holds the reserved key {sorted(bad)[0]!r}"
                )
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return _drop_undefined(value)


def _drop_undefined(value: Json) -> Json:
    if isinstance(value, dict):
        return {k: _drop_undefined(v) for k, v in value.items() if v is not UNDEFINED}
    if isinstance(value, list):
        return [None if v is UNDEFINED else _drop_undefined(v) for v in value]
    return value


def _frozen(value: Json) -> Json:
    return clone(value) if isinstance(value, dict | list) else value


class _Run:
    """State of one reply while its commands execute."""

    def __init__(self, variables: Mapping[str, Json], budget: Budget, mathjs: bool = False) -> None:
        self.budget = budget
        self.mathjs = mathjs
        stat = variables.get("stat_data", {})
        if not isinstance(stat, dict):
            raise MvuFatalError("stat_data must be an object", code="MVU_INVALID_STATE")
        self.base_stat: Json = stat
        schema = variables.get("schema")
        self.base_schema: Json = schema if isinstance(schema, dict) else empty_schema()
        self.data = CowTree(self.base_stat, budget)
        self.schema = CowTree(self.base_schema, budget)
        self.diagnostics: list[Diagnostic] = []
        self.changes: list[Change] = []
        self.delta: dict[str, Json] = {}

    # ---------------------------------------------------------------- helpers
    @property
    def strict_set(self) -> bool:
        return self.schema.root.get("strictSet") is True

    @property
    def strict_template(self) -> bool:
        return self.schema.root.get("strictTemplate") is True

    @property
    def concat_template(self) -> bool:
        return self.schema.root.get("concatTemplateArray", True) is not False

    def value(self, raw: str) -> Json:
        return parse_command_value(raw, self.budget, mathjs=self.mathjs)

    def record(
        self,
        index: int,
        kind: str,
        path: str,
        segments: Sequence[str],
        old: Json,
        new: Json,
        *,
        event: bool = True,
    ) -> None:
        self.changes.append(
            Change(index, kind, path, _pointer(segments), _frozen(old), _frozen(new), event)
        )

    def note(self, segments: Sequence[str], message: str) -> None:
        """Record a delta_data entry at ``segments`` (objects only; see docs/mvu.md)."""
        node = self.delta
        for segment in segments[:-1]:
            child = node.get(segment)
            if not isinstance(child, dict):
                child = {}
                node[segment] = child
            node = child
        node[segments[-1] if segments else ""] = message

    def schema_node_writable(self, segments: Sequence[str]) -> dict[str, Json] | None:
        """The schema node for a data path, copied for writing; ``None`` when absent."""
        schema_path: list[str] = []
        node: Json = self.schema.root
        for segment in segments:
            if not isinstance(node, dict):
                return None
            if node.get("type") == "object" and isinstance(node.get("properties"), dict):
                schema_path += ["properties", segment]
                node = node["properties"].get(segment)
            elif node.get("type") == "array" and segment.isascii() and segment.isdigit():
                schema_path.append("elementType")
                node = node.get("elementType")
            else:
                return None
        if not isinstance(node, dict):
            return None
        writable = self.schema.writable(schema_path)
        assert isinstance(writable, dict)
        return writable

    # ---------------------------------------------------------------- path of a command
    def target(self, command: Command) -> tuple[list[str], str]:
        if command.segments is not None:
            segments = list(command.segments)
            path = ".".join(segments)
        else:
            path = path_fix(trim_quotes_and_backslashes(command.args[0]))
            segments = cast_path(path, self.data.root)
        bad = unsafe_segment(segments)
        if bad is not None:
            raise _Reject("MVU_UNSAFE_PATH", f"Path '{path}' addresses the reserved key {bad!r}")
        return segments, path

    # ---------------------------------------------------------------- commands
    def run(self, index: int, command: Command) -> None:
        kind = ALIASES.get(command.type, command.type)
        segments, path = self.target(command)
        if kind == "set":
            self.cmd_set(index, command, segments, path)
        elif kind == "add":
            self.cmd_add(index, command, segments, path)
        elif kind == "insert":
            self.cmd_insert(index, command, segments, path)
        elif kind == "delete":
            self.cmd_delete(index, command, segments, path)
        elif kind == "move":
            self.cmd_move(index, command, segments, path)
        else:
            raise _Reject("MVU_UNKNOWN_COMMAND", f"unknown command {command.type!r}")

    def _value_arg(self, command: Command, position: int) -> Json:
        if command.source == "json_patch":
            return command.value
        return self.value(command.args[position])

    def cmd_set(self, index: int, command: Command, segments: list[str], path: str) -> None:
        reason = _reason_suffix(command.reason)
        value = _finite_json(self._value_arg(command, len(command.args) - 1))
        if not segments:
            if not isinstance(value, dict):
                raise _Reject(
                    "MVU_TYPE_MISMATCH", "the root of stat_data can only be replaced by an object"
                )
            old = self.data.root
            self.data.replace_root(value)
            self.record(index, "set", "", [], old, value)
            self.note([], f"{_display(old)}->{_display(value)} {reason}")
            return
        if not self.data.exists(segments):
            raise _Reject(
                "MVU_PATH_NOT_FOUND",
                f"Path '{path}' does not exist in stat_data, skipping set command {reason}",
            )
        old = self.data.lookup(segments)
        if not self.strict_set and _is_vwd(old):
            old0 = old[0]
            new0 = value
            if is_number(old0) and value is not None:
                new0 = self._coerced_number(js_to_number(value), value)
            target = [*segments, "0"]
            self.data.put(target, new0)
            self.record(index, "set", path, target, old0, new0)
            self.note(segments, f"{_display(old0)}->{_display(new0)} {reason}")
            return
        new = value
        if is_number(old) and isinstance(value, str):
            new = self._coerced_number(js_to_number(value), value)
        self.data.put(segments, new)
        self.record(index, "set", path, segments, old, new)
        self.note(segments, f"{_display(old)}->{_display(new)} {reason}")

    @staticmethod
    def _coerced_number(number: float | int, original: Json) -> float | int:
        if isinstance(number, float) and not math.isfinite(number):
            raise _Reject(
                "MVU_NOT_A_NUMBER",
                f"{stringify(original)} is not a number; the field holds a number",
            )
        return normalize_number(number)

    def cmd_add(self, index: int, command: Command, segments: list[str], path: str) -> None:
        reason = _reason_suffix(command.reason)
        if not segments or not self.data.exists(segments):
            raise _Reject(
                "MVU_PATH_NOT_FOUND",
                f"Path '{path}' does not exist in stat_data, skipping add command {reason}",
            )
        current = self.data.lookup(segments)
        target = segments
        if (
            isinstance(current, list)
            and len(current) == 2
            and isinstance(current[1], str)
            and not isinstance(current[0], dict | list)
        ):
            target = [*segments, "0"]
            current = current[0]
        delta = self._value_arg(command, 1)
        raw = command.args[1]
        if is_number(current):
            if not is_number(delta) or not math.isfinite(delta):
                raise _Reject(
                    "MVU_NOT_A_NUMBER",
                    f"Delta '{raw}' is not a number, skipping add command {reason}",
                )
            new: Json = round12(current + delta)
            if not math.isfinite(new):
                raise _Reject("MVU_NOT_FINITE", f"Path '{path}' would overflow; skipping add")
        elif isinstance(current, str) and (ms := parse_iso_ms(current)) is not None:
            if not is_number(delta) or not math.isfinite(delta):
                raise _Reject(
                    "MVU_NOT_A_NUMBER",
                    f"Delta '{raw}' for Date operation is not a number, skipping add command "
                    f"{reason}",
                )
            formatted = format_iso_ms(ms + float(delta))
            if formatted is None:
                raise _Reject("MVU_DATE_RANGE", f"Path '{path}' date leaves the years 0–9999")
            new = formatted
        else:
            raise _Reject(
                "MVU_TYPE_MISMATCH",
                f"Path '{path}' value is not a date or number; skipping add command {reason}",
            )
        self.data.put(target, new)
        self.record(index, "add", path, target, current, new)
        self.note(segments, f"{stringify(current)}->{stringify(new)} {reason}")

    def cmd_insert(self, index: int, command: Command, segments: list[str], path: str) -> None:
        reason = _reason_suffix(command.reason)
        three = len(command.args) >= 3
        value = _finite_json(self._value_arg(command, 2 if three else 1))
        target = self.data.root if not segments else self.data.lookup(segments)
        if target is UNDEFINED or not (target is None or isinstance(target, dict | list)):
            kind = "undefined" if target is UNDEFINED else _typeof(target)
            raise _Reject(
                "MVU_PATH_NOT_FOUND" if target is UNDEFINED else "MVU_TYPE_MISMATCH",
                f"Cannot assign into path '{path}' because it holds a primitive value "
                f"({kind}). Operation skipped. {reason}",
            )
        if target is None:
            # MVU turns a null target into a container, kept even if the insert then fails.
            target = [] if (not three and isinstance(value, list)) else {}
            self.data.put(segments, target)
        node = schema_for_path(self.schema.root, segments)
        if isinstance(target, list):
            if (
                node is not None
                and node.get("type") == "array"
                and node.get("extensible") is not True
            ):
                raise _Reject(
                    "MVU_SCHEMA_VIOLATION",
                    "SCHEMA VIOLATION: Cannot assign elements into non-extensible array at path "
                    f"'{path}'. {reason}",
                )
            self._insert_into_list(index, command, segments, path, value, three, node, reason)
            return
        assert isinstance(target, dict)
        if not three:
            if (
                node is not None
                and node.get("type") == "object"
                and node.get("extensible") is False
            ):
                raise _Reject(
                    "MVU_SCHEMA_VIOLATION",
                    "SCHEMA VIOLATION: Cannot merge data into non-extensible object at path "
                    f"'{path}'. {reason}",
                )
            if not isinstance(value, dict):
                what = "array" if isinstance(value, list) else "non-object"
                raise _Reject("MVU_TYPE_MISMATCH", f"Cannot merge {what} into object at '{path}'")
            self._merge_into_object(index, segments, path, value, reason)
            return
        key = self._key_arg(command)
        if is_number(key):
            key = to_js_string(normalize_number(key))
        elif not isinstance(key, str):
            key = to_js_string(key)
        if key in PROTOTYPE_KEYS:
            raise _Reject("MVU_UNSAFE_PATH", f"key {key!r} is reserved")
        props = node.get("properties") if node is not None else None
        if (
            node is not None
            and node.get("type") == "object"
            and node.get("extensible") is False
            and not (isinstance(props, dict) and key in props)
        ):
            raise _Reject(
                "MVU_SCHEMA_VIOLATION",
                f"SCHEMA VIOLATION: Cannot assign new key '{key}' into non-extensible object at "
                f"path '{path}'. {reason}",
            )
        template = node.get("template") if node is not None else None
        value = self._templated(value, template)
        old = target.get(key, UNDEFINED)
        stored = strip_metadata(value, self.budget)
        self.data.put([*segments, key], stored)
        self._schema_child(segments, key, value)
        self.record(index, "insert", path, [*segments, key], old, stored)
        self.note(
            segments,
            f"ASSIGNED key '{key}' with value {stringify(stored)} into object '{path}' {reason}",
        )

    def _key_arg(self, command: Command) -> Json:
        if command.source == "json_patch":
            return command.key
        return self.value(command.args[1])

    def _templated(self, value: Json, template: Json) -> Json:
        try:
            return apply_template(
                value,
                template,
                strict_array_cast=self.strict_template,
                concat=self.concat_template,
            )
        except TemplateMismatch:
            # MVU's own text, quirk included: any value that is not an array is an "object".
            shape = "array" if isinstance(template, list) else "object"
            given = "array" if isinstance(value, list) else "object"
            self.diagnostics.append(
                Diagnostic(
                    "MVU_TEMPLATE_MISMATCH",
                    f"Template type mismatch: template is {shape}, but value is {given}. "
                    "Skipping template merge.",
                    severity="warning",
                )
            )
            return value

    def _insert_into_list(
        self,
        index: int,
        command: Command,
        segments: list[str],
        path: str,
        value: Json,
        three: bool,
        node: dict[str, Json] | None,
        reason: str,
    ) -> None:
        template = node.get("template") if node is not None else None
        container = self.data.writable(segments)
        assert isinstance(container, list)
        if not three:
            value = self._templated(value, template)
            stored = strip_metadata(value, self.budget)
            position = len(container)
            container.append(self.data.adopt(stored))
            message = f"ASSIGNED {stringify(stored)} into array '{path}' {reason}"
        else:
            key = self._key_arg(command)
            if is_number(key) or key == "-":
                if key == "-":
                    position = len(container)
                else:
                    number = float(key)
                    if not math.isfinite(number) or not number.is_integer():
                        raise _Reject("MVU_INVALID_INDEX", f"index {stringify(key)} is not whole")
                    position = int(number)
                    if position < 0:
                        position = max(0, len(container) + position)
                    position = min(position, len(container))
                value = self._templated(value, template)
                stored = strip_metadata(value, self.budget)
                container.insert(position, self.data.adopt(stored))
                where = "tail" if key == "-" or position == len(container) - 1 else str(position)
                message = f"ASSIGNED {stringify(stored)} into '{path}' at index {where} {reason}"
            else:
                text_key = key if isinstance(key, str) else to_js_string(key)
                found = array_index(text_key)
                if found is None or found >= len(container):
                    raise _Reject(
                        "MVU_UNSAFE_PATH",
                        f"key {text_key!r} is not an element index of array '{path}'",
                    )
                position = found
                value = self._templated(value, template)
                stored = strip_metadata(value, self.budget)
                container[position] = self.data.adopt(stored)
                message = (
                    f"ASSIGNED key '{text_key}' with value {stringify(stored)} into object "
                    f"'{path}' {reason}"
                )
        self._schema_element(segments, container, value, position)
        self.record(index, "insert", path, [*segments, str(position)], UNDEFINED, stored)
        self.note(segments, message)

    def _merge_into_object(
        self, index: int, segments: list[str], path: str, value: dict[str, Json], reason: str
    ) -> None:
        for key in value:
            if key in PROTOTYPE_KEYS:
                raise _Reject("MVU_UNSAFE_PATH", f"key {key!r} is reserved")
        current = self.data.lookup(segments)
        # Schema nodes come from the merged value with its metadata; the stored value has none.
        preview = lodash_merge(current, value)
        self._cow_merge(segments, strip_metadata(value, self.budget))
        for key in value:
            self._schema_child(segments, key, preview[key])
        self.record(index, "insert", path, segments, UNDEFINED, value)
        self.note(segments, f"MERGED object {stringify(value)} into object '{path}' {reason}")

    def _cow_merge(self, segments: list[str], source: Json) -> None:
        """lodash ``merge`` of a fresh ``source`` into the container at ``segments``."""
        target = self.data.writable(segments)
        pairs = source.items() if isinstance(source, dict) else enumerate(source)
        for key, item in pairs:
            self.budget.charge()
            segment = str(key)
            if isinstance(target, dict):
                current = target.get(segment, UNDEFINED)
            else:
                current = target[key] if key < len(target) else UNDEFINED
            if (
                isinstance(current, dict | list)
                and isinstance(item, dict | list)
                and isinstance(current, dict) == isinstance(item, dict)
            ):
                self._cow_merge([*segments, segment], item)
                target = self.data.writable(segments)
                continue
            fresh = self.data.adopt(clone(item))
            if isinstance(target, dict):
                target[segment] = fresh
            elif key < len(target):
                target[key] = fresh
            else:
                target.append(fresh)

    def _schema_child(self, segments: list[str], key: str, value: Json) -> None:
        node = self.schema_node_writable(segments)
        if node is None or node.get("type") != "object":
            return
        props = node.get("properties")
        if not isinstance(props, dict):
            return
        props = dict(props)
        node["properties"] = props
        old_child = props.get(key)
        recursive = node.get("recursiveExtensible") is True and node.get("extensible") is not False
        child = generate_schema(value, old_child, recursive, self.budget)
        required = node.get("extensible") is not True
        if isinstance(old_child, dict) and isinstance(old_child.get("required"), bool):
            required = bool(old_child["required"])
        child["required"] = required
        props[key] = child

    def _schema_element(
        self, segments: list[str], container: list[Json], value: Json, position: int
    ) -> None:
        node = self.schema_node_writable(segments)
        if node is None or node.get("type") != "array":
            return
        element = node.get("elementType")
        if position == 0 or not isinstance(element, dict) or element.get("type") == "any":
            recursive = node.get("recursiveExtensible") is True and node.get("extensible") is True
            node["elementType"] = generate_schema(
                value if position == 0 else container[0], element, recursive, self.budget
            )

    def cmd_delete(self, index: int, command: Command, segments: list[str], path: str) -> None:
        reason = _reason_suffix(command.reason)
        missing = _Reject("MVU_PATH_NOT_FOUND", f"undefined Path: {path} in _.remove command")
        if len(command.args) < 2 and segments:
            last = segments[-1]
            parent = self.data.lookup(segments[:-1])
            if isinstance(parent, list) and last.isascii() and last.isdigit():
                # MVU's fast path: removing an element by its index path skips the schema.
                position = int(last)
                if position >= len(parent):
                    raise missing
                container = self.data.writable(segments[:-1])
                old = container.pop(position)
                self.record(index, "delete", ".".join(segments[:-1]), segments, old, UNDEFINED)
                return
        if len(command.args) >= 2:
            if not self.data.exists(segments):
                raise missing
            container_segments = segments
            key: Json = self._value_arg(command, 1)
        else:
            if not segments:
                raise _Reject("MVU_INVALID_PATH", "the root of stat_data cannot be removed")
            if not self.data.exists(segments):
                raise missing
            if segments[-1] == "":
                # MVU takes the last path part as the key only when it is not empty.
                raise _Reject(
                    "MVU_INVALID_PATH",
                    f"Could not determine target for deletion for command on path '{path}' "
                    f"{reason}",
                )
            container_segments = segments[:-1]
            key = segments[-1]
        container = self.data.lookup(container_segments)
        container_path = (
            ".".join(container_segments)
            if command.source == "json_patch"
            else (path if len(command.args) >= 2 else ".".join(container_segments))
        )
        node = schema_for_path(self.schema.root, container_segments)
        failed = _Reject("MVU_NOT_FOUND", f"Failed to execute remove on '{path}'")
        if isinstance(container, list):
            if (
                node is not None
                and node.get("type") == "array"
                and node.get("extensible") is not True
            ):
                raise _Reject(
                    "MVU_SCHEMA_VIOLATION",
                    "SCHEMA VIOLATION: Cannot remove element from non-extensible array at path "
                    f"'{container_path}'. {reason}",
                )
            if is_number(key):
                number = float(key)
                if not number.is_integer() or not 0 <= number < len(container):
                    raise failed
                position = int(number)
            else:
                position = next(
                    (i for i, item in enumerate(container) if deep_equal(item, key)), -1
                )
                if position < 0:
                    raise failed
            writable = self.data.writable(container_segments)
            old = writable.pop(position)
            self.record(
                index,
                "delete",
                container_path,
                [*container_segments, str(position)],
                old,
                UNDEFINED,
            )
            self.note(container_segments, f"REMOVED item from '{container_path}' {reason}")
            return
        if not isinstance(container, dict):
            if len(command.args) >= 2:
                raise _Reject(
                    "MVU_TYPE_MISMATCH",
                    f"Cannot remove from path '{path}' because it is not an array or object. "
                    f"Skipping command. {reason}",
                )
            raise failed
        if is_number(key):
            raise _Reject(
                "MVU_UNSAFE_KEY",
                f"removing an object entry by position ({stringify(key)}) is not supported; "
                "name the key",
            )
        key_text = key if isinstance(key, str) else to_js_string(key)
        if key_text in PROTOTYPE_KEYS:
            raise _Reject("MVU_UNSAFE_PATH", f"key {key_text!r} is reserved")
        props = (
            node.get("properties") if node is not None and node.get("type") == "object" else None
        )
        child = props.get(key_text) if isinstance(props, dict) else None
        if isinstance(child, dict) and child.get("required") is True:
            raise _Reject(
                "MVU_SCHEMA_VIOLATION",
                f"SCHEMA VIOLATION: Cannot remove required key '{key_text}' from path "
                f"'{container_path}'. {reason}",
            )
        if key_text not in container:
            raise failed
        writable = self.data.writable(container_segments)
        old = writable.pop(key_text)
        self.record(
            index,
            "delete",
            path,
            [*container_segments, key_text],
            old,
            UNDEFINED,
            event=len(command.args) < 2,
        )
        if len(command.args) >= 2:
            self.note(
                container_segments,
                f"REMOVED key '{key_text}' from object '{container_path}' {reason}",
            )
        else:
            self.note(segments, f"REMOVED path '{path}' {reason}")

    def cmd_move(self, index: int, command: Command, segments: list[str], path: str) -> None:
        source = list(command.from_segments or [])
        bad = unsafe_segment(source)
        if bad is not None:
            raise _Reject("MVU_UNSAFE_PATH", f"move source addresses the reserved key {bad!r}")
        if not source or not self.data.exists(source):
            raise _Reject("MVU_PATH_NOT_FOUND", f"move source '{'.'.join(source)}' does not exist")
        if not segments:
            raise _Reject("MVU_INVALID_PATH", "cannot move onto the root of stat_data")
        if segments[: len(source)] == source:
            raise _Reject("MVU_INVALID_PATH", "cannot move a value into itself")
        # A moved value is copied so that untouched containers never change position (the
        # schema reuse and the incremental checks rely on it).
        value = self.data.adopt(clone(self.data.lookup(source)))
        # Check both ends before touching anything: a move is one command.
        src_parent = self.data.lookup(source[:-1])
        src_node = schema_for_path(self.schema.root, source[:-1])
        if isinstance(src_parent, list):
            if (
                src_node is not None
                and src_node.get("type") == "array"
                and src_node.get("extensible") is not True
            ):
                raise _Reject("MVU_SCHEMA_VIOLATION", "move source array is not extensible")
        else:
            props = src_node.get("properties") if src_node is not None else None
            child = props.get(source[-1]) if isinstance(props, dict) else None
            if isinstance(child, dict) and child.get("required") is True:
                raise _Reject("MVU_SCHEMA_VIOLATION", f"move source '{source[-1]}' is required")
        dst_parent = self.data.lookup(segments[:-1])
        dst_node = schema_for_path(self.schema.root, segments[:-1])
        last = segments[-1]
        if isinstance(dst_parent, list):
            if (
                dst_node is not None
                and dst_node.get("type") == "array"
                and dst_node.get("extensible") is not True
            ):
                raise _Reject("MVU_SCHEMA_VIOLATION", "move target array is not extensible")
            position = len(dst_parent) if last == "-" else array_index(last)
            if position is None or position > len(dst_parent):
                raise _Reject("MVU_INVALID_INDEX", f"move target index {last!r} is out of range")
        elif isinstance(dst_parent, dict):
            if last in PROTOTYPE_KEYS:
                raise _Reject("MVU_UNSAFE_PATH", f"key {last!r} is reserved")
            props = dst_node.get("properties") if dst_node is not None else None
            if (
                dst_node is not None
                and dst_node.get("type") == "object"
                and dst_node.get("extensible") is False
                and not (isinstance(props, dict) and last in props)
            ):
                raise _Reject("MVU_SCHEMA_VIOLATION", f"move target key '{last}' is not allowed")
        else:
            raise _Reject("MVU_PATH_NOT_FOUND", f"move target parent of '{path}' does not exist")
        src_container = self.data.writable(source[:-1])
        if isinstance(src_container, list):
            src_index = array_index(source[-1])
            assert src_index is not None
            src_container.pop(src_index)
        else:
            src_container.pop(source[-1])
        dst_container = self.data.writable(segments[:-1])
        if isinstance(dst_container, list):
            position = len(dst_container) if last == "-" else array_index(last)
            assert position is not None
            dst_container.insert(min(position, len(dst_container)), value)
        else:
            dst_container[last] = value
        self.record(index, "move", path, segments, UNDEFINED, value)


def _typeof(value: Json) -> str:
    if value is None or isinstance(value, dict | list):
        return "object"
    if isinstance(value, bool):
        return "boolean"
    if is_number(value):
        return "number"
    return "string"


def _display(value: Json) -> str:
    """MVU's ``set`` display: JSON with outer quotes and backslashes stripped."""
    text = stringify(value)
    return trim_quotes_and_backslashes(text) if isinstance(value, str) else text


def _check_candidate(tree: CowTree, budget: Budget) -> None:
    """Structure limits for what a reply wrote: every container the candidate owns.

    Untouched containers are parts of the committed input and keep their position (moves
    copy), so they already satisfy the limits; only new or copied containers are walked.
    """
    stack: list[tuple[Json, int]] = [(tree.root, 1)]
    nodes = 0
    while stack:
        node, depth = stack.pop()
        budget.charge()
        if depth > MAX_STATE_DEPTH:
            raise MvuBudgetError(
                f"stat_data nests deeper than {MAX_STATE_DEPTH}", code="STRUCTURE_TOO_DEEP"
            )
        children = node.items() if isinstance(node, dict) else enumerate(node)
        for key, child in children:
            nodes += 1
            if isinstance(key, str) and len(key) > MAX_KEY_CHARS:
                raise MvuBudgetError(
                    f"an object key is longer than {MAX_KEY_CHARS} characters",
                    code="STRUCTURE_KEY_TOO_LONG",
                )
            if isinstance(child, dict | list) and tree.is_owned(child):
                stack.append((child, depth + 1))
    if nodes > MAX_STATE_NODES:
        raise MvuBudgetError(
            f"a reply wrote more than {MAX_STATE_NODES} nodes", code="STRUCTURE_TOO_MANY_NODES"
        )


def apply_commands(
    variables: Mapping[str, Json],
    commands: Sequence[Command],
    *,
    budget: Budget | None = None,
    extract_issues: Sequence[ExtractIssue] = (),
    mathjs: bool = False,
) -> UpdateResult:
    """Run already-extracted ``commands`` (e.g. after a command processor filtered them).

    ``mathjs=True``: the command values of an interpreter version 3 instance (native mode; schema
    mode never evaluates arithmetic)."""
    budget = budget if budget is not None else Budget(MAX_STEPS_PER_REPLY)
    commands = list(commands)
    diagnostics = [
        Diagnostic(issue.code, issue.message, severity="warning") for issue in extract_issues
    ]
    if _uses_dsl(variables):
        from .dsl.engine import apply_dsl_commands

        return apply_dsl_commands(variables, commands, budget=budget, diagnostics=diagnostics)
    try:
        run = _Run(variables, budget, mathjs)
        for index, command in enumerate(commands):
            try:
                run.run(index, command)
            except _Reject as rejection:
                run.diagnostics.append(
                    Diagnostic(rejection.code, rejection.message, index, command.full_match)
                )
        result_stat = run.data.root
        modified = result_stat is not run.base_stat and not deep_equal(run.base_stat, result_stat)
        out = dict(variables)
        if modified:
            _check_candidate(run.data, budget)

            def untouched(container: Json) -> bool:
                return not run.data.is_owned(container)

            out["schema"] = build_schema(result_stat, run.schema.root, budget, untouched)
            out["stat_data"] = strip_metadata(result_stat, budget, untouched)
        else:
            out["stat_data"] = run.base_stat
            out["schema"] = run.base_schema
        out["delta_data"] = run.delta
        out.pop("display_data", None)
        size = state_bytes(out)
    except MvuFatalError as fatal:
        return UpdateResult(
            variables=dict(variables),
            modified=False,
            commands=commands,
            diagnostics=diagnostics,
            fatal=fatal,
            steps=budget.used,
        )
    return UpdateResult(
        variables=out,
        modified=modified,
        commands=commands,
        diagnostics=diagnostics + run.diagnostics,
        changes=run.changes,
        steps=budget.used,
        state_bytes=size,
    )


def _uses_dsl(variables: Mapping[str, Json]) -> bool:
    descriptor = variables.get("mvu_schema")
    return isinstance(descriptor, dict) and "source" in descriptor


def apply_reply(variables: Mapping[str, Json], text: str, *, mathjs: bool = False) -> UpdateResult:
    """Extract the commands of one reply and apply them to ``variables`` (pure).

    ``variables`` must be a committed variables object — from :func:`initialize_variables`,
    :func:`initialize_with_schema` or an earlier result — whose ``schema`` was generated from its
    ``stat_data`` and whose ``stat_data`` holds no metadata: parts no command touches are reused
    as they are (content, schema nodes and budget checks), which is what makes a reply cost the
    paths it writes rather than the size of the state.

    On a fatal error (budget, invalid JSON Patch syntax) ``result.fatal`` is set and
    ``result.variables`` is the input unchanged: nothing of the reply commits.
    """
    budget = Budget(MAX_STEPS_PER_REPLY)
    issues: list[ExtractIssue] = []
    try:
        commands = extract_commands(text, budget, issues)
    except MvuFatalError as fatal:
        return UpdateResult(
            variables=dict(variables), modified=False, commands=[], fatal=fatal, steps=budget.used
        )
    return apply_commands(variables, commands, budget=budget, extract_issues=issues, mathjs=mathjs)


def apply_greeting(
    variables: Mapping[str, Json], text: str, *, mathjs: bool = False
) -> UpdateResult:
    """Apply a greeting's opening updates strictly (docs/contract/mvu-cards.md#opening-snapshot).

    Only ``<UpdateVariable>`` envelopes and JSON Patch blocks count, and any rejected command
    rejects the whole opening: the result is fatal with code ``MVU_OPENING_REJECTED`` and the
    diagnostics say why, instead of silently skipping changes.
    """
    budget = Budget(MAX_STEPS_PER_REPLY)
    issues: list[ExtractIssue] = []
    try:
        commands = extract_commands(text, budget, issues, envelopes_only=True)
    except MvuFatalError as fatal:
        return UpdateResult(
            variables=dict(variables), modified=False, commands=[], fatal=fatal, steps=budget.used
        )
    result = apply_commands(
        variables, commands, budget=budget, extract_issues=issues, mathjs=mathjs
    )
    rejected = [d for d in result.diagnostics if d.severity == "error"]
    if result.fatal is None and rejected:
        first = rejected[0]
        return UpdateResult(
            variables=dict(variables),
            modified=False,
            commands=commands,
            diagnostics=result.diagnostics,
            fatal=MvuFatalError(
                f"opening update rejected: {first.message}", code="MVU_OPENING_REJECTED"
            ),
            steps=result.steps,
        )
    return result


def with_display_data(variables: Mapping[str, Json]) -> dict[str, Json]:
    """A read view with MVU's ``display_data`` (a result copy of ``stat_data``).

    ``display_data`` is derived, so it is not stored (it would double the state against the
    2 MiB budget); readers that expect it (status-bar scripts) get it from this view. The copy
    shares structure with ``stat_data``: treat it as read-only.
    """
    view = dict(variables)
    view["display_data"] = view.get("stat_data", {})
    return view
