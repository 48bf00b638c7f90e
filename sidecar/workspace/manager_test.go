package workspace

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/patina-dev/patina/sidecar/agent"
	"github.com/patina-dev/patina/sidecar/hostdir"
)

func newManager(t *testing.T, eng *fakeEngine, stateDir string) *Manager {
	t.Helper()
	m, err := New(Config{StateDir: stateDir, DefaultImage: "img", AdoptWait: 2 * time.Second, InterruptGrace: 200 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)}, eng, fakeImages{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	t.Cleanup(func() { unsealAll(filepath.Join(stateDir, "worktrees")) })
	return m
}

// unsealAll undoes the nosuid,nodev mounts a test's workspaces left (a
// failed test does not delete them).
func unsealAll(root string) {
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = hostdir.Unseal(p)
		}
		return nil
	})
}

func out(t *testing.T, m *Manager, ws, sid, cmd string) string {
	t.Helper()
	res, err := m.Exec(context.Background(), ws, sid, ExecRequest{Command: cmd})
	if err != nil {
		t.Fatalf("exec %q: %v", cmd, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("exec %q: exit %d: %s", cmd, res.ExitCode, res.Stderr.Data)
	}
	return string(res.Stdout.Data)
}

func TestLifecycle(t *testing.T) {
	eng := newFakeEngine(t)
	m := newManager(t, eng, t.TempDir())
	ctx := context.Background()
	ws, err := m.Create(ctx, CreateRequest{Name: "life"})
	if err != nil {
		t.Fatal(err)
	}
	if ws.Status != StatusRunning || ws.Agent == nil || !ws.Agent.Connected || ws.Agent.Restarts != 0 {
		t.Fatalf("created: %+v %+v", ws, ws.Agent)
	}
	out(t, m, "life", "default", "echo data > file; cd /tmp; export KEEP=1")
	time.Sleep(100 * time.Millisecond) // the idle snapshot
	if _, err := m.Stop(ctx, "life"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Exec(ctx, "life", "default", ExecRequest{Command: "true"}); !errors.Is(err, ErrStopped) {
		t.Fatalf("exp stopped, got %v", err)
	}
	// History stays readable while stopped.
	var n int
	if err := m.History(ctx, "life", "default", func(p []CommandInfo) error { n += len(p); return nil }); err != nil || n != 1 {
		t.Fatalf("history while stopped: %d %v", n, err)
	}
	if ss, err := m.Sessions(ctx, "life"); err != nil || len(ss) != 1 {
		t.Fatalf("sessions while stopped: %+v %v", ss, err)
	}
	if _, err := m.Start(ctx, "life"); err != nil {
		t.Fatal(err)
	}
	if got := out(t, m, "life", "default", "echo $PWD $KEEP; cat /dev/null"); got != "/tmp 1\n" {
		t.Fatalf("state after start: %q", got)
	}
	evs, err := m.Log(ctx, "life")
	var kinds []string
	for _, e := range evs {
		kinds = append(kinds, e.Kind)
	}
	if err != nil || !strings.Contains(strings.Join(kinds, ","), "created,command,stopped,started") {
		t.Fatalf("log: %v %v", kinds, err)
	}
	if err := m.Delete(ctx, "life", false); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Get("life"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("exp not found after delete, got %v", err)
	}
}

// A sidecar restart: the new Manager adopts in the background (the
// workspace says "adopting" meanwhile), finds the command that ran while it
// was away, and the session's state.
func TestAdopt(t *testing.T) {
	eng := newFakeEngine(t)
	dir := t.TempDir()
	m := newManager(t, eng, dir)
	ctx := context.Background()
	if _, err := m.Create(ctx, CreateRequest{Name: "adopt"}); err != nil {
		t.Fatal(err)
	}
	out(t, m, "adopt", "default", "cd /tmp; export A=1")
	id, _, err := m.StartCommand(ctx, "adopt", "default", ExecRequest{Command: "sleep 0.3; echo late"})
	if err != nil {
		t.Fatal(err)
	}
	m.Close()

	m2 := newManager(t, eng, dir)
	done := m2.Adopt()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("adoption did not finish")
	}
	res, err := m2.Wait(ctx, "adopt", "default", id)
	if err != nil || string(res.Stdout.Data) != "late\n" {
		t.Fatalf("the command's result after adoption: %+v %v", res, err)
	}
	if got := out(t, m2, "adopt", "default", "echo $PWD $A"); got != "/tmp 1\n" {
		t.Fatalf("state after adoption: %q", got)
	}
}

// One workspace whose engine calls hang during adoption does not stop the
// API for the others: it reports "adopting", and its calls fail after
// AdoptWait with ErrAdopting.
func TestAdoptionDoesNotBlockOthers(t *testing.T) {
	eng := newFakeEngine(t)
	dir := t.TempDir()
	m := newManager(t, eng, dir)
	ctx := context.Background()
	stuck, _ := m.Create(ctx, CreateRequest{Name: "stuck"})
	if _, err := m.Create(ctx, CreateRequest{Name: "fine"}); err != nil {
		t.Fatal(err)
	}
	m.Close()
	eng.mu.Lock()
	eng.blockInspect[stuck.ID] = true
	eng.mu.Unlock()
	m2 := newManager(t, eng, dir)
	m2.Adopt()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ws, _ := m2.Get("fine")
		if ws.Status == StatusRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the other workspace was not adopted: %+v", ws)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if ws, _ := m2.Get("stuck"); ws.Status != StatusAdopting {
		t.Fatalf("exp adopting, got %+v", ws)
	}
	if got := out(t, m2, "fine", "default", "echo ok"); got != "ok\n" {
		t.Fatalf("the other workspace: %q", got)
	}
	start := time.Now()
	if _, err := m2.Exec(ctx, "stuck", "default", ExecRequest{Command: "true"}); !errors.Is(err, ErrAdopting) {
		t.Fatalf("exp ErrAdopting, got %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the call waited %s", d)
	}
	if len(m2.List()) != 2 {
		t.Fatal("List blocked or lost a workspace")
	}
}

// The agent is killed: the next call starts it again, the session's state
// is there, and the API says what happened.
func TestAgentRestart(t *testing.T) {
	eng := newFakeEngine(t)
	m := newManager(t, eng, t.TempDir())
	ctx := context.Background()
	ws, _ := m.Create(ctx, CreateRequest{Name: "ag"})
	out(t, m, "ag", "default", "export X=1")
	eng.killAgent(ws.ID)
	if got := out(t, m, "ag", "default", "echo $X"); got != "1\n" {
		t.Fatalf("after the agent's restart: %q", got)
	}
	v, _ := m.Get("ag")
	if v.Agent == nil || v.Agent.Restarts != 1 || v.Agent.LastRestart == nil || v.Agent.LastRestartReason == "" {
		t.Fatalf("exp the restart reported, got %+v", v.Agent)
	}
	evs, _ := m.Log(ctx, "ag")
	found := false
	for _, e := range evs {
		found = found || e.Kind == "agent-restarted"
	}
	if !found {
		t.Fatalf("exp an agent-restarted event, got %+v", evs)
	}
}

// A hostile agent (its answers are garbage) costs its own workspace a
// clear error; another workspace works on.
func TestHostileAgent(t *testing.T) {
	eng := newFakeEngine(t)
	m := newManager(t, eng, t.TempDir())
	ctx := context.Background()
	bad, err := m.Create(ctx, CreateRequest{Name: "bad"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(ctx, CreateRequest{Name: "good"}); err != nil {
		t.Fatal(err)
	}
	eng.mu.Lock()
	eng.hostile[bad.ID] = true
	eng.mu.Unlock()
	eng.killAgent(bad.ID) // the workspace replaces its agent
	start := time.Now()
	_, err = m.Exec(ctx, "bad", "default", ExecRequest{Command: "true"})
	if !errors.Is(err, agent.ErrUnavailable) {
		t.Fatalf("exp ErrUnavailable, got %v", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("the hostile agent held the call %s", d)
	}
	if got := out(t, m, "good", "default", "echo fine"); got != "fine\n" {
		t.Fatalf("the other workspace: %q", got)
	}
}

func TestContainerRemovedBehindBack(t *testing.T) {
	eng := newFakeEngine(t)
	m := newManager(t, eng, t.TempDir())
	ctx := context.Background()
	ws, _ := m.Create(ctx, CreateRequest{Name: "gone"})
	out(t, m, "gone", "default", "cd /usr; export K=1")
	time.Sleep(100 * time.Millisecond)
	eng.removeBehindBack(ws.ID)
	_, err := m.Exec(ctx, "gone", "default", ExecRequest{Command: "true"})
	if !errors.Is(err, ErrStopped) || !strings.Contains(err.Error(), "removed") {
		t.Fatalf("exp stopped saying removed, got %v", err)
	}
	if _, err := m.Start(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	if got := out(t, m, "gone", "default", "echo $PWD $K"); got != "/usr 1\n" {
		t.Fatalf("after start: %q", got)
	}
}

func TestValidateCreate(t *testing.T) {
	m := newManager(t, newFakeEngine(t), t.TempDir())
	for name, req := range map[string]CreateRequest{
		"memory overflow":              {MemoryMB: 1 << 44},
		"memory too low":               {MemoryMB: 3},
		"tiny cpus":                    {CPUs: 1e-12},
		"too many cpus":                {CPUs: 1e6},
		"negative pids":                {PidsLimit: -1},
		"huge pids":                    {PidsLimit: 1 << 40},
		"odd image":                    {Image: "-rf"},
		"image with ..":                {Image: "a/../b"},
		"bad network":                  {Network: &NetworkPolicy{Mode: "host"}},
		"bad allow entry":              {Network: &NetworkPolicy{Mode: "allow", Allow: []string{"a b"}}},
		"bad name":                     {Name: "a..b"},
		"base, no repo":                {Base: "main"},
		"relative repo":                {Repo: "x"},
		"NUL in env":                   {Env: map[string]string{"A": "a\x00"}},
		"placement on a single engine": {Placement: []string{"node.role==worker"}},
	} {
		r := req
		if err := m.validateCreate(&r); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: exp ErrInvalid, got %v", name, err)
		}
	}
}

// A sidecar that cannot enforce a network policy gives network none by
// default and refuses the others, saying why.
func TestNetworkNotEnforced(t *testing.T) {
	m := newManager(t, newFakeEngine(t), t.TempDir())
	req := CreateRequest{}
	if err := m.validateCreate(&req); err != nil || req.Network == nil || req.Network.Mode != NetworkNone {
		t.Fatalf("exp network none by default, got %+v %v", req.Network, err)
	}
	for _, mode := range []string{NetworkOpen, NetworkAllow} {
		req := CreateRequest{Network: &NetworkPolicy{Mode: mode}}
		if err := m.validateCreate(&req); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "cannot be enforced") {
			t.Errorf("%s: exp ErrUnsupported saying why, got %v", mode, err)
		}
	}
}

// placingEngine is the fake engine as a cluster would be: it takes
// placement constraints.
type placingEngine struct{ *fakeEngine }

func (placingEngine) Places() bool { return true }

func TestPlacement(t *testing.T) {
	m := newManager(t, newFakeEngine(t), t.TempDir())
	m.eng = placingEngine{m.eng.(*fakeEngine)}
	for _, ok := range [][]string{
		{"node.role==worker"}, {"node.labels.gpu==1", "node.hostname!=a-b.c"}, {"node.id == abc123"}, {"engine.labels.zone==eu-1"},
	} {
		if err := m.validateCreate(&CreateRequest{Placement: ok}); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range [][]string{
		{"node.role==worker; rm -rf /"}, {"rm"}, {"node.labels.x=~y"}, {"node.role=="}, {"container.x==1"},
		{"node.labels." + strings.Repeat("x", 300) + "==1"}, make([]string, 17),
	} {
		if err := m.validateCreate(&CreateRequest{Placement: bad}); !errors.Is(err, ErrInvalid) {
			t.Errorf("%q: exp ErrInvalid, got %v", bad, err)
		}
	}
}

func gitRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "init"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		if o, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, o)
		}
	}
	return dir
}

// The git flow through the domain: commits made inside reach the branch
// when recorded; a merge takes exactly what was reviewed (a diff, or a
// commit of exactly what a diff showed), and that survives a restart of
// the sidecar; a fast-forward adds exactly the agent's commits.
func TestGitFlow(t *testing.T) {
	eng := newFakeEngine(t)
	dir := t.TempDir()
	m := newManager(t, eng, dir)
	ctx := context.Background()
	repo := gitRepo(t)
	ws, err := m.Create(ctx, CreateRequest{Name: "g", Repo: repo})
	if err != nil {
		t.Fatal(err)
	}
	if ws.Branch != "patina/g" || ws.Worktree == "" {
		t.Fatalf("workspace: %+v", ws)
	}
	wt := ws.Worktree
	out(t, m, "g", "default", "cd "+wt+" && echo one > a && git add a && git commit -qm one && echo two > b")
	if _, err := m.Merge(ctx, "g", MergeRequest{}); !errors.Is(err, ErrUnreviewed) || !strings.Contains(err.Error(), "look at the diff first") {
		t.Fatalf("merge before a diff: exp ErrUnreviewed, got %v", err)
	}
	d, err := m.Diff(ctx, "g")
	if err != nil || len(d.Files) != 2 || !d.Uncommitted {
		t.Fatalf("diff: %+v %v", d, err)
	}
	// The diff held uncommitted work: a merge naming no commit asks for a
	// commit first; naming the diff's commit merges exactly it.
	if _, err := m.Merge(ctx, "g", MergeRequest{}); !errors.Is(err, ErrUnreviewed) || !strings.Contains(err.Error(), "commit it first") {
		t.Fatalf("merge of a review with uncommitted work: exp ErrUnreviewed, got %v", err)
	}
	base, _ := exec.Command("git", "-C", repo, "rev-parse", "main").Output()
	mr, err := m.Merge(ctx, "g", MergeRequest{Commit: d.Commit[:10]})
	if err != nil || !mr.FastForward || !mr.Uncommitted || mr.Merged != d.Commit {
		t.Fatalf("merge: %+v %v", mr, err)
	}
	n, _ := exec.Command("git", "-C", repo, "rev-list", "--count", strings.TrimSpace(string(base))+"..main").Output()
	if strings.TrimSpace(string(n)) != "1" {
		t.Fatalf("exp exactly the agent's one commit merged, got %s", n)
	}
	// A commit of exactly what the diff showed keeps the review.
	cr, err := m.Commit(ctx, "g", CommitRequest{Message: "two"})
	if err != nil || !cr.Committed || !cr.Reviewed {
		t.Fatalf("commit: %+v %v", cr, err)
	}
	// Work after the review, committed inside: the review stays on the
	// commit before it, across a restart of the sidecar.
	out(t, m, "g", "default", "cd "+wt+" && echo three > c && git add c && git commit -qm three")
	m.Close()
	m = newManager(t, eng, dir)
	<-m.Adopt()
	_, err = m.Merge(ctx, "g", MergeRequest{})
	if !errors.Is(err, ErrUnreviewed) || !strings.Contains(err.Error(), "workspace g changed since you reviewed it at "+cr.Commit[:10]) {
		t.Fatalf("merge after the workspace moved: exp ErrUnreviewed naming %s, got %v", cr.Commit[:10], err)
	}
	if _, err := m.Merge(ctx, "g", MergeRequest{Commit: d.Commit}); err != nil {
		t.Fatalf("a merge naming the earlier commit: %v", err)
	}
	// A commit of more than was shown does not become reviewed.
	out(t, m, "g", "default", "cd "+wt+" && echo four > d")
	if _, err := m.Diff(ctx, "g"); err != nil {
		t.Fatal(err)
	}
	out(t, m, "g", "default", "cd "+wt+" && echo five > e")
	cr2, err := m.Commit(ctx, "g", CommitRequest{Message: "four and five"})
	if err != nil || !cr2.Committed || cr2.Reviewed {
		t.Fatalf("commit of more than the diff showed: %+v %v", cr2, err)
	}
	if _, err := m.Merge(ctx, "g", MergeRequest{}); !errors.Is(err, ErrUnreviewed) {
		t.Fatalf("exp the unreviewed commit refused, got %v", err)
	}
	d2, err := m.Diff(ctx, "g")
	if err != nil || d2.Commit != cr2.Commit || d2.Uncommitted {
		t.Fatalf("diff: %+v %v", d2, err)
	}
	if mr, err := m.Merge(ctx, "g", MergeRequest{}); err != nil || mr.Merged != cr2.Commit || mr.Commit != cr2.Commit {
		t.Fatalf("merge of the reviewed commit: %+v %v", mr, err)
	}
	if err := m.Delete(ctx, "g", false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(wt); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the worktree directory survived the delete: %v", err)
	}
	if o, _ := exec.Command("git", "-C", repo, "branch", "--list", "patina/*").Output(); len(o) != 0 {
		t.Fatalf("the branch survived: %s", o)
	}
}

// Files go through the agent: a FIFO where a file is expected and a link
// out of the workspace are refused, at once.
func TestFiles(t *testing.T) {
	eng := newFakeEngine(t)
	m := newManager(t, eng, t.TempDir())
	ctx := context.Background()
	if _, err := m.Create(ctx, CreateRequest{Name: "f"}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.WriteFile(ctx, "f", "d/x.txt", strings.NewReader("hi")); err != nil {
		t.Fatal(err)
	}
	f, _, err := m.ReadFile(ctx, "f", "d/x.txt")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(f)
	f.Close()
	if string(b) != "hi" {
		t.Fatalf("read: %q", b)
	}
	out(t, m, "f", "default", "mkfifo fifo; ln -s /etc esc")
	for _, p := range []string{"fifo", "esc/passwd", "../x"} {
		start := time.Now()
		if _, _, err := m.ReadFile(ctx, "f", p); err == nil || time.Since(start) > 5*time.Second {
			t.Fatalf("%s: exp a prompt refusal, got %v after %s", p, err, time.Since(start))
		}
	}
	_ = filepath.Join
}
