"""The folder form of ``innkeeper import`` (called from
``innkeeper_tavern.face.cli.import_export``)."""

from __future__ import annotations

import argparse
import sys

from innkeeper_hostapi.commands import CommandEnvironment
from innkeeper_tavern.face.cli.options import backend_mode
from innkeeper_tavern.features.migration.backends import PLUGIN_ID, CommandError, open_backend
from innkeeper_tavern.features.migration.layout import scan
from innkeeper_tavern.features.migration.report import Bar, as_json, as_text
from innkeeper_tavern.features.migration.run import migrate, total_items


async def import_folder(args: argparse.Namespace, env: CommandEnvironment) -> int:
    """Import one SillyTavern user folder; the exit status of ``innkeeper import``."""
    root = args.paths[0].resolve()
    folder = scan(root)
    try:
        # Chats become sessions: with no server, the host is started in this process for them.
        backend = await open_backend(env, backend_mode(args), args.server, host=bool(folder.chats))
    except CommandError as exc:
        sys.stderr.write(f"innkeeper import: {exc}\n")
        return 1
    verb = "checking (dry run) against" if args.dry_run else "importing into"
    sys.stderr.write(f"{verb} the {backend.label}: SillyTavern folder {root}\n")
    sys.stderr.flush()
    try:
        bar = Bar(sys.stderr, total_items(folder))
        items = await migrate(
            root, backend, env.plugin_data_dir(PLUGIN_ID), dry_run=args.dry_run, bar=bar
        )
    except CommandError as exc:
        sys.stderr.write(f"innkeeper import: {exc}\n")
        return 1
    finally:
        await backend.close()
    if args.json:
        print(as_json(backend.label, items, dry_run=args.dry_run))
    else:
        print(as_text(items, dry_run=args.dry_run, verbose=args.verbose))
    return 1 if any(i.status == "refused" for i in items) else 0
