"""The ``innkeeper`` command: ``serve`` and ``plugins``."""

from __future__ import annotations

import argparse
import gc
import logging
import os
import shlex
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Final

from aiohttp import web

import innkeeper_core
from innkeeper_core.app import MODEL_CONNECTION, create_app
from innkeeper_core.config import ConfigError, HostConfig, load_config
from innkeeper_core.local_host import start_local_host
from innkeeper_core.plugins.sources import discover_drop_ins, discover_entry_points
from innkeeper_core.providers.connection import ModelConnection
from innkeeper_core.providers.factory import ProviderSettings
from innkeeper_hostapi.commands import COMMAND_GROUP, CommandEnvironment, CommandMain, HostClient

SUPERVISED_ENV = "INNKEEPER_SUPERVISED"
#: The collector's thresholds a server runs with once its plugins are loaded (generation 0's
#: allocations before a collection, then how many younger collections trigger an older one).
#: Python's defaults, ``(700, 10, 10)``, collect a few times per turn and walk the whole start-up
#: heap (plugins, caches, compiled books) at every full collection; `docs/operations.md#running`.
SERVE_GC_THRESHOLDS: Final = (20_000, 20, 100)
RESTART_PATHS_ENV = "INNKEEPER_RESTART_PATHS"


def _parser() -> argparse.ArgumentParser:
    extra = ", ".join(sorted(_plugin_commands()))
    parser = argparse.ArgumentParser(
        prog="innkeeper",
        description="Innkeeper: a host for SillyTavern-compatible roleplay.",
        epilog=f"commands from plugins: {extra}" if extra else None,
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--config", metavar="FILE", help="TOML configuration file")
        p.add_argument("--data-dir", help="data directory (default: under the user's data home)")
        p.add_argument(
            "--plugin-dir",
            action="append",
            dest="plugin_dirs",
            metavar="DIR",
            help="folder of drop-in plugins (repeatable)",
        )
        p.add_argument(
            "--block",
            action="append",
            dest="blocked_plugins",
            metavar="ID",
            help="do not load this plugin (repeatable)",
        )

    serve = sub.add_parser("serve", help="run the server")
    serve.add_argument("--host", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port to bind (default 8787)")
    serve.add_argument(
        "--reload",
        action="store_true",
        default=None,
        help="reload plugins when their source changes; restart when the host's changes",
    )
    serve.add_argument(
        "--body-idle-timeout",
        type=float,
        metavar="SECONDS",
        help="refuse a request body that stalls this long (default 10)",
    )
    serve.add_argument(
        "--body-timeout",
        type=float,
        metavar="SECONDS",
        help="refuse a request body that takes longer than this in total (default 60)",
    )
    serve.add_argument(
        "--max-pending-bodies-per-peer",
        type=int,
        metavar="N",
        help="requests one peer may have still sending their body (default 128)",
    )
    common(serve)
    plugins = sub.add_parser("plugins", help="list the plugins the host would load")
    common(plugins)
    return parser


def _config(args: argparse.Namespace) -> HostConfig:
    overrides: dict[str, Any] = {
        "data_dir": args.data_dir,
        "plugin_dirs": args.plugin_dirs,
        "blocked_plugins": args.blocked_plugins,
    }
    for name in (
        "host",
        "port",
        "reload",
        "body_idle_timeout",
        "body_timeout",
        "max_pending_bodies_per_peer",
    ):
        overrides[name] = getattr(args, name, None)
    return load_config(file=args.config, overrides=overrides)


def startup_line(config: HostConfig, connection: ModelConnection | None = None) -> str:
    """What ``serve`` prints once it listens: version, address, data directory, provider and
    model (never the API key) — those of ``connection`` (the configuration with the model
    settings saved from the page applied) when given."""
    provider: ProviderSettings = connection.effective if connection else config.provider
    if provider.kind == "synthetic":
        using = "provider synthetic (offline practice replies; connect a model in Settings)"
    else:
        model = provider.model or "(none set)"
        using = f"provider {provider.kind} at {provider.base_url}, model {model}"
    return (
        f"Innkeeper {innkeeper_core.__version__} serving on "
        f"http://{config.host}:{config.port} (data: {config.data_dir}; {using})"
    )


def _serve(config: HostConfig, argv: Sequence[str]) -> int:
    if config.reload and os.environ.get(SUPERVISED_ENV) != "1":
        return _supervise(argv)
    logging.basicConfig(
        level=config.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if config.reload:
        sys.dont_write_bytecode = True  # never read a stale .pyc written in the same second
    app = create_app(config)
    if not config.reload:
        app.on_startup.append(freeze_startup_heap)
    web.run_app(
        app,
        host=config.host,
        port=config.port,
        print=lambda _: print(startup_line(config, app.get(MODEL_CONNECTION)), flush=True),
        access_log=None,
    )
    return 0


async def freeze_startup_heap(_app: web.Application) -> None:
    """``on_startup`` hook of a server without ``--reload``, run after the plugins loaded: what
    start-up allocated moves to the collector's permanent generation (``gc.freeze``), so full
    collections no longer walk it, and generation 0 collects after :data:`SERVE_GC_THRESHOLDS`
    allocations. Cyclic garbage is still collected; a reloading server keeps the defaults (a
    reloaded plugin's old objects must stay collectable)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*SERVE_GC_THRESHOLDS)


def _supervise(argv: Sequence[str]) -> int:
    """Run the server in a child process and restart it when core or hostapi sources change.

    Plugin changes are reloaded inside the child without a restart.
    """
    from watchfiles import PythonFilter, run_process

    import innkeeper_hostapi

    watched = [Path(m.__file__).parent for m in (innkeeper_core, innkeeper_hostapi) if m.__file__]
    extra = os.environ.get(RESTART_PATHS_ENV)
    if extra:  # more folders whose changes restart the server (development of host packages)
        watched += [Path(p) for p in extra.split(os.pathsep) if p]
    command = shlex.join([sys.executable, "-m", "innkeeper_core.cli", *argv])
    os.environ[SUPERVISED_ENV] = "1"
    run_process(
        *watched, target=command, target_type="command", watch_filter=PythonFilter(), debounce=300
    )
    return 0


def _list_plugins(config: HostConfig) -> int:
    sources = [*discover_entry_points(), *discover_drop_ins(config.plugin_dirs)]
    if not sources:
        print("no plugins found")
        return 0
    width = max(len(s.plugin_id) for s in sources)
    for s in sources:
        state = "blocked" if s.plugin_id in config.blocked_plugins else "enabled"
        where = s.dist_name or s.target
        print(f"{s.plugin_id:<{width}}  {s.version:<8}  {state:<8}  {s.kind:<11}  {where}")
    return 0


def _plugin_commands() -> dict[str, Any]:
    return {ep.name: ep for ep in entry_points(group=COMMAND_GROUP)}


def _run_plugin_command(name: str, entry: Any, argv: list[str]) -> int:
    """Run ``innkeeper <name>`` provided by a plugin's ``innkeeper.commands`` entry point."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--config")
    pre.add_argument("--data-dir")
    known, rest = pre.parse_known_args(argv)
    try:
        config = load_config(file=known.config, overrides={"data_dir": known.data_dir})
    except ConfigError as exc:
        print(f"innkeeper: {exc}", file=sys.stderr)
        return 2
    command: CommandMain = entry.load()
    return command(rest, command_environment(config))


def command_environment(config: HostConfig) -> CommandEnvironment:
    """What a plugin command is given: the data directory, the server's address, each plugin's
    configuration, and a way to start this host in the command's process when no server runs
    (``innkeeper_core.local_host``)."""

    async def local_host() -> HostClient:
        return await start_local_host(config)

    return CommandEnvironment(
        data_dir=config.data_dir,
        base_url=f"http://{config.host}:{config.port}",
        plugin_config=config.plugins,
        start_local_host=local_host,
    )


#: Options taken before a plugin command (``innkeeper --data-dir D import …``), with a value.
_GLOBAL_OPTIONS: Final = ("--config", "--data-dir")
#: Exit status when the reader of stdout went away (``innkeeper … | head``): 128 + SIGPIPE.
EXIT_BROKEN_PIPE: Final = 141


def _command_index(args: list[str]) -> int | None:
    """Where the command name is, after any leading ``--config``/``--data-dir`` options."""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in _GLOBAL_OPTIONS:
            i += 2
        elif arg.split("=", 1)[0] in _GLOBAL_OPTIONS:
            i += 1
        elif arg.startswith("-"):
            return None
        else:
            return i
    return None


def _quiet_broken_pipe() -> int:
    """After a closed stdout: point it at /dev/null so the interpreter's final flush is silent."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return EXIT_BROKEN_PIPE


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``innkeeper`` console script.

    A plugin command (``innkeeper import …``) parses its own arguments, ``--help`` included; the
    global ``--config`` / ``--data-dir`` may come before or after its name. Exit status: 0 on
    success, 1 when the command failed, 2 for usage errors, 141 when stdout was closed early
    (the command ends quietly, without a traceback).
    """
    args_list = list(sys.argv[1:] if argv is None else argv)
    try:
        code = _main(args_list)
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        return _quiet_broken_pipe()


def _main(args_list: list[str]) -> int:
    at = _command_index(args_list)
    if at is not None and args_list[at] not in ("serve", "plugins"):
        commands = _plugin_commands()
        if args_list[at] in commands:
            rest = args_list[:at] + args_list[at + 1 :]
            return _run_plugin_command(args_list[at], commands[args_list[at]], rest)
    args = _parser().parse_args(args_list)
    try:
        config = _config(args)
    except ConfigError as exc:
        print(f"innkeeper: {exc}", file=sys.stderr)
        return 2
    if args.command == "serve":
        return _serve(config, args_list)
    return _list_plugins(config)


if __name__ == "__main__":
    sys.exit(main())
