package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/patina-dev/patina/internal/syncbuf"
	"github.com/patina-dev/patina/sidecar"
	"github.com/patina-dev/patina/sidecar/client"
	"github.com/patina-dev/patina/tests"
)

// startSidecar runs a sidecar in this process on a fresh state directory
// and returns a client for it; its workspaces are deleted at the end.
func startSidecar(t *testing.T) *client.Client {
	t.Helper()
	tests.RequireDocker(t) // skips under -short
	logs := &syncbuf.Buffer{}
	svc, err := sidecar.New(sidecar.Config{
		Addr:        "127.0.0.1:0",
		StateDir:    t.TempDir(),
		Logger:      slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		AgentBinary: tests.Binary(t), // not this test binary: the real patina, as the agent
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	c := client.New(svc.Addr(), svc.Token(), nil)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if wss, err := c.ListWorkspaces(ctx); err == nil {
			for _, w := range wss {
				if err := c.DeleteWorkspace(ctx, w.ID, client.DeleteOptions{}); err != nil {
					t.Errorf("delete workspace %s: %v", w.Name, err)
				}
			}
		}
		_ = svc.Shutdown(ctx)
		if t.Failed() {
			t.Logf("sidecar logs:\n%s", logs.String())
		}
	})
	return c
}

// structured decodes a result's structured content.
func structured[T any](t *testing.T, res *mcp.CallToolResult) T {
	t.Helper()
	var v T
	b, err := json.Marshal(res.StructuredContent)
	if err == nil {
		err = json.Unmarshal(b, &v)
	}
	if err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
	return v
}

// Every tool against a real sidecar and real containers.
func TestMCPToolsAgainstSidecar(t *testing.T) {
	c := startSidecar(t)
	cs := connect(t, c, Options{OutputHead: 1 << 10, OutputTail: 1 << 10})
	repo := tests.GitRepo(t, map[string]string{"README.md": "# demo\n", "main.go": "package main\n\nfunc main() {\n\tprintln(1)\n}\n"})

	out := mustOK(t, cs, "workspace_create", map[string]any{"name": "demo", "repo": repo})
	if !strings.Contains(out, `Created workspace "demo"`) || !strings.Contains(out, "branch patina/demo") {
		t.Fatalf("workspace_create: %s", out)
	}
	if out := mustOK(t, cs, "workspace_list", nil); !strings.Contains(out, "demo (id ") || !strings.Contains(out, "branch patina/demo") {
		t.Fatalf("workspace_list: %s", out)
	}

	t.Run("run keeps state", func(t *testing.T) {
		out := mustOK(t, cs, "run", map[string]any{"workspace": "demo", "command": "cd /tmp && export X=1"})
		if !strings.Contains(out, "exit code 0 | cwd /tmp") {
			t.Fatalf("run: %s", out)
		}
		res := call(t, cs, "run", map[string]any{"workspace": "demo", "command": "pwd; echo $X"})
		if r := structured[RunOut](t, res); r.Stdout != "/tmp\n1\n" || *r.ExitCode != 0 || r.Cwd != "/tmp" {
			t.Fatalf("state lost: %+v", r)
		}
		// Another session has its own state.
		res = call(t, cs, "run", map[string]any{"workspace": "demo", "command": "pwd; echo x$X", "session": "other"})
		if r := structured[RunOut](t, res); r.Stdout != "/workspace\nx\n" {
			t.Fatalf("sessions share state: %+v", r)
		}
		mustOK(t, cs, "run", map[string]any{"workspace": "demo", "command": "cd /workspace"})
	})

	t.Run("exit code and stderr", func(t *testing.T) {
		res := call(t, cs, "run", map[string]any{"workspace": "demo", "command": "echo oops >&2; (exit 3)"})
		r := structured[RunOut](t, res)
		if res.IsError || *r.ExitCode != 3 || r.Stderr != "oops\n" {
			t.Fatalf("a failing command is a result, not a tool error: %+v %s", r, textOf(res))
		}
		if !strings.Contains(textOf(res), "exit code 3") || !strings.Contains(textOf(res), "--- stderr ---\noops") {
			t.Fatalf("run: %s", textOf(res))
		}
	})

	t.Run("exit ends the shell; the next run starts a new one", func(t *testing.T) {
		for _, sid := range []string{"default", "quitter"} {
			mustOK(t, cs, "run", map[string]any{"workspace": "demo", "session": sid, "command": "cd /etc; export Y=1"})
			res := call(t, cs, "run", map[string]any{"workspace": "demo", "session": sid, "command": "exit 4"})
			if r := structured[RunOut](t, res); res.IsError || !r.SessionEnded || *r.ExitCode != 4 || !strings.Contains(textOf(res), "starts a new shell") {
				t.Fatalf("%s: exit: %s", sid, textOf(res))
			}
			out := mustOK(t, cs, "run", map[string]any{"workspace": "demo", "session": sid, "command": "pwd; echo y$Y"})
			if !strings.Contains(out, "ran in a new shell") || !strings.Contains(out, "--- stdout ---\n/workspace\ny") {
				t.Fatalf("%s: after exit: %s", sid, out)
			}
		}
	})

	t.Run("long output is cut and readable by offset", func(t *testing.T) {
		res := call(t, cs, "run", map[string]any{"workspace": "demo", "command": "seq 1 20000"})
		r := structured[RunOut](t, res)
		text := textOf(res)
		m := regexp.MustCompile(`\[\.\.\. (\d+) bytes omitted \(bytes (\d+) to (\d+)\); read them with command_output\(workspace="demo", command_id="([^"]+)", stream="stdout", offset=(\d+)\)`).FindStringSubmatch(text)
		if m == nil {
			t.Fatalf("no marker in\n%s", text)
		}
		if !strings.HasPrefix(r.Stdout, "1\n2\n3\n") || !strings.HasSuffix(r.Stdout, "19999\n20000\n") || len(r.Stdout) > 2200 {
			t.Fatalf("exp head and tail of seq, got %d bytes", len(r.Stdout))
		}
		from, _ := strconv.Atoi(m[5])
		omitted, _ := strconv.Atoi(m[1])
		got := structured[CommandOutputOut](t, call(t, cs, "command_output", map[string]any{
			"workspace": "demo", "command_id": m[4], "stream": "stdout", "offset": from, "max_bytes": omitted,
		}))
		var want strings.Builder
		for i := 1; i <= 20000; i++ {
			want.WriteString(strconv.Itoa(i) + "\n")
		}
		if got.Data != want.String()[from:from+omitted] || got.State != "finished" || *got.ExitCode != 0 {
			t.Fatalf("command_output: state %s, %d bytes from %d, exp the omitted %d", got.State, len(got.Data), from, omitted)
		}
		if r.StdoutBytes != int64(want.Len()) || r.StdoutOmitted != int64(omitted) {
			t.Fatalf("sizes: %+v", r)
		}
	})

	t.Run("binary output", func(t *testing.T) {
		res := call(t, cs, "run", map[string]any{"workspace": "demo", "command": `printf 'a\377b\n'`})
		r := structured[RunOut](t, res)
		if r.Stdout != "a\uFFFDb\n" || !strings.Contains(textOf(res), "not valid UTF-8") {
			t.Fatalf("got %q: %s", r.Stdout, textOf(res))
		}
		o := structured[CommandOutputOut](t, call(t, cs, "command_output", map[string]any{
			"workspace": "demo", "command_id": r.CommandID, "stream": "stdout", "encoding": "base64",
		}))
		if o.Data != "Yf9iCg==" || !o.EOF {
			t.Fatalf("exp the exact bytes, got %+v", o)
		}
	})

	t.Run("timeout", func(t *testing.T) {
		res := call(t, cs, "run", map[string]any{"workspace": "demo", "command": "cd /etc; sleep 30", "timeout_ms": 300})
		r := structured[RunOut](t, res)
		if !r.TimedOut || !strings.Contains(textOf(res), "timeout_ms=300") {
			t.Fatalf("exp a timeout: %s", textOf(res))
		}
		if out := mustOK(t, cs, "run", map[string]any{"workspace": "demo", "command": "pwd; cd /workspace"}); !strings.Contains(out, "/etc") {
			t.Fatalf("the session lost its state after a timeout: %s", out)
		}
	})

	t.Run("background, output, signal", func(t *testing.T) {
		res := call(t, cs, "run", map[string]any{"workspace": "demo", "session": "bg", "background": true,
			"command": "echo started; trap 'echo got INT; exit 7' INT; while true; do sleep 0.1; done"})
		r := structured[RunOut](t, res)
		if !r.Background || !strings.HasPrefix(r.CommandID, "bg:") || !strings.Contains(textOf(res), `command_output(workspace="demo", command_id="`+r.CommandID+`", stream="stdout")`) {
			t.Fatalf("background: %s", textOf(res))
		}
		mustFail(t, cs, "run", map[string]any{"workspace": "demo", "session": "bg", "command": "true"}, "busy")
		tests.WaitFor(t, "started", 30*time.Second, func() bool {
			o := structured[CommandOutputOut](t, call(t, cs, "command_output", map[string]any{"workspace": "demo", "command_id": r.CommandID, "stream": "stdout"}))
			return o.Data == "started\n" && o.State == "running" && !o.EOF
		})
		out := mustOK(t, cs, "command_signal", map[string]any{"workspace": "demo", "command_id": r.CommandID, "signal": "INT"})
		if !strings.Contains(out, "Sent INT to command "+r.CommandID) {
			t.Fatalf("command_signal: %s", out)
		}
		// The bare number with session works too.
		o := structured[CommandOutputOut](t, call(t, cs, "command_output", map[string]any{"workspace": "demo", "session": "bg", "command_id": strings.TrimPrefix(r.CommandID, "bg:"), "stream": "stdout", "wait_ms": 10000}))
		if o.State != "finished" || o.ExitCode == nil || *o.ExitCode != 7 || o.Data != "started\ngot INT\n" || !o.EOF || o.CommandID != r.CommandID {
			t.Fatalf("after INT: %+v", o)
		}
		mustFail(t, cs, "command_signal", map[string]any{"workspace": "demo", "command_id": r.CommandID, "signal": "TERM"}, "not_running")
	})

	// Sessions number their commands alike: a command id names its session,
	// so it cannot be read back from another session.
	t.Run("command ids name their session", func(t *testing.T) {
		byID := map[string]string{}
		for _, sid := range []string{"default", "s2"} {
			for i := range 2 {
				text := fmt.Sprintf("%s-%d", sid, i)
				r := structured[RunOut](t, call(t, cs, "run", map[string]any{"workspace": "demo", "session": sid, "command": "echo " + text}))
				byID[r.CommandID] = text + "\n"
			}
		}
		if len(byID) != 4 {
			t.Fatalf("exp 4 distinct command ids, got %v", byID)
		}
		for id, exp := range byID {
			if sid, _, _ := strings.Cut(id, ":"); strings.Contains(id, ":") != (sid == "s2") {
				t.Fatalf("exp s2's ids, and only those, qualified: %q", id)
			}
			o := structured[CommandOutputOut](t, call(t, cs, "command_output", map[string]any{"workspace": "demo", "command_id": id, "stream": "stdout"}))
			if o.Data != exp || o.CommandID != id {
				t.Fatalf("command_output(%q): exp %q, got %+v", id, exp, o)
			}
			if !strings.Contains(mustOK(t, cs, "command_output", map[string]any{"workspace": "demo", "command_id": id, "stream": "stdout"}), "stdout of command "+id+" (") {
				t.Fatalf("command_output(%q) names another command", id)
			}
		}
		var s2 string
		for id := range byID {
			if strings.HasPrefix(id, "s2:") {
				s2 = id
			}
		}
		mustFail(t, cs, "command_output", map[string]any{"workspace": "demo", "command_id": s2, "session": "default", "stream": "stdout"},
			"is a command of session \"s2\", but session is \"default\"")
		mustFail(t, cs, "command_signal", map[string]any{"workspace": "demo", "command_id": s2, "session": "other", "signal": "INT"}, "leave session out")
		mustFail(t, cs, "command_signal", map[string]any{"workspace": "demo", "command_id": s2, "signal": "INT"}, "not_running")
	})

	t.Run("offset past the end", func(t *testing.T) {
		r := structured[RunOut](t, call(t, cs, "run", map[string]any{"workspace": "demo", "command": "echo 0123456789abcdefg"}))
		res := call(t, cs, "command_output", map[string]any{"workspace": "demo", "command_id": r.CommandID, "stream": "stdout", "offset": 1000})
		o := structured[CommandOutputOut](t, res)
		if res.IsError || o.TotalBytes != 18 || o.StdoutBytes != 18 || o.NextOffset != 18 || o.Data != "" || !o.EOF {
			t.Fatalf("exp the real size: %+v %s", o, textOf(res))
		}
		for _, part := range []string{"offset 1000 is past the end: stdout has 18 bytes", "offset below 18"} {
			if !strings.Contains(textOf(res), part) {
				t.Fatalf("exp %q in\n%s", part, textOf(res))
			}
		}
		if strings.Contains(textOf(res), "of 1000") {
			t.Fatalf("the offset is not the size: %s", textOf(res))
		}
		// At the very end is not past it.
		if out := mustOK(t, cs, "command_output", map[string]any{"workspace": "demo", "command_id": r.CommandID, "stream": "stdout", "offset": 18}); !strings.Contains(out, "bytes 18 to 18 of 18") {
			t.Fatalf("at the end: %s", out)
		}
	})

	t.Run("files", func(t *testing.T) {
		mustOK(t, cs, "file_write", map[string]any{"workspace": "demo", "path": "src/hello.txt", "content": "one\ntwo\ntwo\n"})
		mustFail(t, cs, "file_edit", map[string]any{"workspace": "demo", "path": "/workspace/src/hello.txt", "search": "two", "replace": "2"},
			"2 times", "lines 2, 3", "which_match")
		mustFail(t, cs, "file_edit", map[string]any{"workspace": "demo", "path": "src/hello.txt", "search": "three", "replace": "3"}, "not found")
		out := mustOK(t, cs, "file_edit", map[string]any{"workspace": "demo", "path": "src/hello.txt", "search": "two", "replace": "2", "which_match": 2})
		if !strings.Contains(out, "replaced occurrence 2 of 2 at line 3") || !strings.Contains(out, "     3\t2") {
			t.Fatalf("file_edit: %s", out)
		}
		out = mustOK(t, cs, "file_read", map[string]any{"workspace": "demo", "path": "src/hello.txt"})
		if out != "/workspace/src/hello.txt: lines 1-3 of 3\n     1\tone\n     2\ttwo\n     3\t2" {
			t.Fatalf("file_read: %q", out)
		}
		res := call(t, cs, "file_read", map[string]any{"workspace": "demo", "path": "src/hello.txt", "start_line": 2, "end_line": 2})
		if r := structured[FileReadOut](t, res); r.Content != "two\n" || r.TotalLines != 3 {
			t.Fatalf("file_read range: %+v", r)
		}
		// The shell sees what the file tools wrote.
		if out := mustOK(t, cs, "run", map[string]any{"workspace": "demo", "command": "cat src/hello.txt"}); !strings.Contains(out, "--- stdout ---\none\ntwo\n2") {
			t.Fatalf("run cat: %s", out)
		}
		if out := mustOK(t, cs, "file_list", map[string]any{"workspace": "demo"}); !strings.Contains(out, "\nsrc/") || !strings.Contains(out, "main.go  (42 bytes)") {
			t.Fatalf("file_list: %s", out)
		}
		for _, tool := range []string{"file_read", "file_delete"} {
			out := mustFail(t, cs, tool, map[string]any{"workspace": "demo", "path": "nosuch.txt"}, "no such file: nosuch.txt (code: not_found)")
			if strings.Contains(out, "statat") {
				t.Fatalf("%s: exp no system call in %q", tool, out)
			}
		}
		mustFail(t, cs, "file_edit", map[string]any{"workspace": "demo", "path": "/workspace/src/nosuch.txt", "search": "a", "replace": "b"}, "no such file: src/nosuch.txt")
		mustFail(t, cs, "file_list", map[string]any{"workspace": "demo", "path": "nosuch"}, "no such directory: nosuch")
		mustFail(t, cs, "file_read", map[string]any{"workspace": "nope", "path": "a.txt"}, `no workspace "nope"`, "not_found")
		mustFail(t, cs, "file_read", map[string]any{"workspace": "demo", "path": "src"}, "directory")
		mustOK(t, cs, "run", map[string]any{"workspace": "demo", "command": "printf 'x\\0y' > bin.dat"})
		if out := mustOK(t, cs, "file_read", map[string]any{"workspace": "demo", "path": "bin.dat"}); !strings.Contains(out, "binary file (3 bytes") {
			t.Fatalf("file_read binary: %s", out)
		}
		mustOK(t, cs, "file_delete", map[string]any{"workspace": "demo", "path": "bin.dat"})
		mustFail(t, cs, "file_delete", map[string]any{"workspace": "demo", "path": "bin.dat"}, "no such file: bin.dat", "not_found")
	})

	t.Run("diff, commit, merge, log", func(t *testing.T) {
		mustOK(t, cs, "file_edit", map[string]any{"workspace": "demo", "path": "main.go", "search": "println(1)", "replace": "println(2)"})
		out := mustOK(t, cs, "diff", map[string]any{"workspace": "demo"})
		for _, part := range []string{"2 files changed", "M  main.go (+1 -1)", "A  src/hello.txt (+3 -0)", "-\tprintln(1)", "+\tprintln(2)"} {
			if !strings.Contains(out, part) {
				t.Fatalf("exp %q in the diff:\n%s", part, out)
			}
		}
		if !strings.Contains(out, "plus uncommitted changes: commit them, then merge") {
			t.Fatalf("exp the diff to say its work is uncommitted:\n%s", out)
		}
		// Uncommitted work reviewed: merge asks for a commit first.
		mustFail(t, cs, "merge", map[string]any{"workspace": "demo"}, "includes uncommitted work", "conflict")
		res := call(t, cs, "commit", map[string]any{"workspace": "demo", "message": "Print 2"})
		r := structured[CommitOut](t, res)
		if res.IsError || !r.Committed || len(r.Commit) < 7 || !r.Reviewed || !strings.Contains(textOf(res), "It is what the last diff showed") {
			t.Fatalf("commit: %s", textOf(res))
		}
		if out := mustOK(t, cs, "commit", map[string]any{"workspace": "demo", "message": "again"}); !strings.Contains(out, "Nothing to commit") {
			t.Fatalf("empty commit: %s", out)
		}
		res = call(t, cs, "merge", map[string]any{"workspace": "demo"})
		if m := structured[MergeOut](t, res); res.IsError || m.Merged != r.Commit || !strings.Contains(textOf(res), "fast-forwarded main") {
			t.Fatalf("merge: %s", textOf(res))
		}
		out = mustOK(t, cs, "log", map[string]any{"workspace": "demo"})
		for _, part := range []string{"command (exit 0): [default] cd /tmp && export X=1", "commit", "merge"} {
			if !strings.Contains(out, part) {
				t.Fatalf("exp %q in the log:\n%s", part, out)
			}
		}
	})

	t.Run("scratch workspace", func(t *testing.T) {
		mustOK(t, cs, "workspace_create", map[string]any{"name": "scratch"})
		mustFail(t, cs, "diff", map[string]any{"workspace": "scratch"}, "no_repository", "log works on any workspace")
		if out := mustOK(t, cs, "log", map[string]any{"workspace": "scratch"}); !strings.Contains(out, "create") {
			t.Fatalf("log of a workspace without repo: %s", out)
		}
		mustOK(t, cs, "workspace_delete", map[string]any{"id": "scratch"})
		mustFail(t, cs, "run", map[string]any{"workspace": "scratch", "command": "true"}, "not_found")
	})
}
