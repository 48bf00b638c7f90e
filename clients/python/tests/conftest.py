"""The tests run against a real sidecar: PATINA_ADDR and PATINA_TOKEN name
it (tests/clients_test.go in the repository starts one and runs pytest
with them). Without them the tests that need it fail, saying so: they never
skip silently."""

import os
import subprocess
import uuid

import pytest

import patina


@pytest.fixture(scope="session")
def client() -> patina.Client:
    if not os.environ.get("PATINA_ADDR"):
        pytest.fail("set PATINA_ADDR and PATINA_TOKEN to a running `patina serve` (go test ./tests -run TestClients does)")
    return patina.Client()


@pytest.fixture
def name() -> str:
    return "py-" + uuid.uuid4().hex[:10]


@pytest.fixture
def workspace(client, name):
    ws = client.create_workspace(name=name)
    yield ws
    try:
        ws.delete()
    except patina.NotFoundError:
        pass


@pytest.fixture
def repo(tmp_path):
    d = tmp_path / "repo"
    d.mkdir()

    def git(*args):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
                       cwd=d, check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    (d / "README").write_text("hi\n")
    git("add", "-A")
    git("commit", "-q", "-m", "initial")
    return d
