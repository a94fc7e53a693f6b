"""Schema-declaration mode: compiling a declaration and running commands under it.

A variables object opts in with ``mvu_schema: {mvuSchema: 1, interpreterVersion: 1|2,
source}`` (docs/contract/mvu-dsl.md#schema-confirmation). The source is the
card's declaration script; it is parsed (:mod:`.syntax`) and interpreted (:mod:`.interp`), never
executed as JavaScript, and must register exactly one schema with ``registerMvuSchema``.

Interpreter version 3 (new declarations) adds object/array destructuring, the lodash subset of
:mod:`.lodash` and the exact import aliases of local capability contract v1
(:mod:`.capabilities`); versions 1 and 2 keep their parsing, imports and behaviour.

Commands follow MVU's zod mode (docs/mvu.md#schema-declarations): each command runs on a private
candidate, the *whole* candidate is validated, and the parsed output (with transforms) becomes the
state; a rejected command changes nothing and later commands still run. Interpreter version 2
lets ``set``/``insert`` create missing paths (insert tries an object, then an array); version 1
keeps the earlier path rules (the path must exist).
"""

from __future__ import annotations

import hashlib
import math
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from innkeeper_tavern.pure.formats.guards import StructureLimitError, check_structure
from innkeeper_tavern.pure.mvu.cow import CowTree
from innkeeper_tavern.pure.mvu.jsvalue import (
    UNDEFINED,
    Json,
    clone,
    deep_equal,
    is_number,
    js_to_number,
    to_js_string,
)
from innkeeper_tavern.pure.mvu.limits import (
    STATE_LIMITS,
    Budget,
    MvuBudgetError,
    MvuError,
    MvuFatalError,
    MvuSyntaxError,
    check_variables,
    state_bytes,
)
from innkeeper_tavern.pure.mvu.paths import PROTOTYPE_KEYS, array_index, to_path
from innkeeper_tavern.pure.mvu.results import Change, Diagnostic, UpdateResult
from innkeeper_tavern.pure.mvu.values import parse_command_value, trim_quotes_and_backslashes

from .builtins import standard_globals
from .capabilities import BACKEND_SCHEMA_EXPORT, capability_of
from .interp import Interpreter
from .lodash import lodash_namespace
from .regex import compile_regex
from .runtime import Builtin, JsFunction, ScriptError, storable
from .syntax import Node, parse_program
from .zod import INVALID, ParseContext, ZodSchema, member_hook, z_namespace

if TYPE_CHECKING:
    from innkeeper_tavern.pure.mvu.extract import Command

#: Interpreter versions a descriptor may name (docs/contract/mvu-dsl.md#schema-confirmation).
INTERPRETER_VERSIONS: Final = (1, 2, 3)
#: The version new declarations compile to (3: destructuring and lodash, docs/mvu.md).
CURRENT_INTERPRETER_VERSION: Final = 3
#: Descriptor format version (``mvuSchema``).
DESCRIPTOR_VERSION: Final = 1
#: The MVU-zod registration helper: importing it selects the backend schema (no download).
MVU_ZOD_IMPORT: Final = (
    "https://testingcf.jsdelivr.net/gh/StageDog/tavern_resource/dist/util/mvu_zod.js"
)
#: Import sources accepted as the same helper (path suffix of the published bundle).
MVU_ZOD_SUFFIX: Final = "/util/mvu_zod.js"
#: Placeholder MVU's zod mode stores as ``schema`` ("useless, ignore").
ZOD_SCHEMA_PLACEHOLDER: Final = "没有用别管这个"
#: Path prefixes stripped in zod mode (docs/mvu.md#schema-declarations).
STRIPPED_PREFIXES: Final = ("stat_data.", "status_current_variables.")
#: Compiled declarations kept in the process-wide memo (compilation is deterministic).
COMPILE_CACHE_SIZE: Final = 64
#: Computation steps for compiling one declaration (the shared budget of
#: docs/contract/mvu-dsl.md#declarations).
MAX_COMPILE_STEPS: Final = 2_000_000


@dataclass(frozen=True, slots=True)
class CompiledSchema:
    """A compiled declaration: the registered root schema and its (frozen) interpreter.

    Immutable after compilation, so one instance may be shared: each :meth:`validate` runs on
    a fork of the interpreter with the caller's budget.
    """

    root: ZodSchema
    version: int
    sha256: str
    interp: Interpreter

    def validate(
        self, data: Json, budget: Budget, unchanged: Callable[[Any], bool] | None = None
    ) -> tuple[Json, list[dict[str, Json]]]:
        """Parse ``data``: ``(output, [])`` on success, ``(INVALID, issues)`` otherwise.

        ``unchanged(container)`` may name containers that are output of a previous
        validation with this schema; they are kept as they are.
        """
        ctx = ParseContext(self.interp.fork(budget), unchanged=unchanged)
        try:
            out = self.root.parse(data, [], ctx)
        except ScriptError as exc:
            return INVALID, [{"code": "runtime", "path": [], "message": str(exc)}]
        except RecursionError as exc:  # pragma: no cover - depth limits bind first
            raise MvuBudgetError("schema nested too deeply") from exc
        if out is INVALID:
            return INVALID, ctx.issues
        return out, []


_CACHE: OrderedDict[tuple[str, int], CompiledSchema] = OrderedDict()


def _schema_error(message: str) -> MvuSyntaxError:
    return MvuSyntaxError(message, code="MVU_SCHEMA_UNSUPPORTED")


def compile_declaration(source: str, version: int = CURRENT_INTERPRETER_VERSION) -> CompiledSchema:
    """Compile a declaration script. Raises :class:`MvuSyntaxError` (or a budget error).

    Accepted top level: imports of the MVU-zod helper, ``const``/``let``/``function``
    declarations, and the registration call — bare, or inside a ``$(() => ...)`` wrapper that
    contains only that call.
    """
    if version not in INTERPRETER_VERSIONS:
        raise _schema_error(f"unknown interpreter version {version!r}")
    key = (source, version)
    cached = _CACHE.get(key)
    if cached is not None:
        _CACHE.move_to_end(key)
        return cached
    budget = Budget(MAX_COMPILE_STEPS)
    program = parse_program(source, version)
    registered: list[ZodSchema] = []
    uses_helper = False

    def regex_factory(body: str, flags: str) -> Any:
        return compile_regex(body, flags, interp.budget)

    def register(interp_: Interpreter, args: list[Any]) -> Any:
        if len(args) != 1 or not isinstance(args[0], ZodSchema):
            raise _schema_error("registerMvuSchema needs one schema")
        registered.append(args[0])
        return UNDEFINED

    def wrapper(interp_: Interpreter, args: list[Any]) -> Any:
        if len(args) != 1 or not isinstance(args[0], JsFunction):
            raise _schema_error("$() needs one function")
        body = args[0].body
        statements = body[1] if body[0] == "block" else [body]
        if len(statements) != 1 or not _is_registration(statements[0]):
            raise _schema_error("a registration wrapper may only call registerMvuSchema")
        return interp_.call(args[0], [])

    globals_ = standard_globals()
    globals_["z"] = z_namespace(version)
    if version >= 3:
        globals_["_"] = lodash_namespace()
    interp = Interpreter(globals_, budget, member_hook, regex_factory)

    def on_statement(statement: Node) -> bool:
        nonlocal uses_helper
        kind = statement[0]
        if kind == "import" and version >= 3:
            # Local capability contract v1: exact aliases only, supported forms only.
            names, module = statement[1], statement[2]
            capability = capability_of(str(module))
            if capability == "backend-schema" and names == [BACKEND_SCHEMA_EXPORT]:
                uses_helper = True
                interp.globals.names[names[0]] = [Builtin("registerMvuSchema", register), False]
                return True
            if capability == "mvu-facade" and not names:
                return True  # the MVU framework itself: nothing to declare here
            if module == "zod" and names == ["z"]:
                return True
            raise _schema_error(f"unsupported import {module!r} (local capability contract v1)")
        if kind == "import":
            names, module = statement[1], statement[2]
            if module == MVU_ZOD_IMPORT or str(module).endswith(MVU_ZOD_SUFFIX):
                uses_helper = True
                for name in names:
                    interp.globals.names[name] = [Builtin("registerMvuSchema", register), False]
                return True
            if module == "zod" and names == ["z"]:
                return True
            raise _schema_error(f"unsupported import {module!r}")
        if kind in ("let", "block"):
            return False
        if (kind == "expr" and _is_registration(statement)) or _is_wrapper(statement):
            return False
        raise _schema_error("only declarations and the schema registration are supported")

    interp.globals.names.setdefault(
        "registerMvuSchema", [Builtin("registerMvuSchema", register), False]
    )
    interp.globals.names["$"] = [Builtin("$", wrapper), False]
    try:
        interp.run_program(program, on_statement)
    except ScriptError as exc:
        raise MvuSyntaxError(
            f"schema declaration failed: {exc}", code="MVU_SCHEMA_RUNTIME"
        ) from exc
    interp.freeze()
    if len(registered) != 1:
        raise _schema_error(f"the declaration must register one schema, not {len(registered)}")
    root = registered[0]
    if version >= 2 and uses_helper:  # v3: only through a backend-schema alias
        # The helper rebuilds a directly registered root object — refinements keep the object's
        # identity — as a loose object from its shape: root strictness and root-level checks
        # are discarded (docs/contract/mvu-dsl.md#schema-confirmation).
        # Transform/default/prefault/optional/nullable/union/record/array roots are kept.
        direct = root
        while direct.kind == "refine" and direct.inner is not None:
            direct = direct.inner
        if direct.kind == "object":
            root = ZodSchema("object", shape=direct.shape, mode="loose")
    compiled = CompiledSchema(
        root, version, hashlib.sha256(source.encode("utf-8")).hexdigest(), interp
    )
    _CACHE[key] = compiled
    while len(_CACHE) > COMPILE_CACHE_SIZE:
        _CACHE.popitem(last=False)
    return compiled


def _is_registration(statement: Node) -> bool:
    expr = statement[1] if statement[0] in ("expr", "return") else None
    return (
        expr is not None
        and expr[0] == "call"
        and expr[1][0] == "name"
        and expr[1][1] == "registerMvuSchema"
    )


def _is_wrapper(statement: Node) -> bool:
    expr = statement[1] if statement[0] == "expr" else None
    return expr is not None and expr[0] == "call" and expr[1] == ("name", "$")


def descriptor_for(source: str, version: int = CURRENT_INTERPRETER_VERSION) -> dict[str, Json]:
    """The ``mvu_schema`` descriptor stored with a state (compiles once to validate it)."""
    compile_declaration(source, version)
    return {"mvuSchema": DESCRIPTOR_VERSION, "interpreterVersion": version, "source": source}


def compiled_for(variables: Mapping[str, Json]) -> CompiledSchema:
    """Compile the descriptor of ``variables`` (raises :class:`MvuSyntaxError` if invalid)."""
    descriptor = variables.get("mvu_schema")
    if not isinstance(descriptor, dict) or descriptor.get("mvuSchema") != DESCRIPTOR_VERSION:
        raise _schema_error("missing or unknown mvu_schema descriptor")
    source = descriptor.get("source")
    version = descriptor.get("interpreterVersion")
    if not isinstance(source, str) or not isinstance(version, int):
        raise _schema_error("mvu_schema needs source and interpreterVersion")
    return compile_declaration(source, version)


def _format_issues(issues: list[dict[str, Json]]) -> str:
    parts = []
    for issue in issues[:8]:
        path = issue.get("path") or []
        where = ".".join(to_js_string(p) for p in path) if isinstance(path, list) else ""
        parts.append(f"{where or '(root)'}: {issue.get('message')}")
    more = f" (+{len(issues) - 8} more)" if len(issues) > 8 else ""
    return "; ".join(parts) + more


def initialize_with_schema(
    stat_data: Mapping[str, Json], descriptor: Mapping[str, Json], budget: Budget | None = None
) -> dict[str, Json]:
    """Initialize variables under a declaration: parse ``stat_data`` and shallow-merge the
    output over it (prefaults, defaults and transforms applied). Raises :class:`MvuFatalError`
    with code ``MVU_SCHEMA_REJECTED`` when the data does not validate."""
    budget = budget if budget is not None else Budget()
    problem = storable(dict(stat_data))
    if problem is not None:
        raise MvuFatalError(f"initial variables hold {problem}", code="MVU_INVALID_VALUE")
    variables: dict[str, Json] = {"mvu_schema": dict(descriptor)}
    compiled = compiled_for(variables)
    out, issues = compiled.validate(clone(dict(stat_data)), budget)
    if out is INVALID or not isinstance(out, dict):
        raise MvuFatalError(
            f"initial variables do not match the schema: {_format_issues(issues)}",
            code="MVU_SCHEMA_REJECTED",
        )
    variables["stat_data"] = {**dict(stat_data), **out}
    variables["schema"] = ZOD_SCHEMA_PLACEHOLDER
    variables["delta_data"] = {}
    check_variables(variables)
    return variables


class _Reject(Exception):
    def __init__(self, code: str, message: str, severity: str = "error") -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.severity = severity


def _segments(command: Command, raw: str | None = None) -> list[str]:
    if command.segments is not None and raw is None:
        segments = list(command.segments)
    else:
        text = trim_quotes_and_backslashes(command.args[0] if raw is None else raw)
        for prefix in STRIPPED_PREFIXES:
            if text.startswith(prefix):
                text = text[len(prefix) :]
        segments = to_path(text) if text else []
    if segments and segments[0] == "stat_data" and command.segments is not None:
        segments = segments[1:]
    return _checked(segments)


def _checked(segments: list[str]) -> list[str]:
    for segment in segments:
        if segment in PROTOTYPE_KEYS:
            raise _Reject("MVU_UNSAFE_PATH", f"the path addresses the reserved key {segment!r}")
        if segment.startswith("_"):
            raise _Reject(
                "MVU_READ_ONLY", f"'{segment}' starts with '_' and is read-only", "warning"
            )
    return segments


class _DslRun:
    def __init__(self, compiled: CompiledSchema, stat: dict[str, Json], budget: Budget) -> None:
        self.compiled = compiled
        self.stat = stat
        self.budget = budget
        self.create = compiled.version >= 2
        self.validated = False

    def value(self, command: Command, index: int) -> Json:
        if command.source == "json_patch":
            problem = storable(command.value)
            if command.value is UNDEFINED or problem is not None:
                raise _Reject("MVU_INVALID_VALUE", f"the value holds {problem or 'undefined'}")
            return command.value
        value = parse_command_value(command.args[index], self.budget, arithmetic=False)
        if value is UNDEFINED:
            raise _Reject("MVU_INVALID_VALUE", "the value is undefined")
        problem = storable(value)
        if problem is not None:
            raise _Reject("MVU_INVALID_VALUE", f"the value holds {problem}")
        return value

    def commit(self, tree: CowTree) -> Json:
        # The first command of a reply validates everything; later ones re-parse only what
        # the command touched (containers the candidate owns) — see ZodSchema.parse.
        unchanged: Callable[[Any], bool] | None = None
        if self.validated:

            def unchanged(container: Any) -> bool:
                return not tree.is_owned(container)

        out, issues = self.compiled.validate(tree.root, self.budget, unchanged)
        if out is INVALID or not isinstance(out, dict):
            raise _Reject(
                "MVU_SCHEMA_REJECTED", f"schema rejected the change: {_format_issues(issues)}"
            )
        self.validated = True
        return out

    def ensure_parents(self, tree: CowTree, segments: list[str]) -> None:
        """Create missing containers above ``segments`` (version 2 only)."""
        for depth in range(len(segments) - 1):
            prefix = segments[: depth + 1]
            current = tree.lookup(prefix)
            if current is UNDEFINED or current is None:
                if not self.create:
                    raise _Reject("MVU_PATH_NOT_FOUND", f"path '{'.'.join(prefix)}' does not exist")
                self.put(tree, prefix, {})
            elif not isinstance(current, dict | list):
                raise _Reject("MVU_TYPE_MISMATCH", f"path '{'.'.join(prefix)}' is not a container")

    def put(self, tree: CowTree, segments: list[str], value: Json) -> None:
        parent = tree.writable(segments[:-1])
        key = segments[-1]
        if isinstance(parent, list):
            index = array_index(key)
            if index is None or index > len(parent):
                raise _Reject("MVU_INVALID_INDEX", f"'{key}' is not a dense index of the array")
            fresh = tree.adopt(value)
            if index == len(parent):
                parent.append(fresh)
            else:
                parent[index] = fresh
        else:
            parent[key] = tree.adopt(value)

    def run(self, command: Command) -> None:
        kind = {"assign": "insert", "remove": "delete", "unset": "delete"}.get(
            command.type, command.type
        )
        if kind == "delete" and command.source != "json_patch":
            joined = ".".join(trim_quotes_and_backslashes(a) for a in command.args)
            segments = _segments(command, joined)
        else:
            segments = _segments(command)
        tree = CowTree(self.stat, self.budget)
        if kind == "set":
            value = self.value(command, len(command.args) - 1)
            if not segments:
                if not isinstance(value, dict):
                    raise _Reject(
                        "MVU_TYPE_MISMATCH", "stat_data can only be replaced by an object"
                    )
                tree.replace_root(clone(value))
            else:
                if not self.create and not tree.exists(segments):
                    raise _Reject(
                        "MVU_PATH_NOT_FOUND", f"path '{'.'.join(segments)}' does not exist"
                    )
                self.ensure_parents(tree, segments)
                self.put(tree, segments, clone(value))
        elif kind == "add":
            current: Any = tree.lookup(segments) if segments else UNDEFINED
            if not is_number(current):
                raise _Reject("MVU_TYPE_MISMATCH", f"path '{'.'.join(segments)}' is not a number")
            delta = self.value(command, 1)
            number = js_to_number(delta) if not isinstance(delta, dict | list) else math.nan
            result = current + number
            if not math.isfinite(result):
                raise _Reject("MVU_NOT_A_NUMBER", f"'{command.args[1]}' is not a number")
            self.put(tree, segments, result)
        elif kind == "insert":
            self.insert(tree, command, segments)
            return
        elif kind == "delete":
            if not segments or not tree.exists(segments):
                raise _Reject("MVU_PATH_NOT_FOUND", f"path '{'.'.join(segments)}' does not exist")
            parent = tree.writable(segments[:-1])
            if isinstance(parent, list):
                index = array_index(segments[-1])
                assert index is not None
                parent.pop(index)
            else:
                parent.pop(segments[-1])
        elif kind == "move":
            source = _checked(list(command.from_segments or []))
            if not source or not tree.exists(source):
                raise _Reject("MVU_PATH_NOT_FOUND", "move source does not exist", "warning")
            moved = clone(tree.lookup(source))
            parent = tree.writable(source[:-1])
            if isinstance(parent, list):
                index = array_index(source[-1])
                assert index is not None
                parent.pop(index)
            else:
                parent.pop(source[-1])
            if not segments:
                raise _Reject("MVU_INVALID_PATH", "cannot move onto the root")
            self.ensure_parents(tree, segments)
            self.put(tree, segments, moved)
        else:
            raise _Reject("MVU_UNKNOWN_COMMAND", f"unknown command {command.type!r}")
        self.stat = self.commit(tree)

    def insert(self, tree: CowTree, command: Command, segments: list[str]) -> None:
        three = len(command.args) >= 3
        value = clone(self.value(command, 2 if three else 1))
        key: Json = UNDEFINED
        if three:
            key = command.key if command.source == "json_patch" else self.value(command, 1)
        target = tree.root if not segments else tree.lookup(segments)
        if target is not UNDEFINED and target is not None and not isinstance(target, dict | list):
            raise _Reject(
                "MVU_TYPE_MISMATCH", "the insert target holds a primitive; ignored", "warning"
            )
        if target is UNDEFINED or target is None:
            if not self.create:
                raise _Reject("MVU_PATH_NOT_FOUND", f"path '{'.'.join(segments)}' does not exist")
            # Version 2: try an object container first, then an array.
            last: _Reject | None = None
            candidates: tuple[Json, ...] = ({}, [])
            for container in candidates:
                trial = CowTree(self.stat, self.budget)
                try:
                    self.ensure_parents(trial, [*segments, "_"])
                    self.put(trial, segments, container)
                    self.place(trial, segments, key, value, three)
                    self.stat = self.commit(trial)
                    return
                except _Reject as exc:
                    last = exc
            assert last is not None
            raise last
        self.place(tree, segments, key, value, three)
        self.stat = self.commit(tree)

    def place(
        self, tree: CowTree, segments: list[str], key: Json, value: Json, three: bool
    ) -> None:
        container = tree.writable(segments)
        if isinstance(container, list):
            if not three:
                container.append(tree.adopt(value))
                return
            if key == "-":
                container.append(tree.adopt(value))
                return
            if not is_number(key) or not float(key).is_integer():
                raise _Reject("MVU_INVALID_INDEX", f"{to_js_string(key)!r} is not an array index")
            position = int(key)
            if position < 0:
                position = max(0, len(container) + position)
            container.insert(min(position, len(container)), tree.adopt(value))
            return
        if not three:
            if not isinstance(value, dict):
                raise _Reject("MVU_TYPE_MISMATCH", "only an object can be assigned into an object")
            for name in value:
                if name in PROTOTYPE_KEYS:
                    raise _Reject("MVU_UNSAFE_PATH", f"the key {name!r} is reserved")
            container.update(tree.adopt(value))
            return
        name = key if isinstance(key, str) else to_js_string(key)
        if name in PROTOTYPE_KEYS:
            raise _Reject("MVU_UNSAFE_PATH", f"the key {name!r} is reserved")
        container[name] = tree.adopt(value)


def apply_dsl_commands(
    variables: Mapping[str, Json],
    commands: Sequence[Command],
    *,
    budget: Budget,
    diagnostics: list[Diagnostic],
) -> UpdateResult:
    """Apply ``commands`` under the declared schema of ``variables`` (see module docs)."""
    commands = list(commands)
    base = variables.get("stat_data", {})
    try:
        if not isinstance(base, dict):
            raise MvuFatalError("stat_data must be an object", code="MVU_INVALID_STATE")
        compiled = compiled_for(variables)
        run = _DslRun(compiled, base, budget)
        changes: list[Change] = []
        for index, command in enumerate(commands):
            before = run.stat
            try:
                run.run(command)
            except _Reject as rejection:
                diagnostics.append(
                    Diagnostic(
                        rejection.code,
                        rejection.message,
                        index,
                        command.full_match,
                        "warning" if rejection.severity == "warning" else "error",
                    )
                )
                continue
            except ScriptError as exc:
                diagnostics.append(
                    Diagnostic("MVU_SCHEMA_RUNTIME", str(exc), index, command.full_match)
                )
                continue
            changes.append(
                Change(
                    index,
                    command.type,
                    command.args[0] if command.args else "",
                    "",
                    before,
                    run.stat,
                )
            )
        modified = not deep_equal(base, run.stat)
        out = dict(variables)
        out["stat_data"] = run.stat
        out["delta_data"] = {}
        out.pop("display_data", None)
        try:
            check_structure(run.stat, STATE_LIMITS)
        except StructureLimitError as exc:
            raise MvuBudgetError(
                f"stat_data breaks a structure limit: {exc}", code=exc.code
            ) from exc
        size = state_bytes(out)
    except (MvuFatalError, MvuError) as fatal:
        error = (
            fatal
            if isinstance(fatal, MvuFatalError)
            else MvuFatalError(str(fatal), code=fatal.code)
        )
        return UpdateResult(
            variables=dict(variables),
            modified=False,
            commands=commands,
            diagnostics=diagnostics,
            fatal=error,
            steps=budget.used,
        )
    return UpdateResult(
        variables=out,
        modified=modified,
        commands=commands,
        diagnostics=diagnostics,
        changes=changes,
        steps=budget.used,
        state_bytes=size,
    )
