"""``tavern.mvu/state``: the exact text (state + update instructions) and its version
diagnostics; the instructions' own example is a reply the engine applies."""

from __future__ import annotations

from typing import Any, cast

from innkeeper_hostapi import PluginContext
from innkeeper_hostapi.agents import TurnContext
from innkeeper_hostapi.assembly import SourceRequest
from innkeeper_hostapi.mvu import TAVERN_MVU
from innkeeper_tavern.features.prompt_sources.mvu_state import UPDATE_INSTRUCTIONS, MvuStateSource
from innkeeper_tavern.pure.mvu.engine import apply_reply


class _Service:
    def __init__(self, content: dict[str, Any]) -> None:
        self.content = content
        self.events: list[dict[str, Any]] = []

    async def resolve_request_source_state(
        self, *, scope: dict[str, Any], event: dict[str, Any], id: str | None = None
    ) -> dict[str, Any]:
        self.events.append(event)
        return {
            "id": "mvu-1",
            "adapterId": "tavern.mvu",
            "content": self.content,
            "revision": 7,
            "configRevision": None,
            "checkCurrent": lambda: True,
        }


class _Ctx:
    def __init__(self, service: _Service) -> None:
        self.service = service

    def get_optional(self, name: str) -> Any:
        return self.service if name == TAVERN_MVU else None


def _source(content: dict[str, Any]) -> tuple[MvuStateSource, _Service]:
    service = _Service(content)
    return MvuStateSource(cast(PluginContext, _Ctx(service))), service


async def test_state_and_instructions_exact_text_and_versions() -> None:
    source, service = _source({"stat_data": {"hp": 100, "$meta": {"x": 1}, "bag": ["rope"]}})
    turn = TurnContext(session_id="s1", turn=3, delegation_depth=0, claimed=(), claim_seq=None)
    [item] = await source.render(SourceRequest(session_id="s1", turn=turn))
    assert item.text == (
        "Current variables (stat_data, YAML):\nhp: 100\nbag:\n- rope\n\n" + UPDATE_INSTRUCTIONS
    )
    assert item.key == "mvu:stat_data" and item.kind == "tavern-mvu-state"
    assert item.provenance == (
        "mvu:stat_data",
        "mvu-resource:tavern.mvu/mvu-1@7",
        "mvu-config:none",
        "mvu-strategy:before_model_request/read_content+render_state_and_update_instructions"
        "+provide_to_model@1",
    )
    # Only the turn: the service itself names the request source as the read's consumer.
    assert service.events == [{"turn": 3}]
    # The versions never reach the model.
    assert "mvu-resource" not in item.text and "@7" not in item.text


async def test_no_state_at_path_sends_nothing() -> None:
    source, _ = _source({"other": {"a": 1}})
    assert await source.render(SourceRequest(session_id="s1", turn=None)) == []


def test_the_instructions_example_is_a_reply_the_engine_applies() -> None:
    state = {"stat_data": {"key": {"sub_key": "old", "number": 10, "list": ["a"], "obsolete": 1}}}
    result = apply_reply(state, "The reply.\n" + UPDATE_INSTRUCTIONS)
    assert result.committed and result.modified
    assert result.variables["stat_data"] == {
        "key": {"sub_key": "new value", "number": 5, "list": ["a", "appended item"]}
    }
