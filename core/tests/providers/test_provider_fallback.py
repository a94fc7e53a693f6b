"""Parameter fallback: one retry per omitted parameter, only for explicit parameter errors."""

from __future__ import annotations

import pytest

from innkeeper_core.providers import (
    ParameterFallback,
    SyntheticProvider,
    next_fallback_params,
    with_params,
)
from innkeeper_hostapi.providers import (
    MAX_PARAMETER_RETRIES,
    CallParams,
    ChatMessage,
    FinalMessage,
    ParamName,
    ProviderError,
    ProviderErrorKind,
    ProviderRequest,
)

FULL = CallParams(
    temperature=0.9, max_tokens=100, reasoning_effort="high", stop=("###",), extras={"top_p": 0.5}
)


def invalid(parameter: ParamName | None) -> ProviderError:
    return ProviderError("invalid-parameter", "unsupported", parameter=parameter, status=400)


def test_omits_the_named_parameter_without_mutating() -> None:
    step = next_fallback_params(invalid("temperature"), FULL, ())
    assert step is not None
    params, name = step
    assert name == "temperature"
    assert params.temperature is None
    assert params.max_tokens == 100
    assert params.extras == {"top_p": 0.5}
    assert FULL.temperature == 0.9  # untouched


@pytest.mark.parametrize("kind", ["auth", "quota", "network", "server", "invalid-request"])
def test_never_for_other_error_kinds(kind: ProviderErrorKind) -> None:
    error = ProviderError(kind, "nope", parameter="temperature")
    assert next_fallback_params(error, FULL, ()) is None


def test_never_after_output_when_aborted_or_unnamed_or_inactive_or_repeated() -> None:
    assert next_fallback_params(invalid("temperature"), FULL, (), output_started=True) is None
    assert next_fallback_params(invalid("temperature"), FULL, (), aborted=True) is None
    started = ProviderError("invalid-parameter", "x", parameter="stop", output_started=True)
    assert next_fallback_params(started, FULL, ()) is None
    assert next_fallback_params(invalid(None), FULL, ()) is None
    assert next_fallback_params(invalid("temperature"), CallParams(), ()) is None
    assert next_fallback_params(invalid("temperature"), FULL, ("temperature",)) is None
    only: tuple[ParamName, ...] = ("temperature",)
    assert next_fallback_params(invalid("stop"), FULL, (), candidates=only) is None


def test_plan_records_each_attempt_and_omits_each_parameter_once() -> None:
    plan = ParameterFallback(FULL)
    order: list[ParamName] = ["temperature", "maxTokens", "reasoningEffort", "stop"]
    for index, name in enumerate(order, start=1):
        params = plan.after_error(invalid(name))
        assert params is not None
        assert plan.omitted == tuple(order[:index])
    assert plan.params == CallParams(extras={"top_p": 0.5})
    assert plan.after_error(invalid("temperature")) is None
    assert len(plan.omitted) == len(order) <= MAX_PARAMETER_RETRIES
    assert [a.omitted for a in plan.attempts] == [tuple(order[:i]) for i in range(5)]
    assert all(a.requested == FULL for a in plan.attempts)
    assert plan.attempts[1].effective.temperature is None
    assert plan.attempts[1].effective.max_tokens == 100
    assert [a.error_parameter for a in plan.attempts] == [*order, "temperature"]


async def test_a_retry_loop_against_a_rejecting_provider() -> None:
    provider = SyntheticProvider(reject=("temperature", "stop"))
    prepared = ProviderRequest(messages=(ChatMessage(role="user", content="hi"),), params=FULL)
    plan = ParameterFallback(prepared.params)
    params: CallParams | None = plan.params
    final: FinalMessage | None = None
    while params is not None:
        try:
            items = [i async for i in provider.stream(with_params(prepared, params))]
        except ProviderError as error:
            params = plan.after_error(error, params)
            continue
        last = items[-1]
        assert isinstance(last, FinalMessage)
        final = last
        plan.record_success(last.effective)
        break
    assert final is not None
    assert plan.omitted == ("temperature", "stop")
    assert [a.error_kind for a in plan.attempts] == ["invalid-parameter", "invalid-parameter", None]
    assert plan.attempts[-1].effective.temperature is None
    assert plan.attempts[-1].effective.stop is None
    assert plan.attempts[-1].effective.max_tokens == 100
    assert prepared.params == FULL  # the prepared request was never mutated
    assert [r.params.temperature for r in provider.requests] == [0.9, None, None]
