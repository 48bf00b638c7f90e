package daggerws

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/patina-dev/patina/sidecar/client"
)

func TestExitErrorMessage(t *testing.T) {
	long := strings.Repeat("x", stderrHead+stderrTail+100)
	for _, tc := range []struct {
		name   string
		err    ExitError
		exp    []string
		notExp []string
	}{
		{
			name: "exit code, stderr and stdout",
			err:  ExitError{Workspace: "w", Session: "default", Command: "go test ./...", ExitCode: 2, Stdout: "FAIL x\n", Stderr: "boom\n"},
			exp: []string{`workspace "w", session "default": exit code 2`, "command: go test ./...",
				"stderr:\nboom", "stdout:\nFAIL x", "--allow-failure"},
			notExp: []string{"(no output)", "timed out"},
		},
		{
			name: "no output",
			err:  ExitError{Workspace: "w", Session: "s", Command: "false", ExitCode: 1},
			exp:  []string{"exit code 1", "(no output)"},
		},
		{
			name:   "timeout",
			err:    ExitError{Workspace: "w", Session: "s", Command: "sleep 9", ExitCode: 137, TimedOut: true, TimeoutMS: 300},
			exp:    []string{"timed out after 300 ms (exit code 137)"},
			notExp: []string{"session's shell"},
		},
		{
			name: "ended session and notice",
			err:  ExitError{Workspace: "w", Session: "s", Command: "exit 4", ExitCode: 4, SessionEnded: true, Notice: "hello"},
			exp:  []string{"ended the session's shell", "sidecar: hello"},
		},
		{
			name: "long stderr is trimmed in the middle",
			err:  ExitError{Workspace: "w", Session: "s", Command: "x", ExitCode: 1, Stderr: "HEAD" + long + "TAIL"},
			exp:  []string{"HEAD", "TAIL", "bytes omitted"},
		},
		{
			name:   "long stdout keeps its tail",
			err:    ExitError{Workspace: "w", Session: "s", Command: "x", ExitCode: 1, Stdout: "HEAD" + long + "TAIL"},
			exp:    []string{"TAIL", fmt.Sprintf("stdout (last %d of %d bytes):", stdoutTail, len(long)+8)},
			notExp: []string{"HEAD"},
		},
		{
			name:   "long command is cut",
			err:    ExitError{Workspace: "w", Session: "s", Command: strings.Repeat("echo hi; ", 100), ExitCode: 1},
			exp:    []string{"echo hi; echo hi", "..."},
			notExp: []string{strings.Repeat("echo hi; ", 30)},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := tc.err.Error()
			for _, exp := range tc.exp {
				if !strings.Contains(msg, exp) {
					t.Errorf("exp %q in the message, got:\n%s", exp, msg)
				}
			}
			for _, no := range tc.notExp {
				if strings.Contains(msg, no) {
					t.Errorf("exp no %q in the message, got:\n%s", no, msg)
				}
			}
			if len(msg) > stderrHead+stderrTail+stdoutTail+1024 {
				t.Errorf("exp a bounded message, got %d bytes", len(msg))
			}
		})
	}
}

// addrOnly is an API whose only working method is Addr.
type addrOnly struct {
	API
	addr string
}

func (a addrOnly) Addr() string { return a.addr }

func TestHints(t *testing.T) {
	c := addrOnly{addr: "http://sidecar.example:7070"}
	api := func(code string) error { return &client.APIError{Status: 400, Code: code, Message: "m"} }
	for _, tc := range []struct {
		name string
		err  error
		ws   string
		exp  string
	}{
		{"unauthorized", api(client.CodeUnauthorized), "w", "--token env:PATINA_TOKEN"},
		{"not found", api(client.CodeNotFound), "w", `no workspace "w"`},
		{"no repository", api(client.CodeNoRepository), "w", "created without --repo"},
		{"stopped", api(client.CodeStopped), "w", "patina ws start w"},
		{"busy", api(client.CodeBusy), "w", "another --session"},
		{"ended", api(client.CodeEnded), "w", "pass --fresh"},
		{"refused", &net.OpError{Op: "dial", Err: errors.New("connection refused")}, "", "http://sidecar.example:7070"},
		{"conflict", api(client.CodeConflict), "w", ""},
		{"cancelled", context.Canceled, "w", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := explain(c, "op", tc.ws, tc.err)
			if !errors.Is(err, tc.err) {
				t.Errorf("exp the error chain kept, got %v", err)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "op: ") {
				t.Errorf("exp the operation first, got %q", msg)
			}
			if tc.exp == "" {
				if strings.Contains(msg, "\n") {
					t.Errorf("exp no hint, got %q", msg)
				}
				return
			}
			if !strings.Contains(msg, "\n") || !strings.Contains(msg, tc.exp) {
				t.Errorf("exp a hint with %q, got %q", tc.exp, msg)
			}
		})
	}
}

// TestUnreachable checks the hint when nothing answers: a closed port, and
// a port whose connections close at once (as a Dagger tunnel to a host port
// nobody listens on does).
func TestUnreachable(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()

	hangup, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hangup.Close()
	go func() {
		for {
			conn, err := hangup.Accept()
			if err != nil {
				return
			}
			conn.Close()
		}
	}()

	for name, addr := range map[string]string{"refused": closedAddr, "hang-up": hangup.Addr().String()} {
		t.Run(name, func(t *testing.T) {
			c, err := Connect("http://"+addr, "tok")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err = List(ctx, c, ListRequest{})
			if err == nil || !strings.Contains(err.Error(), "Nothing answered at the sidecar's endpoint (http://"+addr+")") {
				t.Errorf("exp the unreachable hint, got %v", err)
			}
		})
	}
}

func TestConnect(t *testing.T) {
	for _, tc := range []struct {
		endpoint, token string
		exp             error
		addr            string
	}{
		{"http://10.0.0.1:7070", "tok", nil, "http://10.0.0.1:7070"},
		{" http://h:1/ ", " tok\n", nil, "http://h:1"},
		{"http://h:1", "", ErrNoToken, ""},
		{"http://h:1", " \n", ErrNoToken, ""},
		{"", "tok", errors.New("empty"), ""},
		{"h:1", "tok", errors.New("not an http URL"), ""},
		{"tcp://h:1", "tok", errors.New("not an http URL"), ""},
	} {
		c, err := Connect(tc.endpoint, tc.token)
		switch {
		case tc.exp == nil && err != nil:
			t.Errorf("Connect(%q): exp no error, got %v", tc.endpoint, err)
		case tc.exp == nil && c.Addr() != tc.addr:
			t.Errorf("Connect(%q): exp address %q, got %q", tc.endpoint, tc.addr, c.Addr())
		case tc.exp != nil && err == nil:
			t.Errorf("Connect(%q, %q): exp an error, got nil", tc.endpoint, tc.token)
		case tc.exp == ErrNoToken && !errors.Is(err, ErrNoToken):
			t.Errorf("Connect(%q, %q): exp ErrNoToken, got %v", tc.endpoint, tc.token, err)
		}
	}
}

// TestValidation checks that bad arguments fail before the sidecar is
// called (addrOnly would panic if it were).
func TestValidation(t *testing.T) {
	c := addrOnly{addr: "http://unused"}
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		call func() (string, error)
		exp  error
	}{
		{"create: relative repo", func() (string, error) { return Create(ctx, c, CreateRequest{Repo: "src/app"}) }, ErrInvalid},
		{"create: dot repo", func() (string, error) { return Create(ctx, c, CreateRequest{Repo: "."}) }, ErrInvalid},
		{"create: base without repo", func() (string, error) { return Create(ctx, c, CreateRequest{Base: "main"}) }, ErrInvalid},
		{"exec: no workspace", func() (string, error) { return Exec(ctx, c, ExecRequest{Command: "true"}) }, ErrNoWorkspace},
		{"exec: no command", func() (string, error) { return Exec(ctx, c, ExecRequest{Workspace: "w", Command: " \n"}) }, ErrInvalid},
		{"exec: negative timeout", func() (string, error) {
			return Exec(ctx, c, ExecRequest{Workspace: "w", Command: "true", TimeoutMS: -1})
		}, ErrInvalid},
		{"diff: no workspace", func() (string, error) { return Diff(ctx, c, DiffRequest{Workspace: ""}) }, ErrNoWorkspace},
		{"commit: no workspace", func() (string, error) { return Commit(ctx, c, CommitRequest{Message: "m"}) }, ErrNoWorkspace},
		{"commit: no message", func() (string, error) { return Commit(ctx, c, CommitRequest{Workspace: "w", Message: "  "}) }, ErrInvalid},
		{"merge: no workspace", func() (string, error) { return Merge(ctx, c, MergeRequest{}) }, ErrNoWorkspace},
		{"delete: no workspace", func() (string, error) { return Delete(ctx, c, DeleteRequest{}) }, ErrNoWorkspace},
		{"list: unknown format", func() (string, error) { return List(ctx, c, ListRequest{Format: "yaml"}) }, ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := tc.call()
			if !errors.Is(err, tc.exp) {
				t.Errorf("exp %v, got %q, %v", tc.exp, out, err)
			}
		})
	}
}
