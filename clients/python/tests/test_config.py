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


def test_token_not_sent_to_a_squatter(tmp_path):
    """A program on the sidecar's address that cannot prove it holds the
    token (a dead sidecar's port, taken) never receives it."""
    import http.server
    import threading

    import pytest

    import patina

    seen = []

    class Squatter(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append(self.headers.get("Authorization"))
            body = json.dumps({"proof": "0" * 64}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    srv = http.server.HTTPServer(("127.0.0.1", 0), Squatter)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        c = patina.Client("http://127.0.0.1:%d" % srv.server_port, "the-real-token")
        with pytest.raises(patina.NotSidecarError):
            c.workspaces()
    finally:
        srv.shutdown()
    assert seen and all(h is None for h in seen)
