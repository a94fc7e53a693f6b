"""The model connection turns use now: the configuration, the settings saved from the page, and
the provider built from both (docs/operations.md "Model settings").

The web client's Settings → Model page saves ``model-settings.json`` in the data directory
(written atomically: temp file, fsync, rename; mode 0600, since it holds the API key). Each field
given by the TOML file, an ``INNKEEPER_*`` variable or a flag is *fixed*: it wins over the saved
file, and the page is told which fields are. Saving builds the new provider first (a setting it
refuses changes nothing) and then swaps it in, so the next turn uses it without a restart; a turn
already streaming finishes on the provider it started with.

The API key is held here and in the provider only: :meth:`ModelConnection.view` reports whether
one is set and its last four characters, nothing here logs it, and :func:`redact` removes it from
any text a model server sends back.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import aiohttp
import msgspec

from innkeeper_hostapi.providers import Provider

from .factory import ProviderSettings, UnknownProvider, build_provider
from .openai import PROFILES
from .redact import KEY_TAIL, redact

__all__ = [
    "PRACTICE",
    "PROFILE_BASE_URLS",
    "PROVIDER_CHOICES",
    "SETTINGS_FILE",
    "ModelConnection",
    "SavedModelSettings",
    "SettingsRejected",
    "redact",
]

log = logging.getLogger("innkeeper.providers.connection")

#: The settings file in the data directory and its size limit.
SETTINGS_FILE: Final = "model-settings.json"
MAX_SETTINGS_BYTES: Final = 16 << 10
#: The page's "Practice (no model)" choice: the offline ``synthetic`` provider.
PRACTICE: Final = "synthetic"
#: The page's Provider choices: practice, or an OpenAI-compatible server of one profile.
PROVIDER_CHOICES: Final = (PRACTICE, *PROFILES)
#: Where each profile's server usually is (the page offers it when the URL is left empty).
PROFILE_BASE_URLS: Final[dict[str, str]] = {
    "openai": "https://api.openai.com/v1",
    "deepseek": "https://api.deepseek.com/v1",
    "openrouter": "https://openrouter.ai/api/v1",
    "vllm": "http://127.0.0.1:8000/v1",
    "llamacpp": "http://127.0.0.1:8080/v1",
}
#: Field limits (characters) of a saved setting.
MAX_URL_CHARS: Final = 2048
MAX_MODEL_CHARS: Final = 256
MAX_KEY_CHARS: Final = 4096
#: The page's field names, mapped to the ``[provider]`` settings that fix them.
FIELD_SOURCES: Final[dict[str, tuple[str, ...]]] = {
    "provider": ("kind", "profile"),
    "baseUrl": ("base_url",),
    "apiKey": ("api_key",),
    "model": ("model",),
}


class SettingsRejected(ValueError):
    """A setting the page sent is invalid: ``field`` names it, the message says why."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


class SavedModelSettings(msgspec.Struct, rename="camel", kw_only=True, forbid_unknown_fields=True):
    """``model-settings.json`` (``schemaVersion`` 1)."""

    schema_version: int = 1
    provider: str = PRACTICE
    base_url: str = ""
    model: str = ""
    api_key: str = msgspec.field(default="")

    def __repr__(self) -> str:  # the key never reaches a log line or a traceback
        return (
            f"SavedModelSettings(provider={self.provider!r}, base_url={self.base_url!r}, "
            f"model={self.model!r}, api_key={'set' if self.api_key else 'unset'})"
        )


class _Effective(msgspec.Struct, kw_only=True):
    """What :func:`build_provider` reads: the configuration with saved fields applied."""

    kind: str
    base_url: str
    api_key: str
    model: str
    timeout_seconds: float
    profile: str
    extra_parameters: list[str]
    reasoning_efforts: list[str] | None
    synthetic_reply_chars: int

    def __repr__(self) -> str:
        return f"_Effective(kind={self.kind!r}, profile={self.profile!r}, model={self.model!r})"


def check_url(value: object) -> str:
    """A model server URL: ``http(s)://…``, at most :data:`MAX_URL_CHARS`."""
    if not isinstance(value, str):
        raise SettingsRejected("baseUrl", "the model server URL must be a string")
    url = value.strip()
    if len(url) > MAX_URL_CHARS or not url.isprintable() or " " in url:
        raise SettingsRejected("baseUrl", "the model server URL is not a valid URL")
    if not url.startswith(("http://", "https://")) or len(url) < len("http://x"):
        raise SettingsRejected("baseUrl", "the model server URL must start with http(s)://")
    return url


def check_key(value: object) -> str:
    """An API key: printable, no spaces, at most :data:`MAX_KEY_CHARS`."""
    if not isinstance(value, str):
        raise SettingsRejected("apiKey", "the API key must be a string")
    key = value.strip()
    if len(key) > MAX_KEY_CHARS or not key.isprintable() or " " in key:
        raise SettingsRejected("apiKey", "the API key holds characters a key cannot have")
    return key


def _atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a 0600 temp file in the same folder, fsync, rename."""
    fd, temp = tempfile.mkstemp(prefix=".model-settings-", dir=path.parent)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    with contextlib.suppress(OSError):  # the rename is durable once the folder is synced
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


class ModelConnection:
    """The configured provider settings, the saved ones, and the provider built from them."""

    def __init__(
        self,
        config: ProviderSettings,
        session: aiohttp.ClientSession,
        *,
        data_dir: Path,
        fixed: frozenset[str] = frozenset(),
        build: Callable[[ProviderSettings, aiohttp.ClientSession], Provider] = build_provider,
    ) -> None:
        self._config = config
        self._session = session
        self._build = build
        self.file = data_dir / SETTINGS_FILE
        #: ``[provider]`` settings given by TOML, environment or flags (they win).
        self.fixed = fixed
        self._listeners: list[Callable[[Provider], None]] = []
        self.saved = self._load()
        try:
            self.effective = self._merge(self.saved)
            self.provider = self._build(self.effective, session)
        except UnknownProvider as exc:
            # A saved file the configuration cannot use (say a model the flags removed): start
            # on the configuration alone and say so, rather than refuse to start.
            log.warning("saved model settings are not used: %s", exc)
            self.effective = self._merge(None)
            self.provider = self._build(self.effective, session)

    # -- reading --------------------------------------------------------------------------------
    def _load(self) -> SavedModelSettings | None:
        try:
            with self.file.open("rb") as handle:
                raw = handle.read(MAX_SETTINGS_BYTES + 1)
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("%s cannot be read: %s", SETTINGS_FILE, exc.strerror)
            return None
        if len(raw) > MAX_SETTINGS_BYTES:
            log.warning("%s is over %d bytes; it is not used", SETTINGS_FILE, MAX_SETTINGS_BYTES)
            return None
        try:
            saved = msgspec.json.decode(raw, type=SavedModelSettings)
        except msgspec.DecodeError:
            log.warning("%s is not valid model settings; it is not used", SETTINGS_FILE)
            return None
        if saved.provider not in PROVIDER_CHOICES:
            log.warning("%s names an unknown provider; it is not used", SETTINGS_FILE)
            return None
        return saved

    def is_fixed(self, field: str) -> bool:
        """Whether the page field ``field`` is given by TOML, environment or flags."""
        return any(name in self.fixed for name in FIELD_SOURCES[field])

    def _merge(self, saved: SavedModelSettings | None) -> _Effective:
        c = self._config
        out = _Effective(
            kind=c.kind,
            base_url=c.base_url,
            api_key=c.api_key,
            model=c.model,
            timeout_seconds=c.timeout_seconds,
            profile=c.profile,
            extra_parameters=list(c.extra_parameters),
            reasoning_efforts=c.reasoning_efforts,
            synthetic_reply_chars=c.synthetic_reply_chars,
        )
        if saved is None:
            return out
        if not self.is_fixed("provider"):
            if saved.provider == PRACTICE:
                out.kind = PRACTICE
            else:
                out.kind, out.profile = "openai", saved.provider
        if not self.is_fixed("baseUrl") and saved.provider != PRACTICE:
            out.base_url = saved.base_url or PROFILE_BASE_URLS.get(out.profile, out.base_url)
        if not self.is_fixed("apiKey"):
            out.api_key = saved.api_key
        if not self.is_fixed("model"):
            out.model = saved.model
        return out

    @property
    def choice(self) -> str:
        """The page's Provider value of what serves now."""
        return PRACTICE if self.effective.kind == PRACTICE else self.effective.profile

    @property
    def practice(self) -> bool:
        """Whether the offline practice provider serves (no model is connected)."""
        return self.effective.kind == PRACTICE

    @property
    def model(self) -> str:
        """The model turns ask for (empty for practice)."""
        return self.effective.model

    @property
    def api_key(self) -> str:
        """The key in use (for ``Test connection`` with the saved key; never sent to a page)."""
        return self.effective.api_key

    def view(self) -> dict[str, Any]:
        """The ``GET /host/api/model-settings`` body: no key, only whether one is set."""
        e = self.effective
        key = e.api_key
        return {
            "ok": True,
            "provider": self.choice,
            "baseUrl": (self.saved.base_url if self.saved else "") if self.practice else e.base_url,
            "model": e.model,
            "apiKey": {"set": bool(key), "last4": key[-KEY_TAIL:] if len(key) > KEY_TAIL else None},
            "practice": self.practice,
            "overridden": [f for f in FIELD_SOURCES if self.is_fixed(f)],
            "saved": self.saved is not None,
            "choices": list(PROVIDER_CHOICES),
            "defaultBaseUrls": dict(PROFILE_BASE_URLS),
        }

    # -- saving ---------------------------------------------------------------------------------
    def listen(self, listener: Callable[[Provider], None]) -> Callable[[], None]:
        """Call ``listener(provider)`` after every change; returns its remover."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def parse(self, body: dict[str, Any]) -> SavedModelSettings:
        """The settings a ``PUT`` body asks for. ``apiKey`` absent keeps the saved key, ``""``
        or ``null`` removes it."""
        unknown = sorted(set(body) - set(FIELD_SOURCES))
        if unknown:
            raise SettingsRejected(unknown[0], f"unknown field {unknown[0]!r}")
        provider = body.get("provider")
        if provider not in PROVIDER_CHOICES:
            raise SettingsRejected("provider", f"provider must be one of {list(PROVIDER_CHOICES)}")
        assert isinstance(provider, str)
        previous = self.saved or SavedModelSettings()
        if "apiKey" not in body:
            key = previous.api_key
        elif body["apiKey"] is None:
            key = ""
        else:
            key = check_key(body["apiKey"])
        if provider == PRACTICE:
            # The server fields are kept, so switching back to that server needs no retyping.
            return SavedModelSettings(
                provider=PRACTICE, base_url=previous.base_url, model=previous.model, api_key=key
            )
        raw_url = body.get("baseUrl") or PROFILE_BASE_URLS[provider]
        url = check_url(raw_url)
        model = body.get("model", "")
        if not isinstance(model, str) or len(model) > MAX_MODEL_CHARS or not model.isprintable():
            raise SettingsRejected("model", f"the model is a name of at most {MAX_MODEL_CHARS}")
        return SavedModelSettings(provider=provider, base_url=url, model=model.strip(), api_key=key)

    def save(self, saved: SavedModelSettings) -> None:
        """Build the provider ``saved`` asks for, write the file, then use it for the next
        turn. A provider that cannot be built (no model) raises and changes nothing."""
        effective = self._merge(saved)
        if effective.kind != PRACTICE and not effective.model:
            raise SettingsRejected("model", "choose a model (Test connection lists them)")
        try:
            provider = self._build(effective, self._session)
        except UnknownProvider as exc:
            raise SettingsRejected("provider", str(exc)) from None
        _atomic_write(self.file, msgspec.json.encode(saved))
        self.saved, self.effective, self.provider = saved, effective, provider
        log.info("model settings saved: provider %s", self.choice)
        for listener in list(self._listeners):
            listener(provider)
