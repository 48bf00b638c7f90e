package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patina-dev/patina/sidecar/client"
)

func errorBody(t *testing.T, body []byte) client.ErrorBody {
	t.Helper()
	var eb client.ErrorBody
	if err := json.Unmarshal(body, &eb); err != nil || eb.Error == "" || eb.Code == "" {
		t.Fatalf("exp a JSON error body, got %q", body)
	}
	return eb
}

func TestAuth(t *testing.T) {
	h := Start(t)
	if code, _ := h.Raw("GET", "/healthz", "-", nil, nil); code != 200 {
		t.Fatalf("healthz without token: %d", code)
	}
	for _, tok := range []string{"-", "wrong"} {
		code, body := h.Raw("GET", "/v1/workspaces", tok, nil, nil)
		if code != 401 || errorBody(t, body).Code != "unauthorized" {
			t.Fatalf("token %q: exp 401 unauthorized, got %d %s", tok, code, body)
		}
	}
	if code, _ := h.Raw("GET", "/v1/workspaces", "", nil, nil); code != 200 {
		t.Fatalf("with the token: %d", code)
	}
	// The generated token is written 0600 when none is given.
	dir := t.TempDir()
	cmd := exec.Command(h.Bin, "serve", "--addr", "127.0.0.1:0", "--state-dir", dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	WaitFor(t, "a generated token", 30e9, func() bool {
		_, err := os.Stat(filepath.Join(dir, "token"))
		return err == nil
	})
	st, _ := os.Stat(filepath.Join(dir, "token"))
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %v", st.Mode().Perm())
	}
}

func TestBadRequests(t *testing.T) {
	h := Start(t)
	h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "bad"})
	h.Out("bad", "default", "echo one") // command 1, for the offset row
	exec := "/v1/workspaces/bad/sessions/default/exec"
	cases := []struct {
		name, method, path string
		body               string
		status             int
		code               string
	}{
		{"invalid JSON", "POST", exec, `{"command": `, 400, "invalid"},
		{"not an object", "POST", exec, `["x"]`, 400, "invalid"},
		{"unknown field", "POST", exec, `{"command": "true", "cmd": "x"}`, 400, "invalid"},
		{"trailing data", "POST", exec, `{"command": "true"} {}`, 400, "invalid"},
		{"wrong type", "POST", exec, `{"command": 5}`, 400, "invalid"},
		{"empty body", "POST", exec, ``, 400, "invalid"},
		{"negative timeout", "POST", exec, `{"command": "true", "timeout_ms": -1}`, 400, "invalid"},
		{"bad base64 stdin", "POST", exec, `{"command": "cat", "stdin_base64": "!!"}`, 400, "invalid"},
		{"NUL in command", "POST", exec, `{"command": "echo a\u0000b"}`, 400, "invalid"},
		{"oversized body", "POST", exec, `{"command": "` + strings.Repeat("x", 2<<20) + `"}`, 413, "too_large"},
		{"unknown workspace", "POST", "/v1/workspaces/nope/sessions/default/exec", `{"command": "true"}`, 404, "not_found"},
		{"unknown session", "GET", "/v1/workspaces/bad/sessions/nope", ``, 404, "not_found"},
		{"bad session id", "GET", "/v1/workspaces/bad/sessions/..%2Fx", ``, 400, "invalid"},
		{"unknown command", "GET", "/v1/workspaces/bad/sessions/default/commands/999", ``, 404, "not_found"},
		{"bad offset", "GET", "/v1/workspaces/bad/sessions/default/commands/1/stdout?offset=-3", ``, 400, "invalid"},
		{"bad workspace name", "POST", "/v1/workspaces", `{"name": "-rf"}`, 400, "invalid"},
		{"name with ..", "POST", "/v1/workspaces", `{"name": "a..b"}`, 400, "invalid"},
		{"duplicate name", "POST", "/v1/workspaces", `{"name": "bad"}`, 409, "conflict"},
		{"bad network", "POST", "/v1/workspaces", `{"network": "host"}`, 400, "invalid"},
		{"relative repo", "POST", "/v1/workspaces", `{"repo": "some/dir"}`, 400, "invalid"},
		{"not a repo", "POST", "/v1/workspaces", `{"repo": "/tmp"}`, 400, "invalid"},
		{"bad env name", "POST", "/v1/workspaces", `{"env": {"A-B": "1"}}`, 400, "invalid"},
		{"git on a scratch workspace", "GET", "/v1/workspaces/bad/diff", ``, 409, "no_repository"},
		{"unknown endpoint", "GET", "/v1/nothing", ``, 404, "not_found"},
		{"missing image", "POST", "/v1/workspaces", `{"image": "patina/does-not-exist:never"}`, 503, "unavailable"},
		{"missing command", "POST", exec, `{}`, 400, "invalid"},
		{"field in other case", "POST", exec, `{"COMMAND": "true"}`, 400, "invalid"},
		{"timeout overflow", "POST", exec, `{"command": "true", "timeout_ms": 9223372036854775807}`, 400, "invalid"},
		{"NUL in env value", "POST", "/v1/workspaces/bad/sessions/default/env", `{"env": {"A": "x\u0000y"}}`, 400, "invalid"},
		{"relative cwd", "POST", "/v1/workspaces/bad/sessions", `{"id": "rel", "cwd": "rel"}`, 400, "invalid"},
		{"missing cwd", "POST", "/v1/workspaces/bad/sessions", `{"id": "nocwd", "cwd": "/nonexistent"}`, 400, "invalid"},
		{"PUT a directory", "PUT", "/v1/workspaces/bad/files/newdir/", `x`, 400, "invalid"},
		{"wrong method", "PUT", "/v1/workspaces", `{}`, 405, "method_not_allowed"},
		{"wrong method on an action", "GET", "/v1/workspaces/bad/stop", ``, 405, "method_not_allowed"},
		{"wrong method on files", "POST", "/v1/workspaces/bad/files/x", `x`, 405, "method_not_allowed"},
		{"memory overflow", "POST", "/v1/workspaces", `{"memory_mb": 17592186044416}`, 400, "invalid"},
		{"cpus too small", "POST", "/v1/workspaces", `{"cpus": 1e-12}`, 400, "invalid"},
		{"pids too many", "POST", "/v1/workspaces", `{"pids_limit": 9223372036854775807}`, 400, "invalid"},
		{"odd image", "POST", "/v1/workspaces", `{"image": "-rf"}`, 400, "invalid"},
		{"image with spaces", "POST", "/v1/workspaces", `{"image": "a b"}`, 400, "invalid"},
		{"offset past the end", "GET", "/v1/workspaces/bad/sessions/default/commands/1/stdout?offset=9223372036854775807", ``, 400, "invalid"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, body := h.Raw(c.method, c.path, "", []byte(c.body), map[string]string{"Content-Type": "application/json"})
			eb := errorBody(t, body)
			if code != c.status || eb.Code != c.code {
				t.Fatalf("exp %d %s, got %d %s: %s", c.status, c.code, code, eb.Code, eb.Error)
			}
		})
	}
	// 405 names what the path takes.
	req, _ := http.NewRequest("DELETE", h.Client.Addr()+"/v1/workspaces", nil)
	req.Header.Set("Authorization", "bearer "+h.Token) // the scheme is case-insensitive
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 405 || resp.Header.Get("Allow") != "GET, POST" {
		t.Fatalf("exp 405 with Allow: GET, POST, got %v %v", resp, err)
	}
	// Nothing broke: the session still works, and no workspace leaked.
	h.Out("bad", "default", "true")
	wss, _ := h.Client.ListWorkspaces(context.Background())
	if len(wss) != 1 {
		t.Fatalf("exp 1 workspace after the bad requests, got %d", len(wss))
	}
}

func TestDefaultImageMissingSaysHowToBuild(t *testing.T) {
	h := Start(t)
	code, body := h.Raw("POST", "/v1/workspaces", "", []byte(`{"image": "patina/does-not-exist:never"}`), nil)
	if code != 503 || !strings.Contains(errorBody(t, body).Error, "patina/does-not-exist:never") {
		t.Fatalf("exp a 503 naming the image, got %d %s", code, body)
	}
}

func TestFiles(t *testing.T) {
	h := Start(t)
	h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "files"})
	ctx := context.Background()
	data := []byte("bin\x00\xff\nary")
	if err := h.Client.WriteFile(ctx, "files", "dir/sub/f.bin", data); err != nil {
		t.Fatal(err)
	}
	got, err := h.Client.ReadFile(ctx, "files", "dir/sub/f.bin")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back: %q %v", got, err)
	}
	if out := h.Out("files", "default", "od -An -c dir/sub/f.bin | tr -s ' '"); !strings.Contains(out, `\0`) {
		t.Fatalf("the container does not see the file: %q", out)
	}
	ls, err := h.Client.ListDir(ctx, "files", "dir/sub")
	if err != nil || len(ls) != 1 || ls[0].Name != "f.bin" || ls[0].Size != int64(len(data)) || ls[0].Type != "file" {
		t.Fatalf("list: %+v %v", ls, err)
	}
	h.Out("files", "default", "ln -s /etc escape; ln -s sub dir/inside")
	if _, err := h.Client.ReadFile(ctx, "files", "dir/inside/f.bin"); err != nil {
		t.Fatalf("a symlink inside the workspace must work: %v", err)
	}
	for _, p := range []string{
		"/v1/workspaces/files/files/../../../../etc/passwd",
		"/v1/workspaces/files/files/dir/../../x",
		"/v1/workspaces/files/files/%2e%2e/%2e%2e/etc/passwd",
		"/v1/workspaces/files/files/escape/passwd",
	} {
		for _, m := range []string{"GET", "PUT", "DELETE"} {
			code, body := h.Raw(m, p, "", []byte("x"), nil)
			if code != 400 || errorBody(t, body).Code != "invalid" {
				t.Fatalf("%s %s: exp 400, got %d %s", m, p, code, body)
			}
		}
	}
	if _, err := os.Stat("/etc/passwd"); err != nil {
		t.Fatal(err)
	}
	if err := h.Client.DeleteFile(ctx, "files", "dir"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Client.ReadFile(ctx, "files", "dir/sub/f.bin"); !IsCode(err, "not_found") {
		t.Fatalf("exp 404 after delete, got %v", err)
	}
	code, _ := h.Raw("DELETE", "/v1/workspaces/files/files/", "", nil, nil)
	if code != 400 {
		t.Fatalf("deleting the root: exp 400, got %d", code)
	}
}

// Git through the API: diff, commit, merge back, apply, log.
func TestGitFlow(t *testing.T) {
	h := Start(t)
	repo := GitRepo(t, map[string]string{"main.go": "package main\n"})
	ws := h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "feature", Repo: repo})
	if ws.Branch != "patina/feature" || !strings.HasPrefix(ws.Worktree, "/") || strings.HasPrefix(ws.Worktree, repo) {
		t.Fatalf("workspace: %+v", ws)
	}
	ctx := context.Background()
	h.Out("feature", "default", "echo '// agent' >> main.go; echo new > added.txt; git status --short")
	d, err := h.Client.Diff(ctx, "feature")
	if err != nil || len(d.Files) != 2 || !strings.Contains(d.Text, "+// agent") {
		t.Fatalf("diff: %+v %v", d, err)
	}
	cr, err := h.Client.Commit(ctx, "feature", client.CommitRequest{Message: "agent work"})
	if err != nil || !cr.Committed {
		t.Fatalf("commit: %+v %v", cr, err)
	}
	if _, err := h.Client.Commit(ctx, "feature", client.CommitRequest{}); !IsCode(err, "invalid") {
		t.Fatalf("exp a message to be required, got %v", err)
	}
	mr, err := h.Client.Merge(ctx, "feature", client.MergeRequest{})
	if err != nil || mr.Into != "refs/heads/main" {
		t.Fatalf("merge: %+v %v", mr, err)
	}
	b, err := os.ReadFile(filepath.Join(repo, "added.txt"))
	if err != nil || string(b) != "new\n" {
		t.Fatalf("merged file in the user's repo: %q %v", b, err)
	}
	// A conflicting change: merge refuses and leaves the user's repo as is.
	h.Out("feature", "default", "echo ws > added.txt; git commit -qam ws-change")
	if err := os.WriteFile(filepath.Join(repo, "added.txt"), []byte("user\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitC := exec.Command("git", "-C", repo, "-c", "user.name=u", "-c", "user.email=u@u", "commit", "-qam", "user change")
	if out, err := gitC.CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	head, _ := exec.Command("git", "-C", repo, "rev-parse", "HEAD").Output()
	if _, err := h.Client.Diff(ctx, "feature"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Client.Merge(ctx, "feature", client.MergeRequest{}); !IsCode(err, "conflict") || !strings.Contains(err.Error(), "added.txt") {
		t.Fatalf("exp 409 conflict on added.txt, got %v", err)
	}
	head2, _ := exec.Command("git", "-C", repo, "rev-parse", "HEAD").Output()
	status, _ := exec.Command("git", "-C", repo, "status", "--porcelain").Output()
	if string(head) != string(head2) || len(status) != 0 {
		t.Fatalf("the user's repo changed after a refused merge: %s / %q", head2, status)
	}
	// Apply: a second workspace's change staged in the user's tree.
	h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "apply-me", Repo: repo})
	h.Out("apply-me", "default", "echo applied > applied.txt")
	ar, err := h.Client.Apply(ctx, "apply-me")
	if err != nil || len(ar.Files) != 1 {
		t.Fatalf("apply: %+v %v", ar, err)
	}
	staged, _ := exec.Command("git", "-C", repo, "diff", "--cached", "--name-only").Output()
	if strings.TrimSpace(string(staged)) != "applied.txt" {
		t.Fatalf("exp applied.txt staged, got %q", staged)
	}
	lg, err := h.Client.Log(ctx, "feature")
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for i, e := range lg {
		kinds = append(kinds, e.Kind)
		if i > 0 && e.Time.Before(lg[i-1].Time) {
			t.Fatalf("log out of order at %d: %+v", i, lg)
		}
	}
	if got := strings.Join(kinds, ","); !strings.Contains(got, "created,command,committed") || !strings.Contains(got, "merged") {
		t.Fatalf("log kinds: %s", got)
	}
	// The notes live in the user's repository.
	if out, err := exec.Command("git", "-C", repo, "notes", "--ref", "patina-log", "list").Output(); err != nil || len(out) == 0 {
		t.Fatalf("no log notes in the user's repo: %v", err)
	}
	// Delete without keeping the branch removes it.
	if err := h.Client.DeleteWorkspace(ctx, "apply-me", client.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := exec.Command("git", "-C", repo, "rev-parse", "--verify", "-q", "patina/apply-me").Run(); err == nil {
		t.Fatalf("the branch survived the delete")
	}
	if err := h.Client.DeleteWorkspace(ctx, "feature", client.DeleteOptions{KeepBranch: true}); err != nil {
		t.Fatal(err)
	}
	if err := exec.Command("git", "-C", repo, "rev-parse", "--verify", "-q", "patina/feature").Run(); err != nil {
		t.Fatalf("keep_branch lost the branch")
	}
	if code, _ := h.Raw("GET", "/v1/workspaces/feature", "", nil, nil); code != http.StatusNotFound {
		t.Fatalf("deleted workspace: %d", code)
	}
}

// Code in a workspace cannot make git on the host run a command: the
// user's git directory is not in the container at all (only its objects,
// read-only), and the workspace's own repository (where it may configure
// filters, hooks and fsmonitor as it likes) is never read by host git.
func TestWorkspaceCannotConfigureHostGit(t *testing.T) {
	h := Start(t)
	repo := GitRepo(t, map[string]string{"main.go": "package main\n"})
	h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "sandboxed", Repo: repo})
	marker := filepath.Join(t.TempDir(), "HOST_MARKER")
	common := filepath.Join(repo, ".git")
	for _, cmd := range []string{
		"git config --file " + common + "/config filter.pw.clean 'sh -c \"touch " + marker + "; cat\"'",
		"echo 'touch " + marker + "' > " + common + "/hooks/pre-commit",
		"echo '*.pw filter=pw' > " + common + "/info/attributes",
		"touch /.patina/repo/objects/x",
	} {
		if res := h.Exec("sandboxed", "default", cmd); res.ExitCode == 0 {
			t.Fatalf("exp %q to fail in the workspace, got %+v", cmd, res)
		}
	}
	// The workspace's own repository is its to configure: a filter, a
	// hook and fsmonitor that would touch the host marker if host git ran
	// them.
	h.Out("sandboxed", "default", "mkdir -p "+filepath.Dir(marker)+" && git config filter.pw.clean 'sh -c \"touch "+marker+"; cat\"' && git config filter.pw.smudge 'sh -c \"touch "+marker+"; cat\"' && printf '#!/bin/sh\\ntouch "+marker+"\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit")
	// git still works inside: status, branches, commits.
	h.Out("sandboxed", "default", "echo '*.pw filter=pw' > .gitattributes; echo data > t.pw; git status --short >/dev/null && git checkout -q -b patina/topic && git add -A && git commit -qm inside && git checkout -q patina/sandboxed && git merge -q --ff-only patina/topic")
	// Set last, as it breaks git inside: an fsmonitor host git would run.
	h.Out("sandboxed", "default", "git config core.fsmonitor 'touch "+marker+"'")
	// The marker is in the container's /tmp only if the filters ran inside;
	// on the host it must never appear.
	_ = os.Remove(marker)
	ctx := context.Background()
	d, err := h.Client.Diff(ctx, "sandboxed")
	if err != nil || !strings.Contains(d.Text, "+data") {
		t.Fatalf("diff: %+v %v", d, err)
	}
	if cr, err := h.Client.Commit(ctx, "sandboxed", client.CommitRequest{Message: "x"}); err != nil || cr.Committed {
		t.Fatalf("exp nothing left to commit, got %+v %v", cr, err)
	}
	if mr, err := h.Client.Merge(ctx, "sandboxed", client.MergeRequest{}); err != nil || !mr.FastForward {
		t.Fatalf("merge: %+v %v", mr, err)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a command planted from the workspace ran on the host")
	}
	if out, _ := exec.Command("git", "-C", repo, "config", "--get-regexp", "filter|fsmonitor").Output(); len(out) != 0 {
		t.Fatalf("the repository's config was changed: %s", out)
	}
}
