package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// cliResult is what one in-process run of patina printed and returned.
type cliResult struct {
	stdout, stderr string
	code           int
}

// runCLI runs patina in-process with env as its whole environment (HOME
// and XDG_STATE_HOME default to a temporary directory) and stdin.
func runCLI(t *testing.T, env map[string]string, stdin string, args ...string) cliResult {
	t.Helper()
	if env == nil {
		env = map[string]string{}
	}
	if _, ok := env["HOME"]; !ok {
		env["HOME"] = t.TempDir()
	}
	var out, errb bytes.Buffer
	a := &app{
		stdin:        strings.NewReader(stdin),
		stdout:       &out,
		stderr:       &errb,
		getenv:       func(k string) string { return env[k] },
		now:          func() time.Time { return testNow },
		executable:   func() (string, error) { return "/nonexistent/patina", nil },
		queryTimeout: 10 * time.Second,
		apiTimeout:   10 * time.Second,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code := run(ctx, args, a)
	return cliResult{stdout: out.String(), stderr: errb.String(), code: code}
}

var testNow = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// TestUsage checks command lines that patina refuses before calling the
// sidecar (nothing listens at the address given, so a command that got
// as far as calling it would fail with exit 1 instead of 2).
func TestUsage(t *testing.T) {
	env := map[string]string{envAddr: "127.0.0.1:1"}
	tests := []struct {
		name string
		args []string
		code int
		exp  string // in stderr
	}{
		{"unknown command", []string{"bogus"}, exitUsage, `unknown command "bogus"`},
		{"unknown ws command", []string{"ws", "lss"}, exitUsage, `did you mean`},
		{"unknown flag", []string{"ws", "ls", "--bogus"}, exitUsage, "unknown flag: --bogus"},
		{"ls takes no args", []string{"ws", "ls", "x"}, exitUsage, "takes no arguments"},
		{"show needs ws", []string{"ws", "show"}, exitUsage, "needs a workspace"},
		{"show takes one ws", []string{"ws", "show", "a", "b"}, exitUsage, "takes one workspace"},
		{"show empty ws", []string{"ws", "show", ""}, exitUsage, "empty"},
		{"rm needs ws", []string{"ws", "rm"}, exitUsage, "needs a workspace"},
		{"bad network", []string{"ws", "create", "--network", "host"}, exitUsage, "--network must be open or none"},
		{"bad env", []string{"ws", "create", "--env", "NOEQUALS"}, exitUsage, "want KEY=VALUE"},
		{"bad env name", []string{"ws", "create", "--env", "1X=2"}, exitUsage, "not a variable name"},
		{"base without repo", []string{"ws", "create", "--base", "main"}, exitUsage, "--base needs --repo"},
		{"negative memory", []string{"ws", "create", "--memory", "-1"}, exitUsage, "must not be negative"},
		{"memory not a number", []string{"ws", "create", "--memory", "lots"}, exitUsage, "invalid argument"},
		{"commit needs message", []string{"ws", "commit", "w"}, exitUsage, "commit message is required"},
		{"commit blank message", []string{"ws", "commit", "w", "-m", "  "}, exitUsage, "commit message is required"},
		{"commit bad author", []string{"ws", "commit", "w", "-m", "x", "--author", "nobody"}, exitUsage, `want "Name <email>"`},
		{"exec nothing", []string{"exec"}, exitUsage, "needs a workspace and a command"},
		{"exec no command", []string{"exec", "w"}, exitUsage, "needs a command"},
		{"exec no command after dash", []string{"exec", "w", "--"}, exitUsage, "needs a command"},
		{"exec blank command", []string{"exec", "w", "--", " "}, exitUsage, "the command is empty"},
		{"exec dash first", []string{"exec", "--", "w", "true"}, exitUsage, "needs a workspace and a command"},
		{"exec words before dash", []string{"exec", "w", "echo", "--", "hi"}, exitUsage, "put the whole command after --"},
		{"exec bad timeout", []string{"exec", "w", "--timeout", "soon", "--", "true"}, exitUsage, "invalid argument"},
		{"exec negative timeout", []string{"exec", "w", "--timeout", "-1s", "--", "true"}, exitUsage, "must not be negative"},
		{"history needs ws", []string{"history"}, exitUsage, "needs a workspace"},
		{"sessions needs ws", []string{"sessions"}, exitUsage, "needs a workspace"},
		{"serve bad level", []string{"serve", "--log-level", "loud"}, exitUsage, "--log-level"},
		{"serve bad format", []string{"serve", "--log-format", "xml"}, exitUsage, "--log-format"},
		{"serve bad addr", []string{"serve", "--addr", "nowhere"}, exitUsage, "want host:port"},
		{"serve args", []string{"serve", "now"}, exitUsage, "takes no arguments"},
		{"bench zero samples", []string{"bench", "--samples", "0"}, exitUsage, "must be positive"},
		{"image build args", []string{"image", "build", "x"}, exitUsage, "takes no arguments"},
		{"unknown image command", []string{"image", "pull"}, exitUsage, `unknown command "pull"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runCLI(t, env, "", tt.args...)
			if r.code != tt.code {
				t.Fatalf("exp exit %d, got %d (stderr %q)", tt.code, r.code, r.stderr)
			}
			if !strings.Contains(r.stderr, tt.exp) {
				t.Errorf("exp stderr to contain %q, got %q", tt.exp, r.stderr)
			}
			if !strings.HasPrefix(r.stderr, "patina: ") {
				t.Errorf("exp stderr to start with \"patina: \", got %q", r.stderr)
			}
			if !strings.Contains(r.stderr, "--help") {
				t.Errorf("exp a pointer to --help, got %q", r.stderr)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		r := runCLI(t, nil, "", args...)
		if r.code != 0 || r.stdout != "patina "+version+"\n" {
			t.Errorf("%v: exp %q and exit 0, got %q, exit %d", args, "patina "+version+"\n", r.stdout, r.code)
		}
	}
}

// TestHelp checks that every command has --help with a description and
// that the groups list their commands.
func TestHelp(t *testing.T) {
	root := newRootCmd(newApp())
	var paths [][]string
	for _, c := range root.Commands() {
		paths = append(paths, []string{c.Name()})
		if !c.HasSubCommands() && c.Example == "" && c.Name() != "version" && c.Name() != "help" {
			t.Errorf("%s has no examples", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			paths = append(paths, []string{c.Name(), sub.Name()})
			if sub.Example == "" {
				t.Errorf("%s has no examples", sub.CommandPath())
			}
		}
	}
	for _, p := range paths {
		if p[0] == "help" || p[0] == "completion" {
			continue
		}
		t.Run(strings.Join(p, " "), func(t *testing.T) {
			r := runCLI(t, nil, "", append(p, "--help")...)
			if r.code != 0 {
				t.Fatalf("exp exit 0, got %d: %s", r.code, r.stderr)
			}
			if !strings.Contains(r.stdout, "Usage:") {
				t.Errorf("exp usage, got %q", r.stdout)
			}
		})
	}
	r := runCLI(t, nil, "", "ws")
	for _, sub := range []string{"create", "ls", "show", "stop", "start", "rm", "diff", "commit", "merge", "apply", "log"} {
		if !strings.Contains(r.stdout, "\n  "+sub+" ") {
			t.Errorf("exp ws help to list %s, got %q", sub, r.stdout)
		}
	}
	r = runCLI(t, nil, "", "--help")
	for _, cmd := range []string{"serve", "image", "ws", "exec", "sessions", "history", "bench", "version"} {
		if !strings.Contains(r.stdout, "\n  "+cmd+" ") {
			t.Errorf("exp root help to list %s, got %q", cmd, r.stdout)
		}
	}
}
