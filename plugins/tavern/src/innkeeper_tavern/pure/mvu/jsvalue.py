"""JSON values with the JavaScript details MVU relies on.

State is plain JSON: ``dict`` (insertion-ordered, string keys), ``list``, ``str``, ``int``/``float``
(one JS number type; ``bool`` is never a number), ``bool`` and ``None``. While a command is being
evaluated a value may also be :data:`UNDEFINED` or a non-finite float; neither can be committed
(see ``engine``), exactly as JSON cannot hold them.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any, Final, TypeAlias

Json: TypeAlias = Any
"""A JSON-compatible value (kept as ``Any``: recursive aliases cost more than they catch here)."""

#: Largest integer a JS number holds exactly.
MAX_SAFE_INTEGER: Final = 2**53 - 1


class _Undefined:
    """JavaScript ``undefined``: distinct from ``None`` (JSON ``null``)."""

    _instance: _Undefined | None = None

    def __new__(cls) -> _Undefined:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNDEFINED"

    def __bool__(self) -> bool:
        return False


UNDEFINED: Final = _Undefined()


def is_number(value: object) -> bool:
    """True for a JS number (``int``/``float`` but never ``bool``)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def normalize_number(value: float | int) -> float | int:
    """Return an ``int`` for an integral finite number in the safe range, else the float.

    JS has one number type; Python keeps ``70`` and ``70.0`` apart in JSON output. ``-0.0`` stays
    a float so its sign survives.
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if abs(value) <= MAX_SAFE_INTEGER else float(value)
    if math.isfinite(value) and value.is_integer() and abs(value) <= MAX_SAFE_INTEGER:
        if value == 0 and math.copysign(1.0, value) < 0:
            return value
        return int(value)
    return value


def round12(value: float | int) -> float | int:
    """Round to 12 significant digits, as MVU does for mathjs results and ``add``."""
    if not math.isfinite(value) or value == 0:
        return value
    return normalize_number(float(f"{value:.12g}"))


def number_to_string(value: float | int) -> str:
    """``Number.prototype.toString()`` (ECMAScript Number::toString, radix 10)."""
    if isinstance(value, int) and not isinstance(value, bool):
        if abs(value) < 10**21:
            return str(value)
        value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    digits_tuple = Decimal(repr(abs(value))).normalize().as_tuple()
    digits = "".join(str(d) for d in digits_tuple.digits)
    k = len(digits)
    exponent = digits_tuple.exponent
    assert isinstance(exponent, int)
    n = exponent + k  # value = 0.digits * 10**n
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * (-n) + digits
    e = n - 1
    exp = f"e{'+' if e >= 0 else '-'}{abs(e)}"
    if k == 1:
        return sign + digits + exp
    return sign + digits[0] + "." + digits[1:] + exp


def _quote(text: str) -> str:
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\b":
            out.append("\\b")
        elif ch == "\f":
            out.append("\\f")
        elif code < 0x20 or 0xD800 <= code <= 0xDFFF:
            out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def stringify(value: Json) -> str:
    """``JSON.stringify(value)`` (compact). ``undefined`` at the top gives ``"undefined"``."""
    if value is UNDEFINED:
        return "undefined"
    parts: list[str] = []
    _stringify_into(value, parts)
    return "".join(parts)


def _stringify_into(value: Json, out: list[str]) -> None:
    # Iterative enough for bounded state: depth is limited by MAX_STATE_DEPTH upstream.
    if value is None or value is UNDEFINED:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(_quote(value))
    elif isinstance(value, int | float):
        out.append(number_to_string(value) if math.isfinite(value) else "null")
    elif isinstance(value, list):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _stringify_into(item, out)
        out.append("]")
    elif isinstance(value, dict):
        out.append("{")
        first = True
        for key, item in value.items():
            if item is UNDEFINED:
                continue
            if not first:
                out.append(",")
            first = False
            out.append(_quote(str(key)))
            out.append(":")
            _stringify_into(item, out)
        out.append("}")
    else:  # pragma: no cover - only JSON values reach here
        raise TypeError(f"not a JSON value: {type(value).__name__}")


def to_js_string(value: Json) -> str:
    """``String(value)`` for JSON values (arrays join with commas, objects are opaque)."""
    if value is UNDEFINED:
        return "undefined"
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return number_to_string(value)
    if isinstance(value, list):
        return ",".join("" if v is None or v is UNDEFINED else to_js_string(v) for v in value)
    return "[object Object]"


def deep_equal(a: Json, b: Json) -> bool:
    """lodash ``isEqual`` for JSON values: numbers by value, ``bool`` never equals a number."""
    if a is b:
        return True
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if is_number(a) and is_number(b):
        if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
            return True
        return bool(a == b)
    if isinstance(a, dict) and isinstance(b, dict):
        if len(a) != len(b):
            return False
        return all(key in b and deep_equal(value, b[key]) for key, value in a.items())
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(deep_equal(x, y) for x, y in zip(a, b, strict=True))
    if type(a) is not type(b):
        return False
    return bool(a == b)


def clone(value: Json) -> Json:
    """Deep copy of a JSON value (faster than ``copy.deepcopy``; no memo needed for trees)."""
    if isinstance(value, dict):
        return {k: clone(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clone(v) for v in value]
    return value


def to_json_value(value: Json) -> Json:
    """The value ``JSON.parse(JSON.stringify(value))`` would give: drops ``undefined`` members,
    turns ``undefined`` array items and non-finite numbers into ``null``."""
    if value is UNDEFINED:
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): to_json_value(v) for k, v in value.items() if v is not UNDEFINED}
    if isinstance(value, list):
        return [to_json_value(v) for v in value]
    return value


def js_type(value: Json) -> str:
    """The JS type name used in diagnostics (``array`` and ``null`` split out of ``object``)."""
    if value is UNDEFINED:
        return "undefined"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def js_to_number(value: Json) -> float | int:
    """JavaScript ``Number(value)`` for JSON values."""
    if value is None:
        return 0
    if value is True:
        return 1
    if value is False:
        return 0
    if is_number(value):
        return value  # type: ignore[no-any-return]
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return 0
        lowered = text.lower()
        try:
            if lowered.startswith(("0x", "0o", "0b")) and len(text) > 2:
                return normalize_number(int(text[2:], {"x": 16, "o": 8, "b": 2}[lowered[1]]))
            if text in ("Infinity", "+Infinity"):
                return math.inf
            if text == "-Infinity":
                return -math.inf
            if any(c not in "0123456789+-.eE" for c in text):
                return math.nan
            return normalize_number(float(text))
        except ValueError:
            return math.nan
    if isinstance(value, list):
        if not value:
            return 0
        if len(value) == 1 and not isinstance(value[0], dict | list):
            return js_to_number(to_js_string(value[0]) if value[0] is not None else "")
        return math.nan
    return math.nan
