"""Zod-style schema values built by declaration scripts, and how they parse data.

This is a restricted Zod 4 semantic adapter (docs/contract/mvu-dsl.md#compatibility,
Schema row): object/array/record/enum/literal/union; string/number/boolean/any/unknown/null;
``coerce``; ``default``/``prefault``/``optional``/``nullable``; ``min``/``max``/``int``;
``strict``/``passthrough``/``strip`` (and ``z.looseObject``/``z.strictObject`` in interpreter
version 2); ``transform``; ``superRefine``/``refine`` with ``ctx.addIssue``; finite ``regex``.
Schemas are immutable: every method returns a new schema.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Final

from innkeeper_tavern.pure.mvu.jsvalue import (
    UNDEFINED,
    Json,
    clone,
    is_number,
    js_to_number,
    to_js_string,
)
from innkeeper_tavern.pure.mvu.paths import PROTOTYPE_KEYS

from .interp import Interpreter
from .regex import FiniteRegex
from .runtime import Builtin, JsFunction, Namespace, ScriptError, storable, strict_equal, truthy

INVALID: Final = object()
"""Returned by :meth:`ZodSchema.parse` when the value failed (issues were recorded)."""


@dataclass(slots=True)
class ParseContext:
    """One validation: the interpreter for functions and the collected issues."""

    interp: Interpreter
    issues: list[dict[str, Json]] = field(default_factory=list)
    #: Says that a container is part of the output of the previous successful validation
    #: (untouched by the command being checked); it is then not parsed again.
    unchanged: Callable[[Any], bool] | None = None

    def issue(self, path: list[str | int], code: str, message: str) -> object:
        self.interp.budget.charge()
        self.issues.append({"code": code, "path": list(path), "message": message})
        return INVALID


@dataclass(frozen=True, slots=True)
class ZodSchema:
    """One schema node. ``kind`` selects the parse rule; the other fields are its options."""

    kind: str
    inner: ZodSchema | None = None
    shape: tuple[tuple[str, ZodSchema], ...] = ()
    mode: str = "strip"  # objects: strip | loose | strict
    options: tuple[Any, ...] = ()  # enum values, literal value, union members
    key: ZodSchema | None = None  # records
    coerce: bool = False
    checks: tuple[tuple[str, Any, str | None], ...] = ()  # (name, argument, message)
    value: Any = UNDEFINED  # default/prefault value
    fn: Any = None  # transform/refine function
    message: str | None = None

    # ------------------------------------------------------------------ parsing
    def parse(self, value: Any, path: list[str | int], ctx: ParseContext) -> Any:
        ctx.interp.budget.charge()
        if ctx.unchanged is not None and isinstance(value, dict | list) and ctx.unchanged(value):
            # Output of the previous validation: schemas must be idempotent (MVU's own rule,
            # parse(parse(x)) == parse(x)), so parsing it again gives the same value.
            return value
        kind = self.kind
        if kind == "optional":
            assert self.inner is not None
            return UNDEFINED if value is UNDEFINED else self.inner.parse(value, path, ctx)
        if kind == "nullable":
            assert self.inner is not None
            return None if value is None else self.inner.parse(value, path, ctx)
        if kind == "default":
            assert self.inner is not None
            return clone(self.value) if value is UNDEFINED else self.inner.parse(value, path, ctx)
        if kind == "prefault":
            assert self.inner is not None
            if value is UNDEFINED:
                value = clone(self.value)
            return self.inner.parse(value, path, ctx)
        if kind == "transform":
            assert self.inner is not None
            parsed = self.inner.parse(value, path, ctx)
            if parsed is INVALID:
                return INVALID
            result = ctx.interp.call(self.fn, [clone(parsed), _refine_context(ctx, path)])
            problem = storable(result)
            if problem is not None:
                raise ScriptError(f"transform returned {problem}")
            return result
        if kind == "refine":
            assert self.inner is not None
            parsed = self.inner.parse(value, path, ctx)
            if parsed is INVALID:
                return INVALID
            before = len(ctx.issues)
            # superRefine sees a frozen JSON copy: writes cannot reach the candidate.
            outcome = ctx.interp.call(self.fn, [clone(parsed), _refine_context(ctx, path)])
            if self.mode == "refine" and not truthy(outcome):
                ctx.issue(path, "custom", self.message or "Invalid input")
            return INVALID if len(ctx.issues) > before else parsed
        return self._parse_base(value, path, ctx)

    def _parse_base(self, value: Any, path: list[str | int], ctx: ParseContext) -> Any:
        kind = self.kind
        if kind in ("any", "unknown"):
            return value
        if kind == "null":
            return value if value is None else ctx.issue(path, "invalid_type", "expected null")
        if kind == "string":
            if self.coerce:
                if isinstance(value, dict | list):
                    return ctx.issue(path, "invalid_type", "object values are not coerced")
                value = to_js_string(value)
            if not isinstance(value, str):
                return ctx.issue(path, "invalid_type", f"expected string, received {_t(value)}")
            return self._checks(value, len(value), path, ctx)
        if kind == "number":
            if self.coerce:
                if isinstance(value, dict | list):
                    return ctx.issue(path, "invalid_type", "object values are not coerced")
                value = math.nan if value is UNDEFINED else js_to_number(value)
            if not is_number(value) or not math.isfinite(value):
                return ctx.issue(path, "invalid_type", f"expected number, received {_t(value)}")
            return self._checks(value, value, path, ctx)
        if kind == "boolean":
            if self.coerce:
                if isinstance(value, dict | list):
                    return ctx.issue(path, "invalid_type", "object values are not coerced")
                value = truthy(value)
            if not isinstance(value, bool):
                return ctx.issue(path, "invalid_type", f"expected boolean, received {_t(value)}")
            return value
        if kind == "literal":
            if any(strict_equal(value, option) for option in self.options):
                return value
            return ctx.issue(path, "invalid_value", f"expected {self.options!r}")
        if kind == "enum":
            if any(strict_equal(value, option) for option in self.options):
                return value
            return ctx.issue(path, "invalid_value", f"expected one of {list(self.options)!r}")
        if kind == "union":
            for option in self.options:
                trial = ParseContext(ctx.interp, unchanged=ctx.unchanged)
                parsed = option.parse(value, path, trial)
                if parsed is not INVALID:
                    return parsed
            return ctx.issue(path, "invalid_union", "no union member matched")
        if kind == "array":
            if not isinstance(value, list):
                return ctx.issue(path, "invalid_type", f"expected array, received {_t(value)}")
            assert self.inner is not None
            out: list[Any] = []
            failed = False
            for index, item in enumerate(value):
                parsed = self.inner.parse(item, [*path, index], ctx)
                if parsed is INVALID:
                    failed = True
                else:
                    out.append(None if parsed is UNDEFINED else parsed)
            if failed:
                return INVALID
            return self._checks(out, len(out), path, ctx)
        if kind == "object":
            return self._parse_object(value, path, ctx)
        if kind == "record":
            if not isinstance(value, dict):
                return ctx.issue(path, "invalid_type", f"expected record, received {_t(value)}")
            assert self.key is not None and self.inner is not None
            out_record: dict[str, Any] = {}
            failed = False
            for key, item in value.items():
                parsed_key = self.key.parse(key, [*path, key], ctx)
                parsed = self.inner.parse(item, [*path, key], ctx)
                if parsed_key is INVALID or parsed is INVALID:
                    failed = True
                elif parsed is not UNDEFINED:
                    out_record[str(parsed_key)] = parsed
            return INVALID if failed else out_record
        raise ScriptError(f"unknown schema kind {kind}")  # pragma: no cover

    def _parse_object(self, value: Any, path: list[str | int], ctx: ParseContext) -> Any:
        if not isinstance(value, dict):
            return ctx.issue(path, "invalid_type", f"expected object, received {_t(value)}")
        out: dict[str, Any] = {}
        failed = False
        known = set()
        for key, child in self.shape:
            known.add(key)
            parsed = child.parse(value.get(key, UNDEFINED), [*path, key], ctx)
            if parsed is INVALID:
                failed = True
            elif parsed is not UNDEFINED:
                out[key] = parsed
        extras = [key for key in value if key not in known]
        if extras and self.mode == "strict":
            ctx.issue(path, "unrecognized_keys", f"unrecognized keys {extras!r}")
            failed = True
        elif self.mode == "loose":
            for key in extras:
                out[key] = value[key]
        return INVALID if failed else out

    def _checks(self, value: Any, size: Any, path: list[str | int], ctx: ParseContext) -> Any:
        for name, argument, message in self.checks:
            ok = True
            if name == "min":
                ok = size >= argument
            elif name == "max":
                ok = size <= argument
            elif name == "gt":
                ok = size > argument
            elif name == "lt":
                ok = size < argument
            elif name == "int":
                ok = float(value).is_integer()
            elif name == "regex":
                assert isinstance(argument, FiniteRegex)
                ok = argument.matches(value, ctx.interp.budget)
            if not ok:
                return ctx.issue(path, name, message or f"failed check {name}")
        return value

    # ------------------------------------------------------------------ methods
    def method(self, name: str) -> Builtin:
        """The schema method ``name`` as a built-in (raises for unsupported methods)."""
        wrappers = {
            "optional": lambda a: ZodSchema("optional", inner=self),
            "nullable": lambda a: ZodSchema("nullable", inner=self),
            "nullish": lambda a: ZodSchema("optional", inner=ZodSchema("nullable", inner=self)),
            "default": lambda a: ZodSchema("default", inner=self, value=_json_arg(a, "default")),
            "prefault": lambda a: ZodSchema("prefault", inner=self, value=_json_arg(a, "prefault")),
            "transform": lambda a: ZodSchema("transform", inner=self, fn=_fn_arg(a)),
            "superRefine": lambda a: ZodSchema("refine", inner=self, fn=_fn_arg(a), mode="super"),
            "refine": lambda a: ZodSchema(
                "refine", inner=self, fn=_fn_arg(a), mode="refine", message=_message(a, 1)
            ),
            "describe": lambda a: self,
            "meta": lambda a: self,
        }
        if name in wrappers:
            return Builtin(name, lambda interp, args: wrappers[name](args))
        if self.kind in ("string", "number", "array") and name in (
            "min", "max", "gte", "lte", "gt", "lt", "int", "positive", "nonnegative", "length",
            "regex", "nonempty",
        ):  # fmt: skip
            return Builtin(name, lambda interp, args: self._check_method(name, args))
        if self.kind == "object" and name in ("strict", "passthrough", "strip", "loose"):
            mode = {"strict": "strict", "passthrough": "loose", "loose": "loose"}.get(name, "strip")
            return Builtin(name, lambda interp, args: replace(self, mode=mode))
        if self.kind == "object" and name == "extend":
            return Builtin(name, lambda interp, args: replace(self, shape=_merge_shape(self, args)))
        raise ScriptError(f"schema method .{name}() is not supported on {self.kind}")

    def _check_method(self, name: str, args: list[Any]) -> ZodSchema:
        message = _message(args, 1)
        if name in ("int",):
            if self.kind != "number":
                raise ScriptError(".int() needs a number schema")
            return replace(self, checks=(*self.checks, ("int", None, _message(args, 0))))
        if name == "regex":
            if self.kind != "string" or not args or not isinstance(args[0], FiniteRegex):
                raise ScriptError(".regex() needs a string schema and a regex literal")
            return replace(self, checks=(*self.checks, ("regex", args[0], message)))
        if name in ("positive", "nonnegative", "nonempty"):
            check = {"positive": ("gt", 0), "nonnegative": ("min", 0), "nonempty": ("min", 1)}
            bound_name, bound = check[name]
            return replace(self, checks=(*self.checks, (bound_name, bound, _message(args, 0))))
        if not args or not is_number(args[0]):
            raise ScriptError(f".{name}() needs a number")
        bound_value = args[0]
        if name == "length":
            return replace(
                self,
                checks=(*self.checks, ("min", bound_value, message), ("max", bound_value, message)),
            )
        mapped = {"gte": "min", "lte": "max"}.get(name, name)
        return replace(self, checks=(*self.checks, (mapped, bound_value, message)))


def _t(value: Any) -> str:
    if value is UNDEFINED:
        return "undefined"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if is_number(value):
        return "number" if math.isfinite(value) else "NaN"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _json_arg(args: list[Any], method: str) -> Any:
    value = args[0] if args else UNDEFINED
    if isinstance(value, JsFunction | Builtin):
        raise ScriptError(f".{method}() with a function is not supported")
    problem = storable(value)
    if problem is not None:
        raise ScriptError(f".{method}() cannot store {problem}")
    return clone(value)


def _fn_arg(args: list[Any]) -> Any:
    if not args or not isinstance(args[0], JsFunction):
        raise ScriptError("expected a function")
    return args[0]


def _message(args: list[Any], index: int) -> str | None:
    if index < len(args):
        arg = args[index]
        if isinstance(arg, str):
            return arg
        if isinstance(arg, dict) and isinstance(arg.get("message"), str):
            return str(arg["message"])
    return None


def _shape(value: Any) -> tuple[tuple[str, ZodSchema], ...]:
    if not isinstance(value, dict):
        raise ScriptError("an object schema needs a shape object")
    items = []
    for key, child in value.items():
        if key in PROTOTYPE_KEYS:
            raise ScriptError(f"the key {key!r} is reserved")
        if not isinstance(child, ZodSchema):
            raise ScriptError(f"shape member {key!r} is not a schema")
        items.append((key, child))
    return tuple(items)


def _merge_shape(schema: ZodSchema, args: list[Any]) -> tuple[tuple[str, ZodSchema], ...]:
    merged = dict(schema.shape)
    merged.update(_shape(args[0] if args else None))
    return tuple(merged.items())


def _schema_arg(args: list[Any], index: int, what: str) -> ZodSchema:
    if index >= len(args) or not isinstance(args[index], ZodSchema):
        raise ScriptError(f"{what} needs a schema")
    value = args[index]
    assert isinstance(value, ZodSchema)
    return value


def _refine_context(ctx: ParseContext, path: list[str | int]) -> Namespace:
    def add_issue(interp: Interpreter, args: list[Any]) -> Any:
        raw = args[0] if args else {}
        if not isinstance(raw, dict):
            raise ScriptError("ctx.addIssue needs an object")
        code = raw.get("code", "custom")
        if code != "custom":
            raise ScriptError("ctx.addIssue only accepts code 'custom'")
        extra = raw.get("path", [])
        if not isinstance(extra, list) or not all(isinstance(p, str | int) for p in extra):
            raise ScriptError("ctx.addIssue path must be a list of keys")
        message = raw.get("message", "Invalid input")
        ctx.issue([*path, *extra], "custom", to_js_string(message))
        return UNDEFINED

    return Namespace("ctx", {"addIssue": Builtin("addIssue", add_issue)})


def z_namespace(version: int) -> Namespace:
    """The ``z`` object of interpreter ``version`` (1 or 2)."""

    def object_of(mode: str) -> Builtin:
        return Builtin(
            "object", lambda i, a: ZodSchema("object", shape=_shape(a[0] if a else None), mode=mode)
        )

    def enum(interp: Interpreter, args: list[Any]) -> ZodSchema:
        values = args[0] if args else None
        if isinstance(values, dict):
            values = list(values.values())
        if not isinstance(values, list) or not values:
            raise ScriptError("z.enum needs a non-empty array")
        if not all(isinstance(v, str) or is_number(v) for v in values):
            raise ScriptError("z.enum values must be strings or numbers")
        return ZodSchema("enum", options=tuple(values))

    def literal(interp: Interpreter, args: list[Any]) -> ZodSchema:
        values = args[0] if args else UNDEFINED
        options = tuple(values) if isinstance(values, list) else (values,)
        if not all(v is None or isinstance(v, str | bool | int | float) for v in options):
            raise ScriptError("z.literal needs primitive values")
        return ZodSchema("literal", options=options)

    def union(interp: Interpreter, args: list[Any]) -> ZodSchema:
        members = args[0] if args else None
        if not isinstance(members, list) or not all(isinstance(m, ZodSchema) for m in members):
            raise ScriptError("z.union needs an array of schemas")
        return ZodSchema("union", options=tuple(members))

    def record(interp: Interpreter, args: list[Any]) -> ZodSchema:
        if len(args) == 1:
            return ZodSchema(
                "record", key=ZodSchema("string"), inner=_schema_arg(args, 0, "z.record")
            )
        key = _schema_arg(args, 0, "z.record")
        if key.kind not in ("string", "enum", "literal", "union"):
            raise ScriptError("record keys must be string, enum or literal schemas")
        return ZodSchema("record", key=key, inner=_schema_arg(args, 1, "z.record"))

    def simple(kind: str, coerce: bool = False) -> Builtin:
        return Builtin(kind, lambda i, a: ZodSchema(kind, coerce=coerce))

    members: dict[str, Any] = {
        "object": object_of("strip"),
        "array": Builtin(
            "array", lambda i, a: ZodSchema("array", inner=_schema_arg(a, 0, "z.array"))
        ),
        "record": Builtin("record", record),
        "enum": Builtin("enum", enum),
        "literal": Builtin("literal", literal),
        "union": Builtin("union", union),
        "string": simple("string"),
        "number": simple("number"),
        "boolean": simple("boolean"),
        "any": simple("any"),
        "unknown": simple("unknown"),
        "null": simple("null"),
        "coerce": Namespace(
            "z.coerce",
            {
                "number": simple("number", coerce=True),
                "string": simple("string", coerce=True),
                "boolean": simple("boolean", coerce=True),
            },
        ),
    }
    if version >= 2:
        members["looseObject"] = object_of("loose")
        members["strictObject"] = object_of("strict")
    return Namespace("z", members)


def member_hook(target: Any, name: str) -> Any:
    """Resolve members of schema values for the interpreter."""
    if isinstance(target, ZodSchema):
        return target.method(name)
    raise ScriptError(f"no property {name!r}")
