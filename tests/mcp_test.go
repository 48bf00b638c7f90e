package tests

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/client"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/patina-dev/patina/internal/syncbuf"
	"github.com/patina-dev/patina/sidecar/container"
)

// mcpTools are the tools `patina mcp` offers.
var mcpTools = []string{
	"apply", "command_output", "command_signal", "commit", "diff", "file_delete", "file_edit", "file_list",
	"file_read", "file_write", "log", "merge", "network_restrict", "port_forward", "run", "session_list", "workspace_create", "workspace_delete",
	"workspace_fork", "workspace_list", "workspace_start", "workspace_stop",
}

// mcpProc is a `patina mcp` subprocess driven by the SDK's client.
type mcpProc struct {
	t      testing.TB
	cmd    *exec.Cmd
	cs     *mcp.ClientSession
	stderr *syncbuf.Buffer
}

// startMCP runs `patina mcp args...` and connects to it over stdio
// (initialize included). Its stderr is logged when the test fails.
func startMCP(t testing.TB, env []string, args ...string) *mcpProc {
	t.Helper()
	cmd := exec.Command(Binary(t), append([]string{"mcp"}, args...)...)
	cmd.Env = env
	p := &mcpProc{t: t, cmd: cmd, stderr: &syncbuf.Buffer{}}
	cmd.Stderr = p.stderr
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "patina-e2e", Version: "v0"}, nil).
		Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 15 * time.Second}, nil)
	if err != nil {
		t.Fatalf("connect to patina mcp: %v\nstderr:\n%s", err, p.stderr)
	}
	p.cs = cs
	t.Cleanup(func() {
		p.close()
		if t.Failed() {
			t.Logf("patina mcp %v stderr:\n%s", args, lastLines(p.stderr.String(), 60))
		}
	})
	return p
}

// close closes stdin and waits for the process to exit.
func (p *mcpProc) close() {
	if p.cs != nil {
		_ = p.cs.Close()
		p.cs = nil
	}
}

// call calls a tool; a protocol error fails the test.
func (p *mcpProc) call(name string, args map[string]any) *mcp.CallToolResult {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := p.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		p.t.Fatalf("%s: protocol error: %v", name, err)
	}
	return res
}

// ok calls a tool that must succeed and returns its text.
func (p *mcpProc) ok(name string, args map[string]any) string {
	p.t.Helper()
	res := p.call(name, args)
	if res.IsError {
		p.t.Fatalf("%s %v: tool error: %s", name, args, mcpText(res))
	}
	return mcpText(res)
}

func mcpText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// mcpField reads one field of a result's structured content.
func mcpField(t testing.TB, res *mcp.CallToolResult, field string) any {
	t.Helper()
	b, _ := json.Marshal(res.StructuredContent)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
	return m[field]
}

// envWithout is the environment without patina's variables, so that only
// the flags say where the sidecar is.
func envWithout() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "PATINA_") })
}

// The scenario: an agent drives `patina mcp` against a running
// sidecar.
func TestMCPEndToEnd(t *testing.T) {
	h := Start(t)
	repo := GitRepo(t, map[string]string{"README.md": "# demo\n", "app.py": "print('hello')\n"})
	p := startMCP(t, envWithout(), "--state-dir", h.StateDir, "--token", h.Token, "--no-start")

	if init := p.cs.InitializeResult(); init.ServerInfo.Name != "patina" || init.Capabilities.Tools == nil {
		t.Fatalf("initialize: %+v", init)
	}
	ctx := context.Background()
	lt, err := p.cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range lt.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, mcpTools) {
		t.Fatalf("exp tools %v, got %v", mcpTools, names)
	}

	out := p.ok("workspace_create", map[string]any{"name": "agent", "repo": repo})
	if !strings.Contains(out, `Created workspace "agent"`) {
		t.Fatalf("workspace_create: %s", out)
	}
	// It is the running sidecar's workspace.
	if w, err := h.Client.GetWorkspace(ctx, "agent"); err != nil || w.Branch != "patina/agent" {
		t.Fatalf("the sidecar does not know the workspace: %+v %v", w, err)
	}

	// cd in one run persists into the next.
	p.ok("run", map[string]any{"workspace": "agent", "command": "cd /tmp && export X=1"})
	res := p.call("run", map[string]any{"workspace": "agent", "command": "pwd; echo $X"})
	if res.IsError || mcpField(t, res, "stdout") != "/tmp\n1\n" || mcpField(t, res, "exit_code") != 0.0 {
		t.Fatalf("state did not persist: %s", mcpText(res))
	}

	// Write, edit, read a file.
	p.ok("file_write", map[string]any{"workspace": "agent", "path": "notes/todo.txt", "content": "- write tests\n- ship\n"})
	out = p.ok("file_edit", map[string]any{"workspace": "agent", "path": "/workspace/notes/todo.txt", "search": "- ship\n", "replace": "- ship it\n"})
	if !strings.Contains(out, "replaced occurrence 1 of 1 at line 2") {
		t.Fatalf("file_edit: %s", out)
	}
	p.ok("file_edit", map[string]any{"workspace": "agent", "path": "app.py", "search": "hello", "replace": "hello, patina"})
	out = p.ok("file_read", map[string]any{"workspace": "agent", "path": "notes/todo.txt"})
	if out != "/workspace/notes/todo.txt: lines 1-2 of 2\n     1\t- write tests\n     2\t- ship it" {
		t.Fatalf("file_read: %q", out)
	}

	// Diff, commit, log.
	out = p.ok("diff", map[string]any{"workspace": "agent"})
	for _, part := range []string{"2 files changed", "M  app.py (+1 -1)", "A  notes/todo.txt (+2 -0)", "+print('hello, patina')"} {
		if !strings.Contains(out, part) {
			t.Fatalf("exp %q in the diff:\n%s", part, out)
		}
	}
	res = p.call("commit", map[string]any{"workspace": "agent", "message": "Greet patina"})
	if res.IsError || mcpField(t, res, "committed") != true {
		t.Fatalf("commit: %s", mcpText(res))
	}
	if out := p.ok("diff", map[string]any{"workspace": "agent"}); !strings.Contains(out, "M  app.py") {
		t.Fatalf("the diff against the base still holds the committed change: %s", out)
	}
	out = p.ok("log", map[string]any{"workspace": "agent"})
	for _, part := range []string{"[default] cd /tmp && export X=1", "commit"} {
		if !strings.Contains(out, part) {
			t.Fatalf("exp %q in the log:\n%s", part, out)
		}
	}

	// A failure is a tool error with the sidecar's message, and the server
	// carries on.
	res = p.call("run", map[string]any{"workspace": "nope", "command": "true"})
	if !res.IsError || !strings.Contains(mcpText(res), `no workspace "nope"`) || !strings.Contains(mcpText(res), "not_found") {
		t.Fatalf("exp a tool error with the sidecar's message, got %v: %s", res.IsError, mcpText(res))
	}
	if out := p.ok("run", map[string]any{"workspace": "agent", "command": "echo still here"}); !strings.Contains(out, "still here") {
		t.Fatalf("after an error: %s", out)
	}

	// An agent may take network away from its workspace, never give it
	// more: the sidecar refuses, whatever the MCP server sends.
	if out := p.ok("network_restrict", map[string]any{"workspace": "agent", "allow": []string{"pypi.org:443"}}); !strings.Contains(out, "allow pypi.org:443") {
		t.Fatalf("network_restrict: %s", out)
	}
	res = p.call("network_restrict", map[string]any{"workspace": "agent", "allow": []string{"pypi.org:443", "evil.test"}})
	if !res.IsError || !strings.Contains(mcpText(res), "would allow more") {
		t.Fatalf("exp widening refused, got %v: %s", res.IsError, mcpText(res))
	}
	if w, err := h.Client.GetWorkspace(ctx, "agent"); err != nil || strings.Join(w.Network.Allow, ",") != "pypi.org:443" {
		t.Fatalf("exp the policy narrowed and no wider, got %+v %v", w.Network, err)
	}

	// Closing stdin ends patina mcp cleanly, and leaves the sidecar alone.
	p.close()
	if st := p.cmd.ProcessState; st == nil || st.ExitCode() != 0 {
		t.Fatalf("patina mcp did not exit 0 after stdin closed: %v", st)
	}
	if err := h.Client.Health(ctx); err != nil {
		t.Fatalf("the sidecar is gone: %v", err)
	}
}

// With no sidecar running, `patina mcp` starts one in its own process on
// the state directory, which the other commands find while it runs; it
// stops it when stdin closes, leaving the workspace's container and
// sessions to the next sidecar.
func TestMCPStartsSidecar(t *testing.T) {
	RequireDocker(t)
	dir := t.TempDir()
	t.Cleanup(func() { removeContainers(t, dir) })
	env := envWithout()

	p := startMCP(t, env, "--state-dir", dir)
	p.ok("workspace_create", map[string]any{"name": "solo"})
	p.ok("run", map[string]any{"workspace": "solo", "command": "cd /tmp; export KEPT=yes"})
	if !strings.Contains(p.stderr.String(), "started one in this process") {
		t.Fatalf("exp patina mcp to start a sidecar, stderr:\n%s", p.stderr)
	}
	// The other commands find it through the state directory.
	ls := exec.Command(Binary(t), "ws", "ls", "--state-dir", dir)
	ls.Env = env
	if out, err := ls.CombinedOutput(); err != nil || !strings.Contains(string(out), "solo") {
		t.Fatalf("patina ws ls: %v\n%s", err, out)
	}
	p.close()
	if st := p.cmd.ProcessState; st == nil || st.ExitCode() != 0 {
		t.Fatalf("patina mcp did not exit 0: %v", st)
	}
	if _, err := os.Stat(filepath.Join(dir, "sidecar.json")); !os.IsNotExist(err) {
		t.Fatalf("exp sidecar.json removed at shutdown, got %v", err)
	}

	// The next one adopts the workspace; the shell kept its state.
	p2 := startMCP(t, env, "--state-dir", dir)
	res := p2.call("run", map[string]any{"workspace": "solo", "command": "echo $PWD $KEPT"})
	if res.IsError || mcpField(t, res, "stdout") != "/tmp yes\n" {
		t.Fatalf("the session did not outlive the sidecar: %s", mcpText(res))
	}
	p2.ok("workspace_delete", map[string]any{"id": "solo"})
}

// Two `patina mcp` on one state directory with no sidecar: one starts a
// sidecar and the other uses it; when the first goes, the second starts
// its own and carries on.
func TestMCPSharedStateDir(t *testing.T) {
	RequireDocker(t)
	dir := t.TempDir()
	t.Cleanup(func() { removeContainers(t, dir) })
	env := envWithout()

	var ps [2]*mcpProc
	var wg sync.WaitGroup
	for i := range ps {
		wg.Go(func() { ps[i] = startMCP(t, env, "--state-dir", dir) })
	}
	wg.Wait()
	starter, user := ps[0], ps[1]
	started := func(p *mcpProc) bool { return strings.Contains(p.stderr.String(), "started one in this process") }
	if started(user) {
		starter, user = user, starter
	}
	if !started(starter) || started(user) {
		t.Fatalf("exp exactly one sidecar started, stderr:\n%s\n---\n%s", ps[0].stderr, ps[1].stderr)
	}
	user.ok("workspace_create", map[string]any{"name": "shared"})
	if out := starter.ok("workspace_list", nil); !strings.Contains(out, "shared") {
		t.Fatalf("the two do not share a sidecar: %s", out)
	}
	starter.close()
	if out := user.ok("run", map[string]any{"workspace": "shared", "command": "echo on"}); !strings.Contains(out, "on") {
		t.Fatalf("after the sidecar went: %s", out)
	}
	if !started(user) {
		t.Fatalf("exp the second to start a sidecar, stderr:\n%s", user.stderr)
	}
	user.ok("workspace_delete", map[string]any{"id": "shared"})
}

// removeContainers removes the containers of a state directory whose
// sidecar is gone.
func removeContainers(t testing.TB, stateDir string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dc, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return
	}
	defer dc.Close()
	_ = container.Cleanup(ctx, dc, stateDir)
}

// Issue 26 item 3: a malformed line is answered with a JSON-RPC error and
// `patina mcp` reads on; a truncated line does not swallow the next request.
func TestMCPMalformedLines(t *testing.T) {
	h := Start(t)
	cmd := exec.Command(Binary(t), "mcp", "--state-dir", h.StateDir, "--token", h.Token, "--no-start")
	cmd.Env = envWithout()
	stderr := &syncbuf.Buffer{}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
		}
		if t.Failed() {
			t.Logf("patina mcp stderr:\n%s", lastLines(stderr.String(), 40))
		}
	})
	type answer struct {
		ID    json.RawMessage `json:"id"`
		Error *struct {
			Code int `json:"code"`
		} `json:"error"`
		Result json.RawMessage `json:"result"`
	}
	lines := make(chan string, 16)
	go func() {
		buf := make([]byte, 0, 1<<20)
		for {
			var one [1]byte
			if _, err := stdout.Read(one[:]); err != nil {
				close(lines)
				return
			}
			if one[0] == '\n' {
				lines <- string(buf)
				buf = buf[:0]
				continue
			}
			buf = append(buf, one[0])
		}
	}()
	next := func(what string) answer {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("%s: patina mcp closed its output (exit: %v)", what, <-exited)
			}
			var a answer
			if err := json.Unmarshal([]byte(l), &a); err != nil {
				t.Fatalf("%s: not JSON: %q", what, l)
			}
			return a
		case <-time.After(2 * time.Minute):
			t.Fatalf("%s: no answer in 2 minutes", what)
		}
		return answer{}
	}
	send := func(l string) {
		t.Helper()
		if _, err := stdin.Write([]byte(l + "\n")); err != nil {
			t.Fatalf("write %q: %v", l, err)
		}
	}
	send(`not json at all`)
	if a := next("not json"); a.Error == nil || a.Error.Code != -32700 {
		t.Fatalf("not json: exp error -32700, got %+v", a)
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`)
	if a := next("initialize"); string(a.ID) != "1" || a.Error != nil {
		t.Fatalf("initialize after a malformed line: %+v", a)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"workspace_li`)
	if a := next("truncated"); a.Error == nil || a.Error.Code != -32700 {
		t.Fatalf("truncated line: exp error -32700, got %+v", a)
	}
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"workspace_list","arguments":{}}}`)
	if a := next("workspace_list"); string(a.ID) != "3" || a.Error != nil || len(a.Result) == 0 {
		t.Fatalf("workspace_list after a truncated line: %+v", a)
	}
	stdin.Close()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("patina mcp exited with %v when its input ended", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("patina mcp did not exit when its input ended")
	}
}

// Issue 26 item 17: the tools and options an agent was missing, through
// `patina mcp` against a real sidecar.
func TestMCPAgentTools(t *testing.T) {
	h := Start(t)
	repo := GitRepo(t, map[string]string{"a.txt": "a\n"})
	p := startMCP(t, envWithout(), "--state-dir", h.StateDir, "--token", h.Token, "--no-start")

	p.ok("workspace_create", map[string]any{"name": "agent", "repo": repo, "env": map[string]any{"GREETING": "hi"},
		"memory_mb": 512, "pids_limit": 256, "idle_stop": "30m", "network_none": true})
	ws, err := h.Client.GetWorkspace(context.Background(), "agent")
	if err != nil {
		t.Fatal(err)
	}
	if ws.Network.Mode != "none" || ws.MemoryMB != 512 || ws.PidsLimit != 256 {
		t.Fatalf("create options not applied: network %+v memory %d pids %d", ws.Network, ws.MemoryMB, ws.PidsLimit)
	}
	res := p.call("run", map[string]any{"workspace": "agent", "command": `echo "$GREETING"; tr a-z A-Z`, "stdin": "shout\n"})
	if got := mcpField(t, res, "stdout"); got != "hi\nSHOUT\n" {
		t.Fatalf("run with env and stdin: exp %q, got %v (%s)", "hi\nSHOUT\n", got, mcpText(res))
	}
	p.ok("run", map[string]any{"workspace": "agent", "command": "cd /tmp", "session": "build"})
	text := p.ok("session_list", map[string]any{"workspace": "agent"})
	if !strings.Contains(text, "build: idle in /tmp") || !strings.Contains(text, "default:") {
		t.Fatalf("session_list: %s", text)
	}
	if text := p.ok("workspace_stop", map[string]any{"workspace": "agent"}); !strings.Contains(text, "stopped") {
		t.Fatalf("workspace_stop: %s", text)
	}
	if text := p.ok("workspace_start", map[string]any{"workspace": "agent"}); !strings.Contains(text, "running") {
		t.Fatalf("workspace_start: %s", text)
	}
	p.ok("run", map[string]any{"workspace": "agent", "command": "echo b > b.txt"})
	res = p.call("apply", map[string]any{"workspace": "agent"})
	if res.IsError || !strings.Contains(mcpText(res), "b.txt") {
		t.Fatalf("apply: %s", mcpText(res))
	}
	if out, err := exec.Command("git", "-C", repo, "diff", "--cached", "--name-only").Output(); err != nil || string(out) != "b.txt\n" {
		t.Fatalf("apply staged %q (%v), exp b.txt", out, err)
	}
	p.ok("workspace_delete", map[string]any{"workspace": "agent"})
	if _, err := h.Client.GetWorkspace(context.Background(), "agent"); !IsCode(err, "not_found") {
		t.Fatalf("workspace_delete by workspace: exp it gone, got %v", err)
	}
}
