"""The client against a real sidecar and real Docker."""

import time

import pytest

import patina


def test_health_and_openapi(client):
    assert client.health()["status"] == "ok"
    doc = client.openapi()
    assert doc["openapi"].startswith("3.1")
    assert "/v1/workspaces/{id}/sessions/{sid}/exec" in doc["paths"]


def test_wrong_token_is_unauthorized(client):
    # A wrong token is never sent: the sidecar cannot prove it holds it.
    with pytest.raises(patina.NotSidecarError) as e:
        patina.Client(client.url, "wrong").workspaces()
    assert isinstance(e.value, patina.UnauthorizedError) and "token" in e.value.message


def test_unreachable_sidecar():
    with pytest.raises(patina.PatinaConnectionError):
        patina.Client("127.0.0.1:1", "x").health()


def test_exec_and_state(workspace):
    assert workspace.status == "running" and workspace.agent is not None and workspace.agent.connected
    sh = workspace.session("default")
    r = sh.exec("cd /tmp && export X=41; echo out; echo err >&2; exit_code=3")
    assert (r.exit_code, r.stdout, r.stderr, r.cwd) == (0, "out\n", "err\n", "/tmp")
    assert r.command_id and r.ok and r.stdout_bytes == 4
    assert sh.exec("echo $((X+1)) $PWD").stdout == "42 /tmp\n"
    assert sh.exec("sh -c 'exit 7'").exit_code == 7
    # stdin as text and as bytes; binary output.
    assert sh.exec("wc -c", stdin="some input").stdout.strip() == "10"
    r = sh.exec("cat", stdin=b"\xff\x00ok")
    assert r.stdout_data == b"\xff\x00ok" and r.stdout_base64
    # A timeout stops the command and keeps the shell.
    r = sh.exec("sleep 30", timeout=0.5)
    assert r.timed_out and r.exit_code == 130
    assert sh.exec("echo $X").stdout == "41\n"
    # Environment, sessions apart.
    sh.set_env({"Y": "why"})
    assert sh.exec("echo $Y").stdout == "why\n"
    other = workspace.session("other", cwd="/", env={"Z": "zed"})
    assert other.exec("echo $PWD $Z $X").stdout == "/ zed\n"
    assert {s.id for s in workspace.sessions()} >= {"default", "other"}
    assert workspace.session("other").id == "other"  # exists: not an error
    hist = sh.history()
    assert hist[0].command.startswith("cd /tmp") and hist[0].exit_code == 0
    assert workspace.exec("echo via-workspace").stdout == "via-workspace\n"
    assert sh.refresh().status == "idle"


def test_errors(client, workspace):
    with pytest.raises(patina.NotFoundError):
        client.workspace("no-such-workspace")
    sh = workspace.session("errs")
    cmd = sh.start("sleep 30")
    with pytest.raises(patina.BusyError) as e:
        sh.exec("true")
    assert e.value.code == "busy" and e.value.status == 409
    cmd.signal("INT")
    info = cmd.wait(timeout=30)
    assert info.state == "finished" and info.interrupted and info.exit_code == 130
    with pytest.raises(patina.NotRunningError):
        cmd.signal("INT")
    r = sh.exec("exit 3")
    assert r.session_ended and r.exit_code == 3
    with pytest.raises(patina.EndedError):
        sh.exec("true")
    sh.delete()
    with pytest.raises(patina.NotFoundError):
        sh.exec("true")
    assert workspace.session("errs").exec("echo new").stdout == "new\n"  # a new shell
    with pytest.raises(patina.InvalidError):
        workspace.read_file("../../etc/passwd")
    with pytest.raises(patina.ConflictError):
        client.create_workspace(name=workspace.name)
    with pytest.raises(patina.NoRepositoryError):
        workspace.diff()


def test_background_output_and_streaming(workspace):
    sh = workspace.session("default")
    cmd = sh.start("for i in 1 2 3; do echo $i; sleep 0.2; done; echo e >&2")
    followed = b"".join(cmd.follow("stdout"))
    assert followed == b"1\n2\n3\n"
    info = cmd.wait()
    assert info.state == "finished" and info.exit_code == 0 and info.stdout_bytes == 6
    assert cmd.read("stdout", offset=2) == b"2\n3\n"
    assert cmd.read("stderr") == b"e\n"
    with pytest.raises(patina.InvalidError):
        cmd.read("stdout", offset=999)
    assert sh.command(cmd.id).info().id == cmd.id

    stream = sh.stream("echo one; sleep 0.3; echo two >&2; printf '\\xff'")
    chunks = list(stream)
    got = {(c.stream, c.data) for c in chunks}
    assert ("stdout", b"one\n") in got and ("stderr", b"two\n") in got and ("stdout", b"\xff") in got
    assert stream.result is not None and stream.result.exit_code == 0 and stream.command_id
    assert stream.result.stdout_bytes == 5


def test_files(workspace, tmp_path):
    workspace.write_file("src/hello.txt", "hello, file")
    workspace.write_file("src/bin.dat", b"\x00\x01\xff")
    assert workspace.read_text("src/hello.txt") == "hello, file"
    assert workspace.read_file("src/bin.dat") == b"\x00\x01\xff"
    names = {(e.name, e.type, e.size) for e in workspace.list_dir("src")}
    assert names == {("hello.txt", "file", 11), ("bin.dat", "file", 3)}
    assert "src" in {e.name for e in workspace.list_dir()}
    assert workspace.exists("src/hello.txt") and not workspace.exists("src/nope")
    with pytest.raises(patina.InvalidError):
        workspace.read_file("src")
    # Trees up and down.
    up = tmp_path / "up"
    (up / "a" / "b").mkdir(parents=True)
    (up / "top.txt").write_text("top")
    (up / "a" / "b" / "deep.txt").write_text("deep")
    assert workspace.upload(str(up), "tree") == 2
    assert workspace.session("default").exec("cat /workspace/tree/a/b/deep.txt").stdout == "deep"
    down = tmp_path / "down"
    assert workspace.download("tree", str(down)) == 2
    assert (down / "a" / "b" / "deep.txt").read_text() == "deep" and (down / "top.txt").read_text() == "top"
    workspace.delete_file("tree")
    assert not workspace.exists("tree")


def test_git_review_commit_merge(client, repo, name):
    ws = client.create_workspace(name=name, repo=str(repo))
    try:
        assert ws.branch == "patina/" + name and ws.base_commit
        ws.write_file("feature.txt", "new feature\n")
        d = ws.diff()
        assert d.uncommitted and [f.path for f in d.files] == ["feature.txt"] and "+new feature" in d.text
        c = ws.commit("Add the feature")
        assert c.committed and c.reviewed and c.commit
        m = ws.merge()
        assert m.merged == c.commit and m.fast_forward and m.into == "refs/heads/main"
        import subprocess
        out = subprocess.run(["git", "show", "main:feature.txt"], cwd=repo, capture_output=True, text=True, check=True)
        assert out.stdout == "new feature\n"
        # A commit made after the diff is not merged: look again.
        ws.session("default").exec("echo more >> feature.txt && git add -A && git -c user.name=a -c user.email=a@b commit -qm more")
        with pytest.raises(patina.ConflictError):
            ws.merge()
        assert [e.kind for e in ws.log()][:1] == ["created"]
        fork = ws.fork(name + "-f")
        try:
            assert fork.fork_of == ws.id
            assert fork.session("default").exec("cat feature.txt").stdout == "new feature\nmore\n"
        finally:
            fork.delete()
    finally:
        ws.delete()


def test_stop_start_and_ports(workspace):
    sh = workspace.session("default")
    sh.exec("cd /tmp && export KEEP=1")
    assert workspace.stop().status == "stopped"
    with pytest.raises(patina.StoppedError):
        sh.exec("true")
    assert workspace.start().status == "running"
    assert sh.exec("echo $KEEP $PWD").stdout == "1 /tmp\n"
    with pytest.raises(patina.NotListeningError):
        workspace.forward_port(3999)
    sh.exec("nohup /.patina/bin/patina agent test-server --listen 127.0.0.1:3000 >/tmp/ts.log 2>&1 &")
    deadline = time.monotonic() + 20
    while True:
        try:
            p = workspace.forward_port(3000)
            break
        except patina.NotListeningError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    assert p.port == 3000 and p.url.startswith("http://127.0.0.1:")
    import urllib.request
    with urllib.request.urlopen(p.url + "hello", timeout=10) as resp:
        assert resp.status == 200 and resp.read()
    assert [q.port for q in workspace.list_ports()] == [3000]
    workspace.close_port(3000)
    assert workspace.list_ports() == []


def test_terminal(workspace):
    sh = workspace.session("default")
    sh.exec("cd /tmp && export V=7")
    term = sh.terminal(rows=20, cols=70)
    assert term.hello["type"] == "hello" and term.hello["started"]
    with pytest.raises(patina.BusyError):
        sh.exec("true")
    term.write("stty size; echo v=$V\r")
    out = term.read_until("v=7")
    assert b"20 70" in out
    term.resize(33, 99)
    term.write("stty size; cd /; export W=8; echo ready-$((4*2))\r")
    assert b"33 99" in term.read_until("ready-8")
    term.end()
    rest = b"".join(term)
    assert term.exit_code is not None, rest
    # The terminal handed its state back to the session.
    assert sh.exec("echo $PWD $W").stdout == "/ 8\n"


def test_apply_and_listing(client, repo, name):
    ws = client.create_workspace(name=name, repo=str(repo))
    try:
        assert any(w.id == ws.id for w in client.workspaces())
        assert client.workspace(name).id == ws.id and ws.refresh().status == "running"
        ws.write_file("applied.txt", "staged\n")
        res = ws.apply()
        assert res.dir and [f.path for f in res.files] == ["applied.txt"]
        import subprocess
        staged = subprocess.run(["git", "diff", "--cached", "--name-only"], cwd=repo, capture_output=True, text=True, check=True)
        assert staged.stdout.split() == ["applied.txt"]
    finally:
        ws.delete(keep_branch=True)
    import subprocess
    branches = subprocess.run(["git", "branch", "--list", "patina/*"], cwd=repo, capture_output=True, text=True, check=True)
    assert "patina/" + name in branches.stdout
