"""LLM providers: ``synthetic`` (offline default) and OpenAI-compatible streaming, plus the
pure parameter-fallback helper the turn runner uses."""

from __future__ import annotations

from .factory import ProviderSettings, UnknownProvider, build_provider
from .fallback import AttemptRecord, ParameterFallback, next_fallback_params, with_params
from .openai import OpenAICompatibleProvider, OpenAIConfig, build_body, classify_http_error
from .synthetic import SyntheticProvider, SyntheticReply, default_reply_text, mvu_update_block

__all__ = [
    "AttemptRecord",
    "OpenAICompatibleProvider",
    "OpenAIConfig",
    "ParameterFallback",
    "ProviderSettings",
    "SyntheticProvider",
    "SyntheticReply",
    "UnknownProvider",
    "build_body",
    "build_provider",
    "classify_http_error",
    "default_reply_text",
    "mvu_update_block",
    "next_fallback_params",
    "with_params",
]
