"""Configuration precedence and errors, the reloader's path mapping, and the CLI."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
from aiohttp import web

from innkeeper_core import cli
from innkeeper_core.cli import main
from innkeeper_core.config import ConfigError, load_config
from innkeeper_core.plugins.reloader import plugins_for_paths


def test_flags_beat_environment_beat_file(tmp_path: Path) -> None:
    file = tmp_path / "innkeeper.toml"
    file.write_text(
        'port = 1111\nhost = "127.0.0.1"\nblocked_plugins = ["a"]\n'
        '[provider]\nkind = "openai"\nmodel = "from-file"\n'
        '[plugins.hello]\ngreeting = "Howdy"\n'
    )
    env = {"INNKEEPER_PORT": "2222", "INNKEEPER_MODEL": "from-env", "INNKEEPER_RELOAD": "yes"}
    config = load_config(file=file, env=env, overrides={"port": 3333, "data_dir": None})
    assert config.port == 3333
    assert config.reload is True
    assert config.blocked_plugins == ["a"]
    assert config.provider.kind == "openai"
    assert config.provider.model == "from-env"
    assert config.plugins == {"hello": {"greeting": "Howdy"}}


def test_defaults_are_embedded(tmp_path: Path) -> None:
    config = load_config(env={"XDG_DATA_HOME": str(tmp_path)})
    assert (config.host, config.port, config.provider.kind) == ("127.0.0.1", 8787, "synthetic")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("port = 'eighty'", "Expected `int`, got `str` - at `$.port`"),
        ("colour = 'red'", "unknown field `colour`"),
        ("[provider]\nkind = 'magic'", "$.provider.kind"),
        ("[provider]\nsynthetic_reply_chars = 70000", "$.provider.synthetic_reply_chars"),
        ("port = [", "not valid TOML"),
    ],
)
def test_bad_config_names_the_field(tmp_path: Path, content: str, message: str) -> None:
    file = tmp_path / "bad.toml"
    file.write_text(content)
    with pytest.raises(ConfigError) as info:
        load_config(file=file, env={})
    assert message in str(info.value)


def test_bad_environment_value() -> None:
    with pytest.raises(ConfigError, match="INNKEEPER_PORT"):
        load_config(env={"INNKEEPER_PORT": "lots"})


def test_an_empty_data_dir_is_refused_not_the_current_folder(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="data_dir must not be empty"):
        load_config(env={"INNKEEPER_DATA_DIR": ""})
    with pytest.raises(ConfigError, match="data_dir"):
        load_config(env={}, overrides={"data_dir": " "})


def test_changed_paths_map_to_the_deepest_plugin_root(tmp_path: Path) -> None:
    outer, inner = tmp_path / "p", tmp_path / "p" / "nested"
    inner.mkdir(parents=True)
    roots = {outer.resolve(): "outer", inner.resolve(): "inner"}
    changed = [str(inner / "a.py"), str(outer / "b.py"), str(tmp_path / "other.py")]
    assert plugins_for_paths(roots, changed) == {"inner", "outer"}


def test_cli_lists_plugins_and_reports_config_errors(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["plugins", "--block", "hello"]) == 0
    out = capsys.readouterr().out
    assert "hello" in out
    assert "blocked" in out
    bad = tmp_path / "bad.toml"
    bad.write_text("port = -1")
    assert main(["serve", "--config", str(bad)]) == 2
    assert "port must be between" in capsys.readouterr().err


def test_plugins_add_cli_commands(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[plugins.hello]\ngreeting = "Howdy"\n')
    assert main(["hello", "--config", str(config), "Ada", "--data-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out == "Howdy, Ada!\n"
    assert main(["hello"]) == 2


@pytest.mark.parametrize("reload", [False, True])
def test_serve_freezes_the_start_up_heap_unless_reloading(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, reload: bool
) -> None:
    served: list[web.Application] = []
    monkeypatch.setattr(cli.web, "run_app", lambda app, **_: served.append(app))
    monkeypatch.setenv(cli.SUPERVISED_ENV, "1")  # --reload: this process is the child
    argv = ["serve", "--data-dir", str(tmp_path), *(["--reload"] if reload else [])]
    assert main(argv) == 0
    startup = list(served[0].on_startup)
    # After the lifecycle that loads the plugins (the first startup callback), or not at all.
    assert (startup[-1] is cli.freeze_startup_heap) is not reload
    assert (cli.freeze_startup_heap in startup) is not reload


async def test_the_start_up_hook_freezes_what_exists_and_raises_the_thresholds() -> None:
    thresholds = gc.get_threshold()
    kept = [object() for _ in range(10)]
    try:
        await cli.freeze_startup_heap(web.Application())
        assert gc.get_freeze_count() >= len(kept)
        assert gc.get_threshold() == cli.SERVE_GC_THRESHOLDS
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)
