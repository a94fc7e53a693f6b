"""The flags every Tavern command that reaches the library shares: ``--server``, ``--online`` /
``--offline`` (a running server or the data directory itself)."""

from __future__ import annotations

import argparse

__all__ = ["add_backend_flags", "backend_mode"]


def backend_mode(args: argparse.Namespace) -> str:
    """``online``, ``offline`` or ``auto`` (a running server if one answers), from the flags."""
    if args.online:
        return "online"
    if args.offline:
        return "offline"
    return "auto"


def add_backend_flags(parser: argparse.ArgumentParser) -> None:
    """Add ``--server URL`` and the exclusive ``--online`` / ``--offline``."""
    parser.add_argument(
        "--server",
        metavar="URL",
        help="address of a running server (default: the configured host and port)",
    )
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--online", action="store_true", help="require a running server")
    group.add_argument(
        "--offline", action="store_true", help="write the data directory (no server may run)"
    )
