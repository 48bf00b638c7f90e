package mcpserver

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/patina-dev/patina/sidecar/client"
)

// connect serves New(c, opts) over an in-memory transport and returns a
// connected client session.
func connect(t *testing.T, c *client.Client, opts Options) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, ct := mcp.NewInMemoryTransports()
	ss, err := New(c, opts).Connect(ctx, st, nil)
	if err != nil {
		t.Fatalf("server connect: %v", err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatalf("client connect: %v", err)
	}
	t.Cleanup(func() {
		cs.Close()
		ss.Wait()
		cancel()
	})
	return cs
}

// call calls a tool; a protocol error fails the test.
func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error: %v", name, err)
	}
	return res
}

// textOf joins a result's text content.
func textOf(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// mustOK calls a tool that must succeed and returns its text.
func mustOK(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) string {
	t.Helper()
	res := call(t, cs, name, args)
	if res.IsError {
		t.Fatalf("%s %v: tool error: %s", name, args, textOf(res))
	}
	return textOf(res)
}

// mustFail calls a tool that must fail with a tool error holding parts.
func mustFail(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, parts ...string) string {
	t.Helper()
	res := call(t, cs, name, args)
	text := textOf(res)
	if !res.IsError {
		t.Fatalf("%s %v: exp a tool error, got success: %s", name, args, text)
	}
	for _, p := range parts {
		if !strings.Contains(text, p) {
			t.Fatalf("%s %v: exp %q in the error, got %q", name, args, p, text)
		}
	}
	return text
}

// fakeSidecar answers the API with canned JSON and counts requests.
type fakeSidecar struct {
	*httptest.Server
	requests atomic.Int64
	mu       sync.Mutex
	paths    []string
}

func newFakeSidecar(t *testing.T, h http.HandlerFunc) *fakeSidecar {
	f := &fakeSidecar{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.requests.Add(1)
		f.mu.Lock()
		f.paths = append(f.paths, r.Method+" "+r.URL.Path)
		f.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// deadAddr is an address where nothing listens.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestMCPToolsListed(t *testing.T) {
	cs := connect(t, client.New(deadAddr(t), "", nil), Options{})
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		if len(tool.Description) < 40 {
			t.Errorf("%s: the description is too thin for a model: %q", tool.Name, tool.Description)
		}
		schema, _ := json.Marshal(tool.InputSchema)
		if !strings.Contains(string(schema), `"type":"object"`) {
			t.Errorf("%s: input schema is not an object: %s", tool.Name, schema)
		}
	}
	slices.Sort(names)
	exp := slices.Clone(ToolNames)
	slices.Sort(exp)
	if !slices.Equal(names, exp) {
		t.Fatalf("exp tools %v, got %v", exp, names)
	}
	if init := cs.InitializeResult(); init.Instructions == "" || init.ServerInfo.Name != "patina" {
		t.Fatalf("exp patina's instructions, got %+v", init)
	}
}

func TestMCPRunSchemaRequired(t *testing.T) {
	cs := connect(t, client.New(deadAddr(t), "", nil), Options{})
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range res.Tools {
		if tool.Name != "run" {
			continue
		}
		var s struct {
			Required   []string                   `json:"required"`
			Properties map[string]json.RawMessage `json:"properties"`
		}
		b, _ := json.Marshal(tool.InputSchema)
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatal(err)
		}
		slices.Sort(s.Required)
		if !slices.Equal(s.Required, []string{"command", "workspace"}) {
			t.Fatalf("exp run to require command and workspace, got %v", s.Required)
		}
		for _, p := range []string{"session", "timeout_ms", "background"} {
			if _, ok := s.Properties[p]; !ok {
				t.Fatalf("run has no %s argument: %s", p, b)
			}
		}
		return
	}
	t.Fatal("no run tool")
}

// Bad arguments are tool errors the model can act on, and never reach
// the sidecar.
func TestMCPArgumentValidation(t *testing.T) {
	f := newFakeSidecar(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 500, client.ErrorBody{Error: "unexpected request", Code: "internal"})
	})
	cs := connect(t, client.New(f.URL, "tok", nil), Options{})
	for _, tc := range []struct {
		tool  string
		args  map[string]any
		parts []string
	}{
		{"run", map[string]any{"workspace": "", "command": "ls"}, []string{"workspace is required"}},
		{"run", map[string]any{"workspace": "w", "command": "  "}, []string{"command is required"}},
		{"run", map[string]any{"workspace": "w"}, []string{"command"}}, // the schema's required
		{"run", map[string]any{"workspace": "w", "command": "ls", "timeout_ms": -1}, []string{"timeout_ms must not be negative"}},
		{"run", map[string]any{"workspace": "w", "command": "ls", "bogus": 1}, []string{"bogus"}},
		{"run", map[string]any{"workspace": "w", "command": 42}, []string{"command"}},
		{"command_output", map[string]any{"workspace": "w", "command_id": "c", "stream": "both"}, []string{"stream", "stdout stderr"}}, // the schema's enum
		{"command_output", map[string]any{"workspace": "w", "command_id": "", "stream": "stdout"}, []string{"command_id is required"}},
		{"command_output", map[string]any{"workspace": "w", "command_id": "c", "stream": "stdout", "offset": -5}, []string{"offset must not be negative"}},
		{"command_output", map[string]any{"workspace": "w", "command_id": "c", "stream": "stdout", "encoding": "hex"}, []string{"encoding"}},
		{"command_output", map[string]any{"workspace": "w", "command_id": "build:3", "stream": "stdout", "session": "default"}, []string{`command_id "build:3" is a command of session "build", but session is "default"`}},
		{"command_output", map[string]any{"workspace": "w", "command_id": ":3", "stream": "stdout"}, []string{"no session before"}},
		{"command_signal", map[string]any{"workspace": "w", "command_id": "c", "signal": "STOP"}, []string{"signal", "INT TERM KILL HUP QUIT USR1 USR2"}},
		{"command_signal", map[string]any{"workspace": "w", "command_id": "build:3", "signal": "INT", "session": "other"}, []string{"leave session out"}},
		{"file_read", map[string]any{"workspace": "w", "path": "/etc/passwd"}, []string{"outside /workspace", "use run"}},
		{"file_read", map[string]any{"workspace": "w", "path": "a", "start_line": 5, "end_line": 2}, []string{"end_line (2) is before start_line (5)"}},
		{"file_read", map[string]any{"workspace": "w", "path": "a", "start_line": -1}, []string{"start_line must be 1 or more"}},
		{"file_write", map[string]any{"workspace": "w", "path": "../x", "content": ""}, []string{"leaves /workspace"}},
		{"file_write", map[string]any{"workspace": "w", "path": "/workspace", "content": ""}, []string{"directory itself"}},
		{"file_edit", map[string]any{"workspace": "w", "path": "a", "search": "x", "replace": "y", "which_match": -1}, []string{"which_match must be 1 or more"}},
		{"file_delete", map[string]any{"workspace": "w", "path": "."}, []string{"directory itself"}},
		{"file_list", map[string]any{"workspace": ""}, []string{"workspace is required"}},
		{"workspace_create", map[string]any{"base": "main"}, []string{"base needs repo"}},
		{"workspace_delete", map[string]any{"id": ""}, []string{"workspace is required"}},
		{"workspace_delete", map[string]any{"workspace": "a", "id": "b"}, []string{"give workspace only"}},
		{"workspace_stop", map[string]any{"workspace": ""}, []string{"workspace is required"}},
		{"session_list", map[string]any{"workspace": ""}, []string{"workspace is required"}},
		{"apply", map[string]any{"workspace": ""}, []string{"workspace is required"}},
		{"workspace_create", map[string]any{"network_none": true, "network_allow": []string{"a.test"}}, []string{"not both"}},
		{"commit", map[string]any{"workspace": "w", "message": " "}, []string{"message is required"}},
		{"diff", map[string]any{"workspace": ""}, []string{"workspace is required"}},
		{"port_forward", map[string]any{"workspace": "w", "port": 70000}, []string{"port", "65535"}},
		{"port_forward", map[string]any{"workspace": "", "port": 80}, []string{"workspace is required"}},
		{"network_restrict", map[string]any{"workspace": "w", "none": true, "allow": []string{"a.test"}}, []string{"not both"}},
		{"network_restrict", map[string]any{"workspace": ""}, []string{"workspace is required"}},
	} {
		mustFail(t, cs, tc.tool, tc.args, tc.parts...)
	}
	if n := f.requests.Load(); n != 0 {
		t.Fatalf("exp no request to the sidecar, got %d: %v", n, f.paths)
	}
}

// The sidecar's errors come back as tool errors with its message and code
// (and a hint), and the server carries on.
func TestMCPSidecarErrorsAreToolErrors(t *testing.T) {
	f := newFakeSidecar(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/v1/workspaces/nope/"):
			writeJSON(w, 404, client.ErrorBody{Error: `no workspace "nope"`, Code: client.CodeNotFound})
		case strings.HasSuffix(r.URL.Path, "/exec"):
			writeJSON(w, 409, client.ErrorBody{Error: "session default is running another command", Code: client.CodeBusy})
		case r.URL.Path == "/v1/workspaces/scratch/diff":
			writeJSON(w, 409, client.ErrorBody{Error: "workspace scratch was created without a repo", Code: client.CodeNoRepository})
		case r.URL.Path == "/v1/workspaces":
			writeJSON(w, 200, []client.Workspace{{ID: "ws1", Name: "demo", Status: "running", Image: "img"}})
		default:
			w.WriteHeader(502)
			_, _ = w.Write([]byte("bad gateway"))
		}
	})
	cs := connect(t, client.New(f.URL, "tok", nil), Options{})
	mustFail(t, cs, "run", map[string]any{"workspace": "nope", "command": "ls"}, `no workspace "nope"`, "not_found")
	mustFail(t, cs, "run", map[string]any{"workspace": "w", "command": "ls"}, "running another command", "busy", "command_signal")
	out := mustFail(t, cs, "diff", map[string]any{"workspace": "scratch"}, "without a repo", "no_repository", "workspace_create(repo=...)", "log works on any workspace")
	if strings.Contains(out, "and log need") {
		t.Fatalf("log works without a repository: %s", out)
	}
	mustFail(t, cs, "file_read", map[string]any{"workspace": "w", "path": "a"}, "bad gateway", "http_502")
	if out := mustOK(t, cs, "workspace_list", nil); !strings.Contains(out, "demo (id ws1): running") {
		t.Fatalf("exp the workspace listed, got %q", out)
	}
}

func TestMCPUnreachableSidecar(t *testing.T) {
	cs := connect(t, client.New(deadAddr(t), "tok", nil), Options{})
	mustFail(t, cs, "workspace_list", nil, "cannot reach the patina sidecar", "refused")
}

// A sidecar gone away is found again through Options.Reconnect, and the
// call is tried once more.
func TestMCPReconnect(t *testing.T) {
	f := newFakeSidecar(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, []client.Workspace{})
	})
	var reconnects atomic.Int64
	cs := connect(t, client.New(deadAddr(t), "tok", nil), Options{
		Reconnect: func(context.Context) (*client.Client, error) {
			reconnects.Add(1)
			return client.New(f.URL, "tok", nil), nil
		},
	})
	for range 3 {
		if out := mustOK(t, cs, "workspace_list", nil); !strings.Contains(out, "No workspaces") {
			t.Fatalf("got %q", out)
		}
	}
	if n := reconnects.Load(); n != 1 {
		t.Fatalf("exp one reconnect, got %d", n)
	}
}

// A panicking handler is a tool error, not a dead server.
func TestMCPPanicIsToolError(t *testing.T) {
	cs := connect(t, nil, Options{}) // a nil client panics on use
	mustFail(t, cs, "workspace_list", nil, "internal error in patina's workspace_list tool")
	mustFail(t, cs, "run", map[string]any{"workspace": "", "command": "x"}, "workspace is required")
}

func TestMCPRunResult(t *testing.T) {
	s := &server{opts: Options{OutputHead: 20, OutputTail: 20}.withDefaults()}
	var full strings.Builder
	for i := range 1000 {
		full.WriteString(strings.Repeat("x", i%7) + "\n")
	}
	data := full.String()
	// The sidecar kept 100 bytes of head and tail.
	res := client.ExecResult{
		CommandID: "c1", ExitCode: 3, Stdout: data[:100], StdoutTail: data[len(data)-100:], StdoutBytes: int64(len(data)),
		StdoutTruncated: true, Stderr: "warn\xff\n", StderrBase64: "d2Fybv8K", StderrBytes: 6, Cwd: "/tmp", DurationMS: 1500,
	}
	text, out, err := s.runResult("w", "build", 1000, res)
	if err != nil {
		t.Fatal(err)
	}
	if *out.ExitCode != 3 || out.Cwd != "/tmp" || out.CommandID != "build:c1" || out.StdoutBytes != int64(len(data)) {
		t.Fatalf("got %+v", out)
	}
	if int64(len(out.Stdout)) > 200 || out.StdoutOmitted < int64(len(data))-40 {
		t.Fatalf("stdout not cut: %d bytes shown, %d omitted", len(out.Stdout), out.StdoutOmitted)
	}
	for _, part := range []string{
		"exit code 3 | cwd /tmp | 1.5 s | command_id build:c1",
		"--- stdout ---\n",
		`bytes omitted (bytes `,
		`read them with command_output(workspace="w", command_id="build:c1", stream="stdout", offset=`,
		"--- stderr ---\nwarn\uFFFD\n",
		`stderr is not valid UTF-8`,
		`command_output(workspace="w", command_id="build:c1", stream="stderr", encoding="base64")`,
	} {
		if !strings.Contains(text, part) {
			t.Fatalf("exp %q in\n%s", part, text)
		}
	}
	if strings.Contains(text, "session=") {
		t.Fatalf("the command id names its session: no session argument needed in\n%s", text)
	}
	// The marker's offset is where the omitted bytes start.
	i := strings.Index(text, "offset=")
	var off int
	for _, r := range text[i+len("offset="):] {
		if r < '0' || r > '9' {
			break
		}
		off = off*10 + int(r-'0')
	}
	head := out.Stdout[:strings.Index(out.Stdout, "[...")]
	if len(head) == off+1 {
		head = head[:off] // render put the marker on a line of its own
	}
	if !strings.HasPrefix(data, head) || off != len(head) {
		t.Fatalf("the head %q is not bytes [0,%d) of stdout", head, off)
	}

	t.Run("timed out, session ended", func(t *testing.T) {
		text, out, _ := s.runResult("w", "default", 300, client.ExecResult{CommandID: "c2", ExitCode: 130, TimedOut: true, Interrupted: true, SessionEnded: true})
		if out.CommandID != "c2" || !strings.Contains(text, "command_id c2\n") {
			t.Fatalf("exp the default session's id unqualified, got %q in\n%s", out.CommandID, text)
		}
		if strings.Contains(text, "kept its state") {
			t.Fatalf("an ended session kept nothing:\n%s", text)
		}
		for _, part := range []string{"(no output)", "timeout_ms=300", `the next run in session "default" starts a new shell`} {
			if !strings.Contains(text, part) {
				t.Fatalf("exp %q in\n%s", part, text)
			}
		}
	})
}

func TestMCPNormalizeSignal(t *testing.T) {
	for in, exp := range map[string]string{"INT": "INT", "sigterm": "TERM", "Kill": "KILL", " SIGHUP ": "HUP"} {
		if got, err := normalizeSignal(in); err != nil || got != exp {
			t.Errorf("normalizeSignal(%q): exp %q, got %q %v", in, exp, got, err)
		}
	}
	for _, in := range []string{"", "STOP", "9", "SIGSEGV"} {
		if _, err := normalizeSignal(in); err == nil {
			t.Errorf("normalizeSignal(%q): exp an error", in)
		}
	}
}

func TestMCPExpandRepo(t *testing.T) {
	for _, tc := range []struct{ repo, dir, exp string }{
		{"/abs/repo", "/work", "/abs/repo"},
		{".", "/work/proj", "/work/proj"},
		{"../other", "/work/proj", "/work/other"},
		{"sub/", "/work", "/work/sub"},
	} {
		if got := expandRepo(tc.repo, tc.dir); got != tc.exp {
			t.Errorf("expandRepo(%q, %q): exp %q, got %q", tc.repo, tc.dir, tc.exp, got)
		}
	}
}
