// The client against a real sidecar and real Docker: PATINA_ADDR and
// PATINA_TOKEN name it (tests/clients_test.go in the repository starts one,
// builds dist/ with tsc and runs `node --test` with them). Without them the
// tests fail, saying so: they never skip silently.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, mkdirSync, writeFileSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as patina from "../dist/index.js";

const { Client } = patina;
const uid = () => Math.random().toString(16).slice(2, 10);
let client;
let ws;
const tmp = mkdtempSync(join(tmpdir(), "patina-ts-"));

before(async () => {
  assert.ok(process.env.PATINA_ADDR, "set PATINA_ADDR and PATINA_TOKEN to a running `patina serve` (go test ./tests -run TestClients does)");
  client = new Client();
  ws = await client.createWorkspace({ name: "ts-" + uid() });
});

after(async () => {
  await ws?.delete().catch(() => {});
  rmSync(tmp, { recursive: true, force: true });
});

test("health, openapi, auth, discovery", async () => {
  assert.equal((await client.health()).status, "ok");
  const doc = await client.openapi();
  assert.match(doc.openapi, /^3\.1/);
  assert.ok(doc.paths["/v1/workspaces/{id}/sessions/{sid}/exec"]);
  // A wrong token is never sent: the sidecar cannot prove it holds it.
  await assert.rejects(new Client({ url: client.url, token: "wrong" }).workspaces(), (e) => e instanceof patina.NotSidecarError && e instanceof patina.UnauthorizedError);
  await assert.rejects(new Client({ url: "127.0.0.1:1", token: "x" }).health(), patina.PatinaConnectionError);
  const dir = join(tmp, "state");
  mkdirSync(dir);
  writeFileSync(join(dir, "sidecar.json"), JSON.stringify({ addr: "127.0.0.1:4242" }));
  writeFileSync(join(dir, "token"), "secret\n");
  assert.deepEqual(patina.resolveConnection(undefined, undefined, { PATINA_STATE_DIR: dir }, "/h"), { url: "http://127.0.0.1:4242", token: "secret" });
  assert.deepEqual(patina.resolveConnection(undefined, undefined, { PATINA_ADDR: "h:1", PATINA_TOKEN: "t", PATINA_STATE_DIR: dir }, "/h"), { url: "http://h:1", token: "t" });
  assert.equal(patina.stateDir({ HOME: "/home/u" }, "/x"), "/home/u/.local/state/patina");
});

test("exec keeps the shell's state; stdin, timeout, sessions", async () => {
  assert.equal(ws.status, "running");
  assert.ok(ws.agent.connected);
  const sh = await ws.session("default");
  let r = await sh.exec("cd /tmp && export X=41; echo out; echo err >&2");
  assert.deepEqual([r.exit_code, r.stdout, r.stderr, r.cwd], [0, "out\n", "err\n", "/tmp"]);
  assert.equal((await sh.exec("echo $((X+1)) $PWD")).stdout, "42 /tmp\n");
  assert.equal((await sh.exec("sh -c 'exit 7'")).exit_code, 7);
  assert.equal((await sh.exec("wc -c", { stdin: "some input" })).stdout.trim(), "10");
  r = await sh.exec("cat", { stdin: Uint8Array.from([0xff, 0, 0x6f, 0x6b]) });
  assert.deepEqual([...patina.stdoutBytes(r)], [0xff, 0, 0x6f, 0x6b]);
  r = await sh.exec("sleep 30", { timeoutMs: 500 });
  assert.ok(r.timed_out);
  assert.equal(r.exit_code, 130);
  await sh.setEnv({ Y: "why" });
  assert.equal((await sh.exec("echo $X $Y")).stdout, "41 why\n");
  const other = await ws.session("other", { cwd: "/", env: { Z: "zed" } });
  assert.equal((await other.exec("echo $PWD $Z $X")).stdout, "/ zed\n");
  assert.ok((await ws.sessions()).some((s) => s.id === "other"));
  assert.equal((await ws.session("other")).id, "other");
  const hist = await sh.history();
  assert.ok(hist[0].command.startsWith("cd /tmp"));
  assert.equal((await ws.exec("echo via-workspace")).stdout, "via-workspace\n");
  assert.equal((await sh.refresh()).status, "idle");
});

test("errors are classes named after the API's codes", async () => {
  await assert.rejects(client.workspace("no-such-workspace"), patina.NotFoundError);
  const sh = await ws.session("errs");
  const cmd = await sh.start("sleep 30");
  await assert.rejects(sh.exec("true"), (e) => e instanceof patina.BusyError && e.code === "busy" && e.status === 409 && e.message.length > 0);
  await cmd.signal("INT");
  const info = await cmd.wait({ timeoutMs: 30000 });
  assert.equal(info.state, "finished");
  assert.ok(info.interrupted);
  await assert.rejects(cmd.signal("INT"), patina.NotRunningError);
  const r = await sh.exec("exit 3");
  assert.ok(r.session_ended);
  await assert.rejects(sh.exec("true"), patina.EndedError);
  await sh.delete();
  await assert.rejects(sh.exec("true"), patina.NotFoundError);
  await assert.rejects(ws.readFile("../../etc/passwd"), patina.InvalidError);
  await assert.rejects(client.createWorkspace({ name: ws.name }), patina.ConflictError);
  await assert.rejects(ws.diff(), patina.NoRepositoryError);
  await assert.rejects(ws.forwardPort(3999), patina.NotListeningError);
});

test("background commands, output by offset, follow, streaming", async () => {
  const sh = await ws.session("default");
  const cmd = await sh.start("for i in 1 2 3; do echo $i; sleep 0.2; done; echo e >&2");
  const parts = [];
  for await (const c of cmd.follow("stdout")) parts.push(Buffer.from(c));
  assert.equal(Buffer.concat(parts).toString(), "1\n2\n3\n");
  const info = await cmd.wait();
  assert.equal(info.exit_code, 0);
  assert.equal(Buffer.from(await cmd.read("stdout", 2)).toString(), "2\n3\n");
  assert.equal(Buffer.from(await cmd.read("stderr")).toString(), "e\n");
  await assert.rejects(cmd.read("stdout", 999), patina.InvalidError);
  const s = sh.stream("echo one; sleep 0.3; echo two >&2; printf '\\xff'");
  const chunks = [];
  for await (const c of s) chunks.push(c);
  assert.ok(chunks.some((c) => c.stream === "stdout" && c.text === "one\n"));
  assert.ok(chunks.some((c) => c.stream === "stderr" && c.text === "two\n"));
  assert.ok(chunks.some((c) => c.stream === "stdout" && c.data.length === 1 && c.data[0] === 0xff));
  assert.equal(s.result.exit_code, 0);
  assert.equal(s.result.stdout_bytes, 5);
  assert.ok(s.commandId);
});

test("files and trees", async () => {
  await ws.writeFile("src/hello.txt", "hello, file");
  await ws.writeFile("src/bin.dat", Uint8Array.from([0, 1, 255]));
  assert.equal(await ws.readText("src/hello.txt"), "hello, file");
  assert.deepEqual([...(await ws.readFile("src/bin.dat"))], [0, 1, 255]);
  const names = (await ws.listDir("src")).map((e) => `${e.name}:${e.type}:${e.size}`).sort();
  assert.deepEqual(names, ["bin.dat:file:3", "hello.txt:file:11"]);
  assert.ok((await ws.listDir()).some((e) => e.name === "src"));
  assert.ok(await ws.exists("src/hello.txt"));
  assert.ok(!(await ws.exists("src/nope")));
  await assert.rejects(ws.readFile("src"), patina.InvalidError);
  const up = join(tmp, "up");
  mkdirSync(join(up, "a", "b"), { recursive: true });
  writeFileSync(join(up, "top.txt"), "top");
  writeFileSync(join(up, "a", "b", "deep.txt"), "deep");
  assert.equal(await ws.upload(up, "tree"), 2);
  assert.equal((await ws.exec("cat /workspace/tree/a/b/deep.txt")).stdout, "deep");
  const down = join(tmp, "down");
  assert.equal(await ws.download("tree", down), 2);
  assert.equal(readFileSync(join(down, "a", "b", "deep.txt"), "utf8"), "deep");
  await ws.deleteFile("tree");
  assert.ok(!(await ws.exists("tree")));
});

test("ports and stop/start", async () => {
  const sh = await ws.session("default");
  await sh.exec("cd /tmp && export KEEP=1");
  await sh.exec("nohup /.patina/bin/patina agent test-server --listen 127.0.0.1:3000 >/tmp/ts.log 2>&1 &");
  let p;
  for (let i = 0; ; i++) {
    try {
      p = await ws.forwardPort(3000);
      break;
    } catch (e) {
      if (!(e instanceof patina.NotListeningError) || i > 200) throw e;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  assert.equal(p.port, 3000);
  const res = await fetch(p.url + "hello");
  assert.equal(res.status, 200);
  await res.arrayBuffer();
  assert.deepEqual((await ws.listPorts()).map((q) => q.port), [3000]);
  await ws.closePort(3000);
  assert.deepEqual(await ws.listPorts(), []);
  assert.equal((await ws.stop()).status, "stopped");
  await assert.rejects(sh.exec("true"), patina.StoppedError);
  assert.equal((await ws.start()).status, "running");
  assert.equal((await sh.exec("echo $KEEP $PWD")).stdout, "1 /tmp\n");
});

test("terminal", async () => {
  const sh = await ws.session("term");
  await sh.exec("cd /tmp && export V=7");
  const term = await sh.terminal({ rows: 20, cols: 70 });
  assert.equal(term.hello.type, "hello");
  assert.ok(term.hello.started);
  await assert.rejects(sh.exec("true"), patina.BusyError);
  term.write("stty size; echo v=$V\r");
  assert.match(await term.readUntil("v=7"), /20 70/);
  term.resize(33, 99);
  term.write("stty size; cd /; export W=8; echo ready-$((4*2))\r");
  assert.match(await term.readUntil("ready-8"), /33 99/);
  term.end();
  for await (const _ of term) {
    // the rest of the output
  }
  assert.notEqual(term.exitCode, undefined);
  assert.equal((await sh.exec("echo $PWD $W")).stdout, "/ 8\n");
});

test("git: diff, commit, merge exactly what was reviewed, fork, log", async () => {
  const repo = join(tmp, "repo");
  mkdirSync(repo);
  const git = (...a) => execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@example.com", ...a], { cwd: repo }).toString();
  git("init", "-q", "-b", "main");
  writeFileSync(join(repo, "README"), "hi\n");
  git("add", "-A");
  git("commit", "-q", "-m", "initial");
  const name = "ts-git-" + uid();
  const g = await client.createWorkspace({ name, repo });
  try {
    assert.equal(g.branch, "patina/" + name);
    await g.writeFile("feature.txt", "new feature\n");
    const d = await g.diff();
    assert.ok(d.uncommitted);
    assert.deepEqual(d.files.map((f) => f.path), ["feature.txt"]);
    const c = await g.commit("Add the feature");
    assert.ok(c.committed && c.reviewed);
    const m = await g.merge();
    assert.equal(m.merged, c.commit);
    assert.equal(git("show", "main:feature.txt"), "new feature\n");
    await g.exec("echo more >> feature.txt && git add -A && git -c user.name=a -c user.email=a@b commit -qm more");
    await assert.rejects(g.merge(), patina.ConflictError);
    assert.equal((await g.log())[0].kind, "created");
    const f = await g.fork(name + "-f");
    try {
      assert.equal(f.fork_of, g.id);
      assert.equal((await f.exec("cat feature.txt")).stdout, "new feature\nmore\n");
    } finally {
      await f.delete();
    }
  } finally {
    await g.delete();
  }
});

test("a server that cannot prove it holds the token never receives it", async () => {
  const { createServer } = await import("node:http");
  const seen = [];
  const squatter = createServer((req, res) => {
    seen.push(req.headers.authorization);
    res.setHeader("Content-Type", "application/json");
    res.end(JSON.stringify({ proof: "0".repeat(64) }));
  });
  await new Promise((r) => squatter.listen(0, "127.0.0.1", r));
  try {
    const url = `http://127.0.0.1:${squatter.address().port}`;
    await assert.rejects(new Client({ url, token: "the-real-token" }).workspaces(), patina.NotSidecarError);
  } finally {
    squatter.close();
  }
  assert.ok(seen.length > 0 && seen.every((h) => h === undefined));
});
