"""The synthetic provider: deterministic default, scripting, params, errors, MVU replies."""

from __future__ import annotations

import pytest

from innkeeper_core.providers import SyntheticProvider, SyntheticReply, mvu_update_block
from innkeeper_core.providers.synthetic import MAX_RECORDED_REQUESTS
from innkeeper_hostapi.providers import (
    CallParams,
    ChatMessage,
    FinalMessage,
    ParamName,
    ProviderError,
    ProviderRequest,
    ReasoningDelta,
    StreamItem,
    TextDelta,
)


def request(text: str = "hello there", **params: object) -> ProviderRequest:
    return ProviderRequest(
        messages=(
            ChatMessage(role="system", content="You are terse."),
            ChatMessage(role="user", content=text),
        ),
        params=CallParams(**params),  # type: ignore[arg-type]
    )


async def collect(provider: SyntheticProvider, req: ProviderRequest) -> list[StreamItem]:
    return [item async for item in provider.stream(req)]


async def test_default_reply_is_deterministic_and_streams_words() -> None:
    provider = SyntheticProvider()
    first = await collect(provider, request())
    second = await collect(SyntheticProvider(), request())
    assert first == second
    deltas = [i.text for i in first if isinstance(i, TextDelta)]
    assert len(deltas) > 1
    final = first[-1]
    assert isinstance(final, FinalMessage)
    assert final.text == "".join(deltas) == "Synthetic reply to: hello there"
    assert final.finish_reason == "stop"
    assert final.usage is not None
    assert final.usage.completion_tokens == len(deltas)
    assert provider.requests == [request()]


async def test_queue_then_script_then_default() -> None:
    provider = SyntheticProvider(
        script=lambda req: (
            SyntheticReply(text="scripted") if "x" in req.messages[-1].content else None
        )
    )
    provider.enqueue("queued one", SyntheticReply(text="queued two", chunks=["queued", " two"]))
    texts = []
    for text in ("a", "b", "x", "y"):
        items = await collect(provider, request(text))
        final = items[-1]
        assert isinstance(final, FinalMessage)
        texts.append(final.text)
    assert texts == ["queued one", "queued two", "scripted", "Synthetic reply to: y"]


async def test_max_tokens_and_stop_are_honoured() -> None:
    provider = SyntheticProvider()
    provider.enqueue("one two three four five", "alpha beta END gamma")
    capped = await collect(provider, request(max_tokens=2))
    final = capped[-1]
    assert isinstance(final, FinalMessage)
    assert final.text == "one two "
    assert final.finish_reason == "length"
    stopped = await collect(provider, request(stop=("END",)))
    final = stopped[-1]
    assert isinstance(final, FinalMessage)
    assert final.text == "alpha beta "
    assert "".join(i.text for i in stopped if isinstance(i, TextDelta)) == final.text


async def test_rejected_parameter_raises_invalid_parameter() -> None:
    rejected: tuple[ParamName, ...] = ("temperature",)
    provider = SyntheticProvider(reject=rejected)
    with pytest.raises(ProviderError) as caught:
        await collect(provider, request(temperature=0.7, max_tokens=10))
    assert caught.value.kind == "invalid-parameter"
    assert caught.value.parameter == "temperature"
    assert not caught.value.output_started
    items = await collect(provider, request(max_tokens=10))  # without it: fine
    assert isinstance(items[-1], FinalMessage)


async def test_scripted_errors_before_and_after_output() -> None:
    provider = SyntheticProvider()
    provider.enqueue(
        SyntheticReply(text="never", error=ProviderError("quota", "out of credit", status=429)),
        SyntheticReply(
            text="one two three", error=ProviderError("server", "boom", status=500), error_after=2
        ),
    )
    with pytest.raises(ProviderError) as before:
        await collect(provider, request())
    assert before.value.kind == "quota"
    assert not before.value.output_started
    seen: list[str] = []

    async def consume() -> None:
        async for item in provider.stream(request()):
            if isinstance(item, TextDelta):
                seen.append(item.text)

    with pytest.raises(ProviderError) as after:
        await consume()
    assert after.value.output_started
    assert seen == ["one ", "two "]


async def test_reasoning_and_mvu_reply() -> None:
    provider = SyntheticProvider()
    provider.enqueue(
        SyntheticReply(text="ok", reasoning="thinking"),
        SyntheticReply.with_mvu("The bell rings.", {"世界.时间": "夜晚", "user.hp": 7}),
    )
    items = await collect(provider, request())
    assert items[0] == ReasoningDelta(text="thinking")
    items = await collect(provider, request())
    final = items[-1]
    assert isinstance(final, FinalMessage)
    assert final.text == (
        "The bell rings.\n<UpdateVariable>\n_.set('世界.时间', \"夜晚\");\n"
        "_.set('user.hp', 7);\n</UpdateVariable>"
    )
    with pytest.raises(ValueError, match="quotes"):
        mvu_update_block({"it's": 1})


async def test_recorded_requests_are_bounded() -> None:
    provider = SyntheticProvider()
    for i in range(MAX_RECORDED_REQUESTS + 10):
        sent = ProviderRequest(messages=(ChatMessage(role="user", content=f"hi {i}"),))
        async for _ in provider.stream(sent):
            pass
    assert len(provider.requests) == MAX_RECORDED_REQUESTS
    assert provider.requests[-1].messages[0].content == f"hi {MAX_RECORDED_REQUESTS + 9}"


async def test_reply_chars_pads_to_exactly_that_length_deterministically() -> None:
    long = SyntheticProvider(reply_chars=1_500)
    items = await collect(long, request("the door creaks"))
    text = "".join(i.text for i in items if isinstance(i, TextDelta))
    assert len(text) == 1_500 and text.startswith("Synthetic reply to: the door creaks ")
    again = "".join(
        i.text
        for i in await collect(SyntheticProvider(reply_chars=1_500), request("the door creaks"))
        if isinstance(i, TextDelta)
    )
    assert again == text  # the same request gets the same reply
    other = "".join(
        i.text for i in await collect(long, request("a different line")) if isinstance(i, TextDelta)
    )
    assert other[40:] != text[40:]  # the padding follows the user's text
    assert len(set(text.split())) > 100  # prose-like, not one word repeated
    short = await collect(SyntheticProvider(reply_chars=5), request("hello there"))
    assert "".join(i.text for i in short if isinstance(i, TextDelta)) == (
        "Synthetic reply to: hello there"
    )
