"""Parameter fallback after an explicit invalid-parameter rejection.

``docs/contract/loader.md#parameter-fallback``: after an explicit
invalid/unsupported parameter rejection, before any output and while not aborted, the host may
retry once per parameter with that override omitted (``temperature``, ``maxTokens``,
``reasoningEffort``, ``stop``), at most four retries. Authentication, quota and network errors
are never retried this way. The prepared request is never mutated, and each attempt's requested
and effective parameters are recorded.

This module is pure: the turn runner owns the loop and calls :meth:`ParameterFallback.after_error`.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import msgspec

from innkeeper_hostapi.providers import (
    FALLBACK_PARAMETERS,
    MAX_PARAMETER_RETRIES,
    CallParams,
    ParamName,
    ProviderError,
    ProviderRequest,
)

__all__ = ["AttemptRecord", "ParameterFallback", "next_fallback_params", "with_params"]


class AttemptRecord(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """One provider attempt: what was requested, what was sent, what was omitted, the outcome."""

    attempt: int
    requested: CallParams
    effective: CallParams
    omitted: tuple[ParamName, ...]
    error_kind: str | None = None
    error_parameter: str | None = None
    status: int | None = None


def next_fallback_params(
    error: ProviderError,
    requested: CallParams,
    omitted: Sequence[ParamName],
    *,
    output_started: bool = False,
    aborted: bool = False,
    candidates: Collection[ParamName] = FALLBACK_PARAMETERS,
) -> tuple[CallParams, ParamName] | None:
    """The parameters of the next attempt, or ``None`` when no fallback applies.

    A fallback applies only to ``kind == "invalid-parameter"`` naming a parameter that is a
    candidate (an active override of ``requested``), not yet omitted, before any output and while
    not aborted, with fewer than :data:`MAX_PARAMETER_RETRIES` omissions so far. ``requested``
    is never changed: the result is a new :class:`CallParams` with every omission applied.
    """
    if error.kind != "invalid-parameter" or output_started or error.output_started or aborted:
        return None
    name = error.parameter
    if name is None or name not in candidates or name in omitted:
        return None
    if len(omitted) >= MAX_PARAMETER_RETRIES or requested.get(name) is None:
        return None
    effective = requested
    for each in (*omitted, name):
        effective = effective.without(each)
    return effective, name


def with_params(request: ProviderRequest, params: CallParams) -> ProviderRequest:
    """A copy of ``request`` with ``params`` (the prepared request stays untouched)."""
    return msgspec.structs.replace(request, params=params)


class ParameterFallback:
    """Tracks the attempts of one prepared request.

    Usage::

        fallback = ParameterFallback(request.params)
        params = fallback.params
        while True:
            try:
                ... stream with_params(request, params) ...
                fallback.record_success(params)
                break
            except ProviderError as error:
                params = fallback.after_error(error, params, output_started=..., aborted=...)
                if params is None:
                    raise
    """

    def __init__(
        self, requested: CallParams, *, candidates: Collection[ParamName] = FALLBACK_PARAMETERS
    ) -> None:
        self.requested = requested
        self.candidates = tuple(candidates)
        self.omitted: tuple[ParamName, ...] = ()
        self.attempts: list[AttemptRecord] = []

    @property
    def params(self) -> CallParams:
        """Parameters of the next attempt (``requested`` minus every omission so far)."""
        params = self.requested
        for name in self.omitted:
            params = params.without(name)
        return params

    def record_success(self, effective: CallParams | None = None) -> AttemptRecord:
        """Record a successful attempt; ``effective`` defaults to :attr:`params`."""
        record = AttemptRecord(
            attempt=len(self.attempts) + 1,
            requested=self.requested,
            effective=effective if effective is not None else self.params,
            omitted=self.omitted,
        )
        self.attempts.append(record)
        return record

    def after_error(
        self,
        error: ProviderError,
        effective: CallParams | None = None,
        *,
        output_started: bool = False,
        aborted: bool = False,
    ) -> CallParams | None:
        """Record a failed attempt and return the next attempt's parameters, or ``None``."""
        self.attempts.append(
            AttemptRecord(
                attempt=len(self.attempts) + 1,
                requested=self.requested,
                effective=effective if effective is not None else self.params,
                omitted=self.omitted,
                error_kind=error.kind,
                error_parameter=error.parameter,
                status=error.status,
            )
        )
        step = next_fallback_params(
            error,
            self.requested,
            self.omitted,
            output_started=output_started,
            aborted=aborted,
            candidates=self.candidates,
        )
        if step is None:
            return None
        params, name = step
        self.omitted = (*self.omitted, name)
        return params
