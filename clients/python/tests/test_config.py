"""Finding the sidecar as the CLI does (no sidecar needed)."""

import json

from patina import _config


def test_arguments_first(tmp_path):
    env = {"PATINA_ADDR": "127.0.0.1:1", "PATINA_TOKEN": "env"}
    assert _config.resolve("http://h:2/", "arg", env) == ("http://h:2", "arg")


def test_environment(tmp_path):
    env = {"PATINA_ADDR": "127.0.0.1:9", "PATINA_TOKEN": "tok", "PATINA_STATE_DIR": str(tmp_path)}
    assert _config.resolve(None, None, env) == ("http://127.0.0.1:9", "tok")


def test_state_directory(tmp_path):
    (tmp_path / "sidecar.json").write_text(json.dumps({"addr": "127.0.0.1:4242", "pid": 1}))
    (tmp_path / "token").write_text("secret\n")
    assert _config.resolve(None, None, {"PATINA_STATE_DIR": str(tmp_path)}) == ("http://127.0.0.1:4242", "secret")


def test_xdg_and_defaults(tmp_path):
    (tmp_path / "patina").mkdir()
    (tmp_path / "patina" / "token").write_text("x")
    assert _config.resolve(None, None, {"XDG_STATE_HOME": str(tmp_path)}) == ("http://127.0.0.1:7070", "x")
    assert _config.state_dir({"HOME": "/home/u"}) == "/home/u/.local/state/patina"
