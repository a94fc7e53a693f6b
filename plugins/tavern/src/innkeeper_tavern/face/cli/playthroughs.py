"""``innkeeper playthroughs cleanup``: preview, clean and restore invalid playthroughs of the
bound play workspace (`docs/contract/play.md#cleanup`; docs/play.md "Cleanup").

Usage::

    innkeeper playthroughs cleanup [preview] [--json] [--server URL]
    innkeeper playthroughs cleanup clean ID... --scope SCOPE [--server URL]
    innkeeper playthroughs cleanup restore BACKUP_ID... --scope SCOPE [--server URL]

The command always talks to the running server (the per-path guard and the leases live there):
the one that holds the data directory's writer lock, at the address it recorded, else the
configured address. ``SCOPE`` is the ``workspaceScope`` a preview printed; mutations name 1–100
explicit ids. Exit status: 0 when every target ended ``cleaned``/``restored`` (or for a preview),
1 when a target was preserved or failed or the server refused, 2 for usage errors.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any, Final

from innkeeper_hostapi.commands import CommandEnvironment
from innkeeper_tavern.features.migration.backends import PLUGIN_ID, CommandError, OnlineBackend
from innkeeper_tavern.pure.api_paths import V2_PREFIX
from innkeeper_tavern.state.resources.lock import recorded_server

CLEANUP_PATH: Final = V2_PREFIX + "/playthrough-cleanup"


async def _connect(env: CommandEnvironment, server: str | None) -> OnlineBackend:
    candidates = [server.rstrip("/")] if server else []
    if not server:
        recorded = await asyncio.to_thread(recorded_server, env.plugin_data_dir(PLUGIN_ID))
        if recorded:
            candidates.append(recorded[0])
        candidates.append(env.base_url.rstrip("/"))
    for base_url in dict.fromkeys(candidates):
        backend = await OnlineBackend.connect(base_url)
        if backend is not None:
            return backend
    raise CommandError(
        f"no server answers at {', '.join(dict.fromkeys(candidates))}; cleanup needs the "
        "running server (start it with `innkeeper serve`)"
    )


def _out(line: str) -> None:
    sys.stdout.write(line + "\n")


def _print_preview(doc: dict[str, Any]) -> None:
    _out(f"workspaceScope: {doc['workspaceScope']}")
    items = doc.get("items", [])
    if not items:
        _out("no playthroughs")
    for item in items:
        mark = "CLEANABLE" if item["cleanable"] else "kept"
        reason = f" ({item['reason']})" if item.get("reason") else ""
        _out(f"{mark:9}  {item['id']:<40} {item['status']}{reason}  {item['path']}")
    for backup in doc.get("backups", []):
        _out(f"backup     {backup['backupId']:<40} {backup['state']}  {backup['path']}")


async def _run(args: argparse.Namespace, env: CommandEnvironment) -> int:
    backend = await _connect(env, args.server)
    try:
        if args.action == "preview":
            status, doc = await backend.request_json("GET", CLEANUP_PATH)
        else:
            body = {"action": args.action, "ids": args.ids, "workspaceScope": args.scope}
            status, doc = await backend.request_json("POST", CLEANUP_PATH, body)
    finally:
        await backend.close()
    if status != 200 or doc.get("ok") is not True:
        sys.stderr.write(f"innkeeper playthroughs cleanup: {doc.get('code')}: {doc.get('error')}\n")
        return 1
    if args.json:
        _out(json.dumps(doc, indent=2))
    elif args.action == "preview":
        _print_preview(doc)
    else:
        for result in doc["results"]:
            extra = result.get("backupId") or result.get("reason") or ""
            _out(f"{result['status']:<18} {result['id']}  {extra}")
    done = {"clean": "cleaned", "restore": "restored"}.get(args.action)
    if done and any(r["status"] != done for r in doc["results"]):
        return 1
    return 0


def playthroughs_main(argv: list[str], env: CommandEnvironment) -> int:
    """``innkeeper playthroughs cleanup …``."""
    parser = argparse.ArgumentParser(prog="innkeeper playthroughs")
    sub = parser.add_subparsers(dest="command", required=True)
    cleanup = sub.add_parser("cleanup", help="preview, clean or restore invalid playthroughs")
    cleanup.add_argument(
        "action", nargs="?", default="preview", choices=["preview", "clean", "restore"]
    )
    cleanup.add_argument("ids", nargs="*", metavar="ID")
    cleanup.add_argument("--scope", help="the workspaceScope printed by the preview")
    cleanup.add_argument("--server", metavar="URL", help="address of the running server")
    cleanup.add_argument("--json", action="store_true", help="print the server's JSON answer")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    if args.action != "preview" and (not args.ids or not args.scope):
        sys.stderr.write("innkeeper playthroughs cleanup: clean/restore need IDs and --scope\n")
        return 2
    if args.action == "preview" and args.ids:
        sys.stderr.write("innkeeper playthroughs cleanup: preview takes no ids\n")
        return 2
    try:
        return asyncio.run(_run(args, env))
    except CommandError as exc:
        sys.stderr.write(f"innkeeper playthroughs cleanup: {exc}\n")
        return 1
