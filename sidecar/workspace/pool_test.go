package workspace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/patina-dev/patina/sidecar/template"
)

// TestPoolFillsAFewAtATime: the warm pool fills with at most poolFillers
// creates under way (a refill must not take the engine from the
// workspaces just given out), and a workspace taken from it has its first
// session started already, idle, with no command of anyone.
func TestPoolFillsAFewAtATime(t *testing.T) {
	eng := newFakeEngine(t)
	eng.createDelay = 30 * time.Millisecond
	m, err := New(Config{StateDir: t.TempDir(), DefaultImage: "img", AdoptWait: 2 * time.Second, InterruptGrace: 200 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler), WarmPool: 6}, eng, fakeImages{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	<-m.Adopt() // the pool starts once adoption is done
	full := func() { t.Helper(); waitPoolFull(t, m, 6) }
	full()
	if got := eng.maxCreating.Load(); got > poolFillers || got < 1 {
		t.Fatalf("%d creates were under way at once while the pool filled (at most %d)", got, poolFillers)
	}
	ctx := context.Background()
	for _, name := range []string{"a", "b", "c"} {
		ws, err := m.Create(ctx, CreateRequest{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		if m.poolTaken.Load() == 0 {
			t.Fatalf("create %s did not take a pooled workspace: %+v", name, ws)
		}
		ss, err := m.Sessions(ctx, name)
		if err != nil || len(ss) != 1 || ss[0].ID != DefaultSession || string(ss[0].State) != "idle" || ss[0].Commands != 0 {
			t.Fatalf("workspace %s's sessions when taken: %+v, %v (want default, idle, no command)", name, ss, err)
		}
	}
	// A create with its own environment, secret environment and idle stop
	// takes one too: its shells have them, the first session included.
	taken := m.poolTaken.Load()
	if _, err := m.Create(ctx, CreateRequest{Name: "d", Env: map[string]string{"MINE": "d"}, SecretEnv: map[string]string{"TOKEN": "s3cret"}, IdleStop: "1h"}); err != nil {
		t.Fatal(err)
	}
	if m.poolTaken.Load() != taken+1 {
		t.Fatal("a create with env did not take a pooled workspace")
	}
	if got := out(t, m, "d", "default", "echo $MINE $TOKEN"); got != "d s3cret\n" {
		t.Fatalf("the first session of a pooled workspace given env: %q", got)
	}
	if _, err := m.CreateSession(ctx, "d", CreateSessionRequest{ID: "later"}); err != nil {
		t.Fatal(err)
	}
	if got := out(t, m, "d", "later", "echo $MINE $TOKEN"); got != "d s3cret\n" {
		t.Fatalf("a new session of a pooled workspace given env: %q", got)
	}
	if inf, err := m.Get("d"); err != nil || inf.Env["MINE"] != "d" || inf.IdleStop != "1h0m0s" {
		t.Fatalf("the workspace's record: %+v %v", inf, err)
	}
	// A variable its shell will not take (read-only in bash) costs no
	// pooled workspace: the first session starts anew at the first exec.
	taken = m.poolTaken.Load()
	if _, err := m.Create(ctx, CreateRequest{Name: "ro", Env: map[string]string{"UID": "5", "OTHER": "o"}}); err != nil {
		t.Fatal(err)
	}
	if m.poolTaken.Load() != taken+1 {
		t.Fatal("a create with a read-only variable did not take a pooled workspace")
	}
	if got := out(t, m, "ro", "default", "echo $OTHER"); got != "o\n" {
		t.Fatalf("the first session after a read-only variable: %q", got)
	}
	// The next user's pooled workspace has none of it.
	if _, err := m.Create(ctx, CreateRequest{Name: "e"}); err != nil {
		t.Fatal(err)
	}
	if got := out(t, m, "e", "default", "echo [$MINE$TOKEN]"); got != "[]\n" {
		t.Fatalf("the next pooled workspace has the last one's env: %q", got)
	}
	full()
	// A name already taken is refused before a pooled workspace is taken.
	taken = m.poolTaken.Load()
	if _, err := m.Create(ctx, CreateRequest{Name: "a"}); !errors.Is(err, ErrExists) && Kind(err) != ErrConflict {
		t.Fatalf("a create of a taken name: %v", err)
	}
	if m.poolTaken.Load() != taken || m.Pool().Ready != 6 {
		t.Fatalf("a create of a taken name cost a pooled workspace: %+v", m.Pool())
	}
	if got := eng.maxCreating.Load(); got > poolFillers {
		t.Fatalf("%d creates were under way at once while the pool refilled (at most %d)", got, poolFillers)
	}
}

// waitPoolFull waits until m's pool has n workspaces ready.
func waitPoolFull(t *testing.T, m *Manager, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for m.Pool().Ready < n {
		if time.Now().After(deadline) {
			t.Fatalf("the pool did not fill: %+v", m.Pool())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// fakeTemplates serves templates by name; what is not there is
// template.ErrNotFound.
type fakeTemplates struct {
	mu  sync.Mutex
	all map[string]template.Template
}

func (f *fakeTemplates) Get(_ context.Context, name string) (template.Template, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.all[name]
	if !ok {
		return template.Template{}, fmt.Errorf("%w: no template %q", template.ErrNotFound, name)
	}
	return t, nil
}

func (f *fakeTemplates) set(t template.Template) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.all[t.Name] = t
}

func (f *fakeTemplates) Make(context.Context, template.Source) (template.Template, error) {
	return template.Template{}, errors.New("fakeTemplates makes none")
}

func (f *fakeTemplates) Snapshot(context.Context, template.SnapshotSource) (template.Template, error) {
	return template.Template{}, errors.New("fakeTemplates makes none")
}

// pooledOf counts the ready pooled workspaces of a template.
func pooledOf(m *Manager, tpl string) int {
	m.pool.mu.Lock()
	defer m.pool.mu.Unlock()
	n := 0
	for _, w := range m.pool.ready {
		if w.template() == tpl {
			n++
		}
	}
	return n
}

// TestPoolPerTemplate: --warm-template keeps a template's workspaces
// ready beside the default image's; a create of the template takes one
// (with the template's env), one of the default image takes a default
// one; a template rebuilt since its pooled workspaces were made hands out
// none of them and makes them anew; a template that cannot be made
// starves none of the others; ReleaseTemplate empties the template's pool and keeps it
// empty until done; a template that does not exist fills nothing and
// takes nothing.
func TestPoolPerTemplate(t *testing.T) {
	eng := newFakeEngine(t)
	tpls := &fakeTemplates{all: map[string]template.Template{}}
	tpls.set(template.Template{Name: "t1", Ref: "patina-template:t1", ImageID: "sha256:one", Spec: template.Spec{Env: map[string]string{"FROM_T": "one"}}})
	m, err := New(Config{StateDir: t.TempDir(), DefaultImage: "img", AdoptWait: 2 * time.Second, InterruptGrace: 200 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler), WarmPool: 1, WarmTemplates: map[string]int{"t1": 2, "missing": 5}, Templates: tpls}, eng, fakeImages{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	<-m.Adopt()
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %+v (t1 %d, default %d)", what, m.Pool(), pooledOf(m, "t1"), pooledOf(m, ""))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	full := func() bool { return pooledOf(m, "t1") == 2 && pooledOf(m, "") == 1 }
	waitFor("the pool did not fill", full)
	if st := m.Pool(); st.Size != 8 || st.Ready != 3 {
		t.Fatalf("pool status: %+v (size 8: 1 default, 2 of t1, 5 of a missing template, which starves none of the others)", st)
	}
	ctx := context.Background()

	taken := m.poolTaken.Load()
	ws, err := m.Create(ctx, CreateRequest{Name: "a", Template: "t1", Env: map[string]string{"MINE": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	if m.poolTaken.Load() != taken+1 || ws.Template != "t1" || ws.Image != "patina-template:t1" {
		t.Fatalf("a create of t1 did not take t1's pooled workspace: %+v", ws)
	}
	if got := out(t, m, "a", DefaultSession, "echo $FROM_T $MINE"); got != "one a\n" {
		t.Fatalf("t1's pooled workspace given out: %q (want the template's env and the create's)", got)
	}
	if users := m.TemplateUsers("t1"); len(users) != 1 || users[0] != "a" {
		t.Fatalf("t1's users: %v (want a, not its pooled ones)", users)
	}
	if ws, err := m.Create(ctx, CreateRequest{Name: "b"}); err != nil || m.poolTaken.Load() != taken+2 || ws.Template != "" || ws.Image != "img" {
		t.Fatalf("a create of the default image: %+v, %v (pool taken %d)", ws, err, m.poolTaken.Load()-taken)
	}
	waitFor("the pool did not refill", full)

	// The same image under another name (a repository's devcontainer.json
	// names its template by its content): t1's pooled workspaces serve it.
	tpls.set(template.Template{Name: "dc-same", Ref: "patina-template:dc-same", ImageID: "sha256:one", Spec: template.Spec{Env: map[string]string{"FROM_T": "one"}}})
	taken = m.poolTaken.Load()
	if ws, err := m.Create(ctx, CreateRequest{Name: "alias", Template: "dc-same"}); err != nil || m.poolTaken.Load() != taken+1 || ws.Template != "dc-same" || ws.Image != "patina-template:dc-same" {
		t.Fatalf("a create of t1's image under another name: %+v, %v (pool taken %d)", ws, err, m.poolTaken.Load()-taken)
	}
	waitFor("the pool did not refill", full)

	// Rebuilt since: its pooled workspaces are of the old image.
	tpls.set(template.Template{Name: "t1", Ref: "patina-template:t1", ImageID: "sha256:two"})
	taken = m.poolTaken.Load()
	if _, err := m.Create(ctx, CreateRequest{Name: "c", Template: "t1"}); err != nil {
		t.Fatal(err)
	}
	if m.poolTaken.Load() != taken {
		t.Fatal("a create of a rebuilt template took a workspace pooled from its old image")
	}
	// Those of the old image go, and the pool makes them anew.
	waitFor("t1's pool made anew from its new image", func() bool {
		m.pool.mu.Lock()
		defer m.pool.mu.Unlock()
		n := 0
		for _, w := range m.pool.ready {
			w.mu.Lock()
			if w.meta.Template == "t1" && w.meta.TemplateImage == "sha256:two" {
				n++
			}
			w.mu.Unlock()
		}
		return n == 2
	}) // and no other of t1: pooledOf below counts them all
	if n := pooledOf(m, "t1"); n != 2 {
		t.Fatalf("t1 has %d pooled workspaces, want 2", n)
	}

	// Released: none of t1 pooled or filled until done.
	done := m.ReleaseTemplate(ctx, "t1")
	if n := pooledOf(m, "t1"); n != 0 {
		t.Fatalf("%d of t1's pooled workspaces left after ReleaseTemplate", n)
	}
	time.Sleep(200 * time.Millisecond)
	if n := pooledOf(m, "t1"); n != 0 {
		t.Fatalf("t1 refilled while released: %d", n)
	}
	for _, w := range m.all() {
		if w.isPooled() && w.template() == "t1" {
			t.Fatalf("a pooled workspace of t1 is still known while released: %s", w.meta.ID)
		}
	}
	done()
	waitFor("t1 did not refill after release", func() bool { return pooledOf(m, "t1") == 2 })

	// A template that is not there: a 400, nothing taken.
	taken = m.poolTaken.Load()
	if _, err := m.Create(ctx, CreateRequest{Name: "d", Template: "missing"}); Kind(err) != ErrInvalid {
		t.Fatalf("a create of a missing template: %v (want invalid)", err)
	}
	if m.poolTaken.Load() != taken {
		t.Fatal("a create of a missing template took a pooled workspace")
	}
}

// TestPoolRepository: a repository create takes a pooled workspace: its
// branch is made with the pooled workspace's id, the base's objects are
// shipped to it (no host directory or object store mounted: its
// container was made before the repository was named), and diff and merge
// work as for any workspace. A create the repository refuses (a base it
// does not have, a branch already there) gets the repository's answer and
// costs no pooled workspace; delete takes the branch.
func TestPoolRepository(t *testing.T) {
	eng := newFakeEngine(t)
	m, err := New(Config{StateDir: t.TempDir(), DefaultImage: "img", AdoptWait: 2 * time.Second, InterruptGrace: 200 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler), WarmPool: 2}, eng, fakeImages{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	<-m.Adopt()
	full := func() { t.Helper(); waitPoolFull(t, m, 2) }
	full()
	ctx := context.Background()
	repo := gitRepo(t)
	gitOut(t, repo, "branch", "patina/kept")

	for _, tc := range []struct {
		req  CreateRequest
		kind error
	}{
		{CreateRequest{Name: "nobase", Repo: repo, Base: "no-such-branch"}, ErrInvalid},
		{CreateRequest{Name: "kept", Repo: repo}, ErrConflict},
	} {
		_, err := m.Create(ctx, tc.req)
		if Kind(err) != tc.kind {
			t.Fatalf("create %s: %v (want %v)", tc.req.Name, err, tc.kind)
		}
		if m.poolTaken.Load() != 0 || m.Pool().Ready != 2 {
			t.Fatalf("a create the repository refused cost a pooled workspace: %+v", m.Pool())
		}
	}

	ws, err := m.Create(ctx, CreateRequest{Name: "r", Repo: repo, Env: map[string]string{"MINE": "r"}})
	if err != nil {
		t.Fatal(err)
	}
	if m.poolTaken.Load() != 1 || ws.Branch != "patina/r" || ws.Worktree != "" {
		t.Fatalf("a repository create: %+v (pool taken %d)", ws, m.poolTaken.Load())
	}
	c := eng.container(t, ws.ID)
	if c.spec.Files != "" || len(c.spec.Mounts) != 0 {
		t.Fatalf("exp no host directory or objects mounted, got files %q mounts %+v", c.spec.Files, c.spec.Mounts)
	}
	dir := filepath.Join(c.dir, "workspace")
	if got := out(t, m, "r", DefaultSession, "cd "+dir+" && git log --format=%s && git branch --show-current && echo $MINE"); got != "init\npatina/r\nr\n" {
		t.Fatalf("the pooled workspace given the repository: %q", got)
	}
	out(t, m, "r", DefaultSession, "cd "+dir+" && echo pooled > p.txt && git add p.txt && git commit -qm pooled")
	d, err := m.Diff(ctx, "r")
	if err != nil || len(d.Files) != 1 || d.Files[0].Path != "p.txt" {
		t.Fatalf("diff: %+v %v", d, err)
	}
	if _, err := m.Merge(ctx, "r", MergeRequest{Commit: d.Commit}); err != nil {
		t.Fatal(err)
	}
	if got := gitOut(t, repo, "show", "main:p.txt"); got != "pooled" {
		t.Fatalf("exp the workspace's file merged, got %q", got)
	}
	if err := m.Delete(ctx, "r", false); err != nil {
		t.Fatal(err)
	}
	if got := gitOut(t, repo, "branch", "--list", "patina/r"); got != "" {
		t.Fatalf("the branch survived: %q", got)
	}
}
