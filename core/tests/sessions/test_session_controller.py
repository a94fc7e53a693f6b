"""Session and workspace controllers: validation and composition over the store."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from innkeeper_core.sessions import EventStore, StoreSessionController, StoreWorkspaceController
from innkeeper_hostapi.sessions import (
    SESSION_TITLE_MAX_CHARS,
    AssistantMessage,
    InvalidSessionArgument,
    SessionController,
    TurnConflict,
    TurnEnd,
    TurnEndReason,
    TurnStart,
    UserMessage,
    WorkspaceController,
    WorkspaceInvalidPath,
    text_content,
)


def test_controllers_satisfy_the_public_protocols(store: EventStore) -> None:
    session: SessionController = StoreSessionController(store)
    workspaces: WorkspaceController = StoreWorkspaceController(store)
    assert session is not None
    assert workspaces is not None


async def test_create_rename_inspect(controller: StoreSessionController) -> None:
    header = await controller.create(title="Night market")
    renamed = await controller.rename(header.id, "Dawn market")
    assert renamed.title == "Dawn market"
    inspection = await controller.inspect(header.id)
    assert inspection.header == renamed
    assert inspection.meta.version == 4
    assert inspection.last_seq == 1  # the session/title event
    for bad in ("", "   ", "a\nb", "x" * (SESSION_TITLE_MAX_CHARS + 1)):
        with pytest.raises(InvalidSessionArgument):
            await controller.rename(header.id, bad)
    with pytest.raises(InvalidSessionArgument):
        await controller.create(title="\x00")


async def test_messages_snapshot_and_fork_conflict(controller: StoreSessionController) -> None:
    sid = (await controller.create()).id
    await controller.append(sid, TurnStart(turn=1))
    await controller.append(sid, UserMessage(message_id="u", content=text_content("hi"), turn=1))
    with pytest.raises(TurnConflict):
        await controller.fork(sid, 2)
    view = await controller.messages(sid)
    assert view.incomplete_turn
    assert [m.incomplete_turn for m in view.messages] == [True]
    await controller.append(
        sid, AssistantMessage(message_id="a", content=text_content("yo"), turn=1)
    )
    await controller.append(sid, TurnEnd(turn=1, reason=TurnEndReason(kind="completed")))
    view = await controller.messages(sid)
    assert not view.incomplete_turn
    assert view.through_seq == 4
    assert view.session_format_version == 4
    assert [m.text for m in view.messages] == ["hi", "yo"]
    child = await controller.fork(sid, 2)
    child_view = await controller.messages(child.id)
    assert child_view.incomplete_turn  # cut inside turn 1: the reply is not inherited
    assert [m.id for m in child_view.messages] == ["u"]
    page = await controller.page(sid, limit=2)
    assert [e.seq for e in page.events] == [4, 3]
    listed = await controller.list()
    assert {s.header.id for s in listed.sessions} == {sid, child.id}


async def test_workspace_controller(store: EventStore, tmp_path: Path) -> None:
    workspaces = StoreWorkspaceController(store)
    root = tmp_path / "play"
    root.mkdir()
    link = tmp_path / "link"
    os.symlink(root, link)
    ws = await workspaces.create(str(root))
    assert ws.root_path == str(root.resolve())
    assert ws.name == "play"
    assert await workspaces.create(str(link)) == ws  # same real root
    assert await workspaces.list() == (ws,)
    with pytest.raises(WorkspaceInvalidPath):
        await workspaces.create("relative/path")
    with pytest.raises(WorkspaceInvalidPath):
        await workspaces.create(str(tmp_path / "missing"))  # never created
    assert not (tmp_path / "missing").exists()
    (tmp_path / "file").write_text("x")
    with pytest.raises(WorkspaceInvalidPath):
        await workspaces.create(str(tmp_path / "file"))
    session = await StoreSessionController(store).create(workspace_id=ws.id)
    assert session.workspace_id == ws.id
