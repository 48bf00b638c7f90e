package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/patina-dev/patina/sidecar/client"
)

// TestMergeNoBranch: merging into a branch that does not exist names the
// workspace and the repository, not the workspace's id and the sidecar's
// internal prefixes.
func TestMergeNoBranch(t *testing.T) {
	f := newFakeSidecar(t)
	r := runCLI(t, f.env(), "", "ws", "merge", "demo", "--into", "nosuch")
	exp := "patina: merge demo: /home/me/repo has no branch \"nosuch\" to merge into.\n" +
		"Name a local branch of that repository with --into, or leave --into out to merge into the branch it was created from, main.\n"
	if r.code != exitFailure || r.stderr != exp {
		t.Errorf("exp exit 1 and\n%s\ngot %d and\n%s", exp, r.code, r.stderr)
	}
	// A missing workspace keeps the sidecar's message.
	r = runCLI(t, f.env(), "", "ws", "merge", "nope", "--into", "nosuch")
	if r.code != exitFailure || r.stderr != "patina: not found: no workspace \"nope\"\n" {
		t.Errorf("exp exit 1 and not found, got %d, %q", r.code, r.stderr)
	}
	r = runCLI(t, f.env(), "", "ws", "merge", "demo")
	if r.code != 0 || r.stdout != "fast-forwarded main: aaaa..bbbb\n" {
		t.Errorf("exp a fast-forward, got %d, %q (stderr %q)", r.code, r.stdout, r.stderr)
	}
}

func TestApply(t *testing.T) {
	f := newFakeSidecar(t)
	r := runCLI(t, f.env(), "", "ws", "apply", "demo")
	exp := "staged in /home/me/repo:\nSTATUS     PATH     LINES\nmodified   README   +1 -0\n1 file changed, 1 insertion(+), 0 deletions(-)\n"
	if r.code != 0 || r.stdout != exp {
		t.Errorf("exp exit 0 and\n%s\ngot %d and\n%s(stderr %q)", exp, r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, f.env(), "", "ws", "apply", "demo", "--json")
	var res client.ApplyResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || r.code != 0 {
		t.Fatalf("ws apply --json: exit %d, %v: %q", r.code, err, r.stdout)
	}
	if res.Dir != "/home/me/repo" || len(res.Files) != 1 || res.Files[0].Path != "README" {
		t.Errorf("unexpected result %+v", res)
	}
}

// TestJSONWithTables checks the rule that every command printing a table
// has --json.
func TestJSONWithTables(t *testing.T) {
	root := newRootCmd(newApp())
	for _, path := range []string{"ws ls", "ws show", "ws create", "ws diff", "ws apply", "ws log", "sessions", "history", "bench"} {
		cmd, _, err := root.Find(strings.Fields(path))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if cmd.Flags().Lookup("json") == nil {
			t.Errorf("patina %s prints a table but has no --json", path)
		}
	}
}
