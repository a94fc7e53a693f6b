"""Turn segmentation and record building from synthetic durable events."""

from __future__ import annotations

from innkeeper_hostapi.sessions import (
    AssistantMessage,
    CallParamsRecord,
    EventData,
    HistoryPage,
    InboxSpliced,
    InboxTarget,
    MessageOrigin,
    RequestError,
    RequestHeader,
    SessionEvent,
    SystemMessage,
    TurnEnd,
    TurnEndReason,
    TurnStart,
    UserMessage,
    text_content,
)
from innkeeper_tavern.state.trace import AssemblyRecord
from innkeeper_tavern.state.trace.capture import (
    StepEvidence,
    build_record,
    place_in_system,
    read_turn,
    segment,
)


def _events(*data: EventData) -> list[SessionEvent]:
    return [SessionEvent(seq=i + 10, at=0, data=d) for i, d in enumerate(data)]


def _claim(target: InboxTarget = "next-turn") -> InboxSpliced:
    return InboxSpliced(
        op="claim", target=target, start=0, removed_count=1, turn=2, claim_event_seqs=(1,)
    )


def _header(attempt: int) -> RequestHeader:
    params = CallParamsRecord(temperature=1.0)
    return RequestHeader(
        turn=2,
        attempt=attempt,
        provider="synthetic",
        model=None,
        requested=params,
        effective=params,
    )


def test_segment_splits_steps_at_claims() -> None:
    events = _events(
        TurnStart(turn=2),
        _claim(),
        UserMessage(message_id="u1", content=text_content("hi"), turn=2),
        SystemMessage(message_id="s1", content=text_content("sys"), turn=2),
        UserMessage(
            message_id="c1",
            content=text_content("ctx"),
            origin=MessageOrigin(kind="context", producer="p"),
        ),
        _header(1),
        AssistantMessage(message_id="a1", content=text_content("ok"), turn=2),
        _claim("next-step"),
        UserMessage(
            message_id="u2",
            content=text_content("steer"),
            origin=MessageOrigin(kind="steering"),
            turn=2,
        ),
        SystemMessage(message_id="s2", content=text_content("sys2"), turn=2),
        _header(1),
        RequestError(turn=2, attempt=1, kind="server", message="boom"),
        TurnEnd(turn=2, reason=TurnEndReason(kind="error", code="PROVIDER_SERVER")),
    )
    evidence = segment(events, 2)
    first, second = evidence.steps
    assert [e.seq for e in first.inputs] == [12] and [e.seq for e in first.context] == [14]
    assert first.system is not None and first.system.seq == 13
    assert first.reply is not None and first.reply.seq == 16
    assert [e.seq for e in second.inputs] == [18] and second.reply is None
    assert [e.seq for e in second.errors] == [21]
    assert evidence.turn_end is not None and evidence.turn_end.seq == 22

    def build(step: int, found: StepEvidence, last: bool) -> AssemblyRecord:
        return build_record(
            {},
            session_id="s",
            turn=2,
            step=step,
            evidence=found,
            turn_end=evidence.turn_end,
            last_step=last,
            scan_truncated=False,
            session_format_version=4,
            captured_at="now",
        )

    ok, failed = build(1, first, False), build(2, second, True)
    assert (ok.status, failed.status) == ("sent", "failed")
    assert failed.turn_end == {"kind": "error", "code": "PROVIDER_SERVER"}
    assert ok.references.turn_end is None and failed.references.turn_end is not None
    assert ok.references.history_through_seq == 14
    assert ok.counts.context_messages == 1 and ok.counts.attempts == 1


def test_failed_profile_audit_still_records() -> None:
    # The loader's TAVERN_PROFILE_FAILED record has only identity and diagnostics.
    audit = {
        "sessionId": "s",
        "turn": 1,
        "step": 1,
        "preview": False,
        "diagnostics": [{"code": "TAVERN_PROFILE_FAILED", "message": "m", "severity": "error"}],
    }
    record = build_record(
        audit,
        session_id="s",
        turn=1,
        step=1,
        evidence=None,
        turn_end=None,
        last_step=False,
        scan_truncated=True,
        session_format_version=None,
        captured_at="now",
    )
    record = place_in_system(record, None)
    assert record.status == "not-sent" and record.sections == ()
    assert record.references.scan_truncated is True
    assert record.authority.tavern_profile_present is None
    assert record.counts.diagnostics == 1


class _Pages:
    """A fake controller paging a list of events newest first."""

    def __init__(self, events: list[SessionEvent]) -> None:
        self.events = events
        self.limits: list[int] = []

    async def page(
        self,
        session_id: str,
        *,
        before_seq: int | None = None,
        limit: int = 200,
        through_seq: int | None = None,
    ) -> HistoryPage:
        self.limits.append(limit)
        through = through_seq if through_seq is not None else self.events[-1].seq
        newest = [
            e
            for e in reversed(self.events)
            if e.seq <= through and (before_seq is None or e.seq < before_seq)
        ][:limit]
        more = bool(newest) and newest[-1].seq > self.events[0].seq
        return HistoryPage(
            events=tuple(newest),
            has_more=more,
            through_seq=through,
            next_before_seq=newest[-1].seq if more else None,
        )


async def test_read_turn_pages_back_to_the_turn_start_and_stops_at_the_bound() -> None:
    filler = [
        UserMessage(message_id=f"m{i}", content=text_content("x"), turn=1) for i in range(100)
    ]
    events = _events(TurnStart(turn=2), _claim(), *filler)
    pages = _Pages(events)
    found, truncated = await read_turn(pages, "s", 2)  # type: ignore[arg-type]
    assert not truncated and found[0].data == TurnStart(turn=2) and len(found) == 102
    assert pages.limits[:3] == [32, 64, 128]
    found, truncated = await read_turn(pages, "s", 2, max_events=50)  # type: ignore[arg-type]
    assert truncated and len(found) == 50 and found[-1].seq == events[-1].seq


def test_segment_starts_a_step_after_a_reply_that_called_tools() -> None:
    from innkeeper_hostapi.sessions import ToolCall, ToolResult

    call = ToolCall(id="c1", name="roll", arguments="{}")
    events = _events(
        TurnStart(turn=2),
        _claim(),
        UserMessage(message_id="u1", content=text_content("roll"), turn=2),
        SystemMessage(message_id="s1", content=text_content("sys"), turn=2),
        _header(1),
        AssistantMessage(message_id="a1", content=(), turn=2, tool_calls=(call,)),
        ToolResult(message_id="r1", tool_call_id="c1", name="roll", content=(), turn=2),
        SystemMessage(message_id="s2", content=text_content("sys2"), turn=2),  # no claim
        _header(1),
        AssistantMessage(message_id="a2", content=(), turn=2, tool_calls=(call,)),
        ToolResult(message_id="r2", tool_call_id="c1", name="roll", content=(), turn=2),
        _claim("next-step"),  # a tool step that also claimed steering starts at its claim
        SystemMessage(message_id="s3", content=text_content("sys3"), turn=2),
        _header(1),
        AssistantMessage(message_id="a3", content=text_content("7"), turn=2),
        TurnEnd(turn=2, reason=TurnEndReason(kind="completed")),
    )
    steps = segment(events, 2).steps
    assert [(s.claim is not None, s.system and s.system.seq) for s in steps] == [
        (True, 13),
        (False, 17),
        (True, 22),
    ]
    assert [[h.seq for h in s.headers] for s in steps] == [[14], [18], [23]]
    assert [s.reply.seq if s.reply else None for s in steps] == [15, 19, 24]


def test_segment_records_a_turn_asked_for_without_input() -> None:
    """A turn that claims nothing (a group's "Next speaker" or auto round) is still one step
    with its request and reply, so its record is "sent" and names the reply."""
    events = _events(
        TurnStart(turn=2),
        SystemMessage(message_id="s1", content=text_content("sys"), turn=2),
        _header(1),
        AssistantMessage(message_id="a1", content=text_content("hi"), turn=2),
        TurnEnd(turn=2, reason=TurnEndReason(kind="completed")),
    )
    (step,) = segment(events, 2).steps
    assert step.claim is None and not step.inputs
    assert step.system is not None and step.system.seq == 11
    assert [h.seq for h in step.headers] == [12]
    assert step.reply is not None and step.reply.seq == 13
