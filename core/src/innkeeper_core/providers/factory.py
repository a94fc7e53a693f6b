"""Build the configured provider from host settings (``[provider]`` / ``INNKEEPER_*``)."""

from __future__ import annotations

from typing import Protocol

import aiohttp

from innkeeper_hostapi.providers import FALLBACK_PARAMETERS, ParamName, Provider

from .openai import DEFAULT_BASE_URL, OpenAICompatibleProvider, OpenAIConfig
from .synthetic import SyntheticProvider

__all__ = ["ProviderSettings", "UnknownProvider", "build_provider"]


class ProviderSettings(Protocol):
    """What the factory reads; the host's ``ProviderConfig`` matches it structurally."""

    @property
    def kind(self) -> str: ...
    @property
    def base_url(self) -> str: ...
    @property
    def api_key(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def timeout_seconds(self) -> float: ...
    @property
    def profile(self) -> str: ...
    @property
    def extra_parameters(self) -> list[str]: ...
    @property
    def reasoning_efforts(self) -> list[str] | None: ...
    @property
    def synthetic_reply_chars(self) -> int: ...


class UnknownProvider(ValueError):
    """The configured provider kind does not exist, or its settings are incomplete."""


def build_provider(settings: ProviderSettings, session: aiohttp.ClientSession) -> Provider:
    """``synthetic`` (offline default) or ``openai`` (any OpenAI-compatible server)."""
    if settings.kind == "synthetic":
        return SyntheticProvider(reply_chars=settings.synthetic_reply_chars)
    if settings.kind == "openai":
        if not settings.model:
            raise UnknownProvider("provider 'openai' needs a model (INNKEEPER_MODEL)")
        return OpenAICompatibleProvider(
            session,
            OpenAIConfig(
                model=settings.model,
                base_url=settings.base_url or DEFAULT_BASE_URL,
                api_key=settings.api_key,
                read_timeout_s=settings.timeout_seconds,
                profile=settings.profile,
                extra_parameters=_parameters(settings.extra_parameters),
                reasoning_efforts=(
                    frozenset(settings.reasoning_efforts)
                    if settings.reasoning_efforts is not None
                    else None
                ),
            ),
        )
    raise UnknownProvider(f"unknown provider kind {settings.kind!r}")


def _parameters(names: list[str]) -> frozenset[ParamName]:
    unknown = sorted(set(names) - set(FALLBACK_PARAMETERS))
    if unknown:
        raise UnknownProvider(
            f"unknown extra_parameters {unknown}; known: {', '.join(FALLBACK_PARAMETERS)}"
        )
    return frozenset(n for n in FALLBACK_PARAMETERS if n in names)
