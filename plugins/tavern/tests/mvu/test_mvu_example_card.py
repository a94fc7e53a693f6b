"""The MagVarUpdate example card's own `[initvar]` entries (upstream/magvarupdate-example)."""

from __future__ import annotations

from pathlib import Path

from innkeeper_tavern.pure.mvu.engine import apply_reply
from innkeeper_tavern.pure.mvu.initvar import InitEntry, initialize_variables, load_initvar

EXAMPLE = (
    Path(__file__).resolve().parents[4].parent / "shared/mvu-corpus/upstream/magvarupdate-example"
)


def test_example_card_initializes_and_plays_a_turn() -> None:
    entries = [
        InitEntry("[initvar]初始变量1", (EXAMPLE / "initvar_1.yaml").read_text(encoding="utf-8")),
        InitEntry("[initvar]初始变量2", (EXAMPLE / "initvar_2.yaml").read_text(encoding="utf-8")),
        InitEntry("变量输出", (EXAMPLE / "variable_output_entry.txt").read_text(encoding="utf-8")),
    ]
    loaded = load_initvar([("理理", entries)], substitute=lambda t: t.replace("<user>", "旅人"))
    assert loaded.entries_used == [("理理", 0), ("理理", 1)]
    variables = initialize_variables(
        loaded.stat_data, initialized_lorebooks=loaded.initialized_lorebooks
    )
    stat = variables["stat_data"]
    assert stat["旅人"]["身份"] == ["新来的牧师", "随故事进展改变"]
    assert stat["时间"][0] == "09:00"  # a clock time stays a string
    reply = (
        "理抬头看向你。\n<UpdateVariable>\n<Analysis>过了一小时</Analysis>\n"
        "_.set('时间', '09:00', '10:00');//一小时后\n"
        "_.add('天数', 1);//新的一天\n"
        "_.set('旅人.当前位置', '教堂', '小镇街道');//移动\n"
        "</UpdateVariable>"
    )
    result = apply_reply(variables, reply)
    assert result.committed and not result.diagnostics
    after = result.variables["stat_data"]
    assert after["时间"] == ["10:00", stat["时间"][1]]
    assert after["天数"][0] == 1
    assert after["旅人"]["当前位置"][0] == "小镇街道"
    assert after["地点"] is stat["地点"]  # untouched parts are shared, not copied
