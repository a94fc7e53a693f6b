"""A card built like real MVU cards: `[initvar]` in its book, an mvu_zod schema script in the
template style (interpreter version 3), the MVU framework import script and a command-processor
script. A turn runs through all of them."""

from __future__ import annotations

import json

from .conftest import Mvu

INITVAR = """
世界:
  时间: '08:00'
物品栏:
  面包: {数量: 2, 描述: 'fresh'}
角色:
  艾拉: {好感度: 10}
"""

SCHEMA = r"""
import { registerMvuSchema } from 'https://testingcf.jsdelivr.net/gh/StageDog/tavern_resource/dist/util/mvu_zod.js';

const clamp100 = n => _.clamp(Number(n) || 0, 0, 100);

export const Schema = z.object({
  世界: z.object({ 时间: z.string().prefault('08:00') }).prefault({}),
  物品栏: z.record(z.string(), z.object({
    数量: z.coerce.number().prefault(1),
    描述: z.string().prefault(''),
  })).transform(d => _.pickBy(d, ({ 数量 }) => 数量 > 0)).prefault({}),
  角色: z.record(z.string(), z.object({
    好感度: z.coerce.number().transform(clamp100).prefault(0),
  })).prefault({}),
});

$(() => {
  registerMvuSchema(Schema);
});
"""

FRAMEWORK = (
    "import 'https://testingcf.jsdelivr.net/gh/MagicalAstrogy/MagVarUpdate/artifact/bundle.js';"
)

#: Real cards fix the model's typos in a COMMAND_PARSED listener; this one drops writes to the
#: clock (the card keeps time itself) and keeps the rest.
PROCESSOR = r"""
import 'https://testingcf.jsdelivr.net/gh/MagicalAstrogy/MagVarUpdate/artifact/bundle.js';
await waitGlobalInitialized('Mvu');
eventOn(Mvu.events.COMMAND_PARSED, (variables, commands) => {
  for (let i = commands.length - 1; i >= 0; i--) {
    if (commands[i].args[0].includes('世界.时间')) commands.splice(i, 1);
  }
});
"""


def real_card() -> bytes:
    scripts = [
        {"type": "script", "name": "MVU", "id": "mvu", "enabled": True, "content": FRAMEWORK},
        {"type": "script", "name": "变量结构", "id": "zod", "enabled": True, "content": SCHEMA},
        {"type": "script", "name": "修正", "id": "fix", "enabled": True, "content": PROCESSOR},
    ]
    card = {
        "spec": "chara_card_v3",
        "spec_version": "3.0",
        "data": {
            "name": "艾拉",
            "first_mes": "早安。",
            "character_book": {
                "name": "艾拉的书",
                "entries": [
                    {
                        "keys": [],
                        "content": INITVAR,
                        "comment": "[initvar]变量初始化勿开",
                        "enabled": False,
                        "insertion_order": 1,
                    }
                ],
            },
            "extensions": {"tavern_helper": {"scripts": scripts}},
        },
    }
    return json.dumps(card, ensure_ascii=False).encode()


async def test_a_turn_runs_through_schema_and_processor(mvu: Mvu) -> None:
    imported = await mvu.resources.import_character(real_card(), "card.json")
    session = await mvu.new_session(imported.record.id)
    state = await mvu.state(session)
    assert state["content"]["mvu_schema"]["interpreterVersion"] == 3
    assert state["content"]["stat_data"]["物品栏"] == {"面包": {"数量": 2, "描述": "fresh"}}
    reply = (
        "艾拉笑了。\n<UpdateVariable>\n"
        "_.set('世界.时间', '09:00');//the model moves the clock\n"
        "_.set('物品栏.面包.数量', 0);//eaten\n"
        "_.set('角色.艾拉.好感度', 150);//a lot\n"
        "</UpdateVariable>"
    )
    await mvu.turn(session, reply)
    stat = await mvu.stat(session)
    assert stat == {"世界": {"时间": "08:00"}, "物品栏": {}, "角色": {"艾拉": {"好感度": 100}}}
    record = await mvu.state(session)
    assert record["commandProcessor"]["source"].endswith("/script:修正")
