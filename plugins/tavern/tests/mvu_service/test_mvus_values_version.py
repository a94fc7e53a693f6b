"""New instances evaluate command values with interpreter version 3 (mathjs parity); an instance
stored before keeps version 2 across turns."""

from __future__ import annotations

import msgspec

from .conftest import Mvu


async def test_new_instances_use_version_3_and_stored_ones_keep_version_2(mvu: Mvu) -> None:
    card = await mvu.card()
    session = await mvu.new_session(card)
    state_id = (await mvu.state(session))["id"]
    service = mvu.service
    assert service.document.ledger.states[state_id].interpreter_version == 3
    await mvu.turn(session, "_.set('mood', [1, 2; 3, 4]);_.set('hp', x = 5);")
    stat = await mvu.stat(session)
    assert (stat["mood"], stat["hp"]) == ("[[1, 2], [3, 4]]", 5)

    # An instance written before version 3 existed (no field on disk) reads as version 2.
    doc = service.document
    old = msgspec.structs.replace(doc.ledger.states[state_id], interpreter_version=2)
    ledger = msgspec.structs.replace(doc.ledger, states={**doc.ledger.states, state_id: old})
    await service._commit(msgspec.structs.replace(doc, ledger=ledger))
    await mvu.turn(session, "_.set('mood', [1, 2; 3, 4]);_.set('hp', x = 6);")
    stat = await mvu.stat(session)
    assert stat["mood"] == [1, "2; 3", 4]  # version 2 read it as YAML, as before
    assert stat["hp"] == 5  # 'x = 6' is text: a number field refuses it
