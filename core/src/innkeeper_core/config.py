"""Host configuration: defaults ← TOML file ← ``INNKEEPER_*`` environment ← command-line flags.

Validated with msgspec; a bad value fails start-up with a message naming the field and source.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, Literal

import msgspec

from innkeeper_hostapi.bodies import DEFAULT_BODY_IDLE_TIMEOUT, DEFAULT_BODY_TIMEOUT

DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 8787
#: Hard ceiling for any request body (bytes); routes declare their own lower limits.
MAX_REQUEST_BODY: Final = 64 << 20
#: Requests one peer may have still sending their body: a browser opens a handful at once, a
#: stalled-body flood opens thousands (each holding a descriptor until its timeout).
DEFAULT_MAX_PENDING_BODIES: Final = 128
#: Longest ``[provider] reasoning_efforts`` entry.
MAX_REASONING_EFFORT_CHARS: Final = 64
#: Longest reply the ``synthetic`` provider can be asked to pad to (``synthetic_reply_chars``).
MAX_SYNTHETIC_REPLY_CHARS: Final = 65_536


class ConfigError(ValueError):
    """The configuration is invalid; the message says which field and where it came from."""


def default_data_dir() -> str:
    """``$XDG_DATA_HOME/innkeeper`` or ``~/.local/share/innkeeper``."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return str(Path(base) / "innkeeper")


class ProviderConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Which LLM provider turns use. ``synthetic`` is offline and deterministic."""

    kind: Literal["synthetic", "openai"] = "synthetic"
    base_url: str = "https://api.openai.com/v1"
    api_key: str = ""
    model: str = ""
    timeout_seconds: float = 120.0
    #: After an explicit invalid-parameter rejection, retry once without that parameter
    #: (``docs/contract/loader.md#parameter-fallback``).
    parameter_fallback: bool = True
    #: Which sampling parameters the server accepts: ``openai`` (the OpenAI API's own),
    #: ``deepseek``, ``openrouter``, ``vllm`` or ``llamacpp`` (docs/operations.md).
    profile: Literal["openai", "deepseek", "openrouter", "vllm", "llamacpp"] = "openai"
    #: Parameters (camelCase names, e.g. ``topK``) accepted on top of the profile.
    extra_parameters: list[str] = msgspec.field(default_factory=list)
    #: The ``reasoningEffort`` values the server takes, replacing the profile's list (an
    #: unsupported preset effort is omitted before the request; docs/operations.md).
    reasoning_efforts: list[str] | None = None
    #: ``synthetic`` only: pad every unscripted reply to this many characters with
    #: deterministic pseudo-random words (0: the short echo reply). For benchmarks that need
    #: replies as long as real roleplay ones.
    synthetic_reply_chars: int = 0
    #: Not a setting: the ``[provider]`` settings given by the TOML file, an ``INNKEEPER_*``
    #: variable or a flag, filled in by :func:`load_config`. They win over the model settings
    #: saved from the web client's Settings page (docs/operations.md "Model settings").
    fixed: list[str] = msgspec.field(default_factory=list)

    def __post_init__(self) -> None:
        if not 0 <= self.synthetic_reply_chars <= MAX_SYNTHETIC_REPLY_CHARS:
            raise msgspec.ValidationError(
                f"synthetic_reply_chars must be 0-{MAX_SYNTHETIC_REPLY_CHARS} - at "
                "`$.provider.synthetic_reply_chars`"
            )
        for value in self.reasoning_efforts or ():
            if not value or len(value) > MAX_REASONING_EFFORT_CHARS or not value.isprintable():
                raise msgspec.ValidationError(
                    f"reasoning_efforts entries must be 1-{MAX_REASONING_EFFORT_CHARS} printable "
                    "characters - at `$.provider.reasoning_efforts`"
                )


class ToolsConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Agent tools: the policy defaults of sessions and the built-in tools (``[tools]``)."""

    #: Default permission preset of a session: read-only, auto, full-access or custom.
    permission_preset: Literal["read-only", "auto", "full-access", "custom"] = "auto"
    #: Override the preset's sandbox mode (the preset becomes ``custom`` if it differs).
    sandbox_mode: Literal["read-only", "workspace-write", "danger-full-access"] | None = None
    #: Override the preset's approval policy (the preset becomes ``custom`` if it differs).
    approval_policy: Literal["untrusted", "on-request", "never"] | None = None
    #: Seconds a call waits for a person before it is refused.
    approval_timeout_s: float = 300.0
    #: Seconds one call of a tool may run (a tool may declare its own).
    call_timeout_s: float = 60.0
    #: Most requests (steps) one turn may make, tool steps included.
    max_steps: int = 16
    #: The built-in dice roller (tool ``roll`` and command ``/roll``), off by default.
    dice: bool = False

    def __post_init__(self) -> None:
        if self.approval_timeout_s <= 0 or self.call_timeout_s <= 0:
            raise msgspec.ValidationError("tools timeouts must be > 0 - at `$.tools`")
        if not 1 <= self.max_steps <= 256:
            raise msgspec.ValidationError("max_steps must be 1-256 - at `$.tools.max_steps`")
        if self.permission_preset == "custom" and (
            self.sandbox_mode is None or self.approval_policy is None
        ):
            raise msgspec.ValidationError(
                "permission_preset custom needs sandbox_mode and approval_policy - at `$.tools`"
            )


class HostConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Everything the host reads at start-up."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    data_dir: str = msgspec.field(default_factory=default_data_dir)
    reload: bool = False
    #: Entry-point names (plugin ids) never loaded.
    blocked_plugins: list[str] = msgspec.field(default_factory=list)
    #: Folders whose sub-folders are drop-in plugins (loaded as ``innkeeper_plugins.<id>``).
    plugin_dirs: list[str] = msgspec.field(default_factory=list)
    #: Extra Host-header names accepted besides localhost, 127.0.0.1 and ::1.
    allowed_hosts: list[str] = msgspec.field(default_factory=list)
    #: Seconds a reloading plugin's in-flight requests may take to finish.
    drain_seconds: float = 10.0
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    #: Seconds a request body may go without a byte (then 408 ``BODY_TIMEOUT``).
    body_idle_timeout: float = DEFAULT_BODY_IDLE_TIMEOUT
    #: Seconds a whole request body may take to arrive.
    body_timeout: float = DEFAULT_BODY_TIMEOUT
    #: Requests one peer address may have still sending their body (then 429).
    max_pending_bodies_per_peer: int = DEFAULT_MAX_PENDING_BODIES
    provider: ProviderConfig = msgspec.field(default_factory=ProviderConfig)
    tools: ToolsConfig = msgspec.field(default_factory=ToolsConfig)
    #: Per-plugin sections, ``[plugins.<id>]`` in TOML; handed to that plugin as ``ctx.config``.
    plugins: dict[str, dict[str, Any]] = msgspec.field(default_factory=dict)

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise msgspec.ValidationError("port must be between 0 and 65535 - at `$.port`")
        if not self.data_dir.strip():
            # An unset shell variable (``--data-dir "$DIR"``) would otherwise mean the cwd.
            raise msgspec.ValidationError("data_dir must not be empty - at `$.data_dir`")
        if self.drain_seconds < 0:
            raise msgspec.ValidationError("drain_seconds must be >= 0 - at `$.drain_seconds`")
        for name in ("body_idle_timeout", "body_timeout"):
            if not getattr(self, name) > 0:
                raise msgspec.ValidationError(f"{name} must be > 0 - at `$.{name}`")
        if self.max_pending_bodies_per_peer < 1:
            raise msgspec.ValidationError(
                "max_pending_bodies_per_peer must be >= 1 - at `$.max_pending_bodies_per_peer`"
            )


def _split(value: str, sep: str) -> list[str]:
    return [v.strip() for v in value.split(sep) if v.strip()]


_ENV: Final[dict[str, tuple[tuple[str, ...], Any]]] = {
    "INNKEEPER_HOST": (("host",), str),
    "INNKEEPER_PORT": (("port",), int),
    "INNKEEPER_DATA_DIR": (("data_dir",), str),
    "INNKEEPER_RELOAD": (("reload",), lambda v: v.lower() in ("1", "true", "yes", "on")),
    "INNKEEPER_BLOCKED_PLUGINS": (("blocked_plugins",), lambda v: _split(v, ",")),
    "INNKEEPER_PLUGIN_DIRS": (("plugin_dirs",), lambda v: _split(v, os.pathsep)),
    "INNKEEPER_ALLOWED_HOSTS": (("allowed_hosts",), lambda v: _split(v, ",")),
    "INNKEEPER_LOG_LEVEL": (("log_level",), str.upper),
    "INNKEEPER_BODY_IDLE_TIMEOUT": (("body_idle_timeout",), float),
    "INNKEEPER_BODY_TIMEOUT": (("body_timeout",), float),
    "INNKEEPER_MAX_PENDING_BODIES_PER_PEER": (("max_pending_bodies_per_peer",), int),
    "INNKEEPER_PROVIDER": (("provider", "kind"), str),
    "INNKEEPER_BASE_URL": (("provider", "base_url"), str),
    "INNKEEPER_API_KEY": (("provider", "api_key"), str),
    "INNKEEPER_MODEL": (("provider", "model"), str),
    "INNKEEPER_PROVIDER_PROFILE": (("provider", "profile"), str),
    "INNKEEPER_PERMISSION_PRESET": (("tools", "permission_preset"), str),
    "INNKEEPER_SANDBOX_MODE": (("tools", "sandbox_mode"), str),
    "INNKEEPER_APPROVAL_POLICY": (("tools", "approval_policy"), str),
    "INNKEEPER_DICE": (("tools", "dice"), lambda v: v.lower() in ("1", "true", "yes", "on")),
}


def _set(raw: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    node = raw
    for part in path[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[path[-1]] = value


def load_config(
    *,
    file: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> HostConfig:
    """Merge the sources and validate. ``overrides`` are flag values (dotted keys allowed)."""
    raw: dict[str, Any] = {}
    if file is not None:
        path = Path(file)
        try:
            raw = msgspec.toml.decode(path.read_bytes())
        except OSError as exc:
            raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
        except msgspec.DecodeError as exc:
            raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    environ = os.environ if env is None else env
    for name, (dest, convert) in _ENV.items():
        if name in environ:
            try:
                _set(raw, dest, convert(environ[name]))
            except ValueError:
                raise ConfigError(f"environment variable {name} has an invalid value") from None
    for key, value in (overrides or {}).items():
        if value is not None:
            _set(raw, tuple(key.split(".")), value)
    given = raw.get("provider")
    if isinstance(given, dict):
        if "fixed" in given:
            raise ConfigError("invalid configuration: provider.fixed is not a setting")
        given["fixed"] = sorted(given)
    try:
        return msgspec.convert(raw, type=HostConfig)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"invalid configuration: {exc}") from None
