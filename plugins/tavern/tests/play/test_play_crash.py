"""A process killed with SIGKILL during managed writes leaves the old or the new bytes of the
document, never a torn file."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import sys
import textwrap
from pathlib import Path

import pytest

from innkeeper_tavern.features.play.schema import validate_timeline

WRITER = textwrap.dedent(
    """
    import asyncio, json, sys
    from pathlib import Path
    from innkeeper_tavern.features.play.workspace import (
        MISSING, PlayWorkspace, Binding, revision_of
    )

    def doc(i):
        # Large enough to span several writes, different in every version.
        variants = [
            {"id": f"v{i}-{j}", "sessionId": "s-1", "startEventId": j, "endEventId": j}
            for j in range(400)
        ]
        node = {"id": "n", "kind": "qa", "adoptedVariantId": f"v{i}-0", "variants": variants}
        return json.dumps({"nodes": [node]}, indent=2)

    async def main() -> None:
        root = sys.argv[1]
        ws = PlayWorkspace(Path(sys.argv[2]), lambda: None, clock=lambda: "t")
        ws.binding = Binding(root_path=root, workspace_id="w", bound_at="t", first_selected_at="t")
        revision = None
        i = 0
        while True:
            text = doc(i)
            revision = await ws.write("a/b/timeline.json", text, expected=revision)
            i += 1
            if i == 20:
                print("running", flush=True)

    asyncio.run(main())
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("delay", [0.02, 0.1, 0.4])
async def test_sigkill_mid_write_leaves_old_or_new_bytes(tmp_path: Path, delay: float) -> None:
    root = tmp_path / "root"
    root.mkdir()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", WRITER, str(root), str(tmp_path), stdout=asyncio.subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        assert (await asyncio.wait_for(proc.stdout.readline(), 60)).decode().strip() == "running"
        await asyncio.sleep(delay)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        await asyncio.wait_for(proc.wait(), timeout=30)
    assert proc.returncode == -signal.SIGKILL
    target = root / "a" / "b" / "timeline.json"
    data = target.read_bytes()
    doc = json.loads(data)  # never torn: a whole version, valid
    validate_timeline(doc)
    version = doc["nodes"][0]["adoptedVariantId"].split("-")[0][1:]
    assert int(version) >= 19
    assert all(v["id"].startswith(f"v{version}-") for v in doc["nodes"][0]["variants"])
    assert len(doc["nodes"][0]["variants"]) == 400
    assert hashlib.sha256(data).hexdigest()  # the revision of exactly these bytes
    # Leftover temps are hidden files beside the target, never the target itself.
    leftovers = [p.name for p in target.parent.iterdir() if p.name != "timeline.json"]
    assert all(name.startswith(".timeline.json.") and name.endswith(".tmp") for name in leftovers)
